//! `api_key`: a key in a header (or a query parameter) admits the request
//! under the key's name (docs/MIDDLEWARE.md). Keys are held as SHA-256
//! digests only, and a presented key's digest is compared with every
//! known one in constant time, so neither memory nor timing tells a key.
//! The key never goes upstream, in its header or in the query (the
//! parameter is taken out, the others kept as sent); its name does, in a
//! header that a client's own copy of is always dropped first.

use std::sync::Arc;

use anyhow::bail;
use http::{header, HeaderName, HeaderValue, StatusCode};
use subtle::ConstantTimeEq as _;

use super::{
    build::{Build, Builder},
    watched::Watched,
    Answer, Exchange, Flow, Handler, RequestView,
};
use crate::{config::ApiKeySettings, wire::edits::without_parameter};

type Digest = [u8; 32];

/// Known keys: digest and name.
#[derive(Debug, Default)]
pub(crate) struct KeyList(Vec<(Digest, HeaderValue)>);

fn digest(key: &[u8]) -> Digest {
    let mut out = [0; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, key).as_ref());
    out
}

impl KeyList {
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    fn add(&mut self, name: &str, digest: Digest) -> anyhow::Result<()> {
        let Ok(name) = HeaderValue::from_str(name) else {
            bail!(
                "the key name `{}` is not a header value",
                name.escape_debug()
            );
        };
        self.0.push((digest, name));
        Ok(())
    }

    /// The name of the key whose digest is `presented`'s: every entry is
    /// compared, in constant time each.
    fn find(&self, presented: &[u8]) -> Option<&HeaderValue> {
        let wanted = digest(presented);
        let mut found = None;
        for (known, name) in &self.0 {
            if bool::from(known.ct_eq(&wanted)) {
                found = Some(name);
            }
        }
        found
    }

    /// `name: key` lines (`name: sha256:HEX` for a digest); `#` comments.
    /// Errors name the line, never the key.
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let mut keys = Self::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((name, key)) = line.split_once(':') else {
                bail!("line {}: not `name: key`", n + 1);
            };
            let (name, key) = (name.trim(), key.trim());
            if name.is_empty() || key.is_empty() {
                bail!("line {}: the name and the key must not be empty", n + 1);
            }
            let digest = match key.strip_prefix("sha256:") {
                Some(hex) => from_hex(hex).ok_or_else(|| {
                    anyhow::anyhow!("line {}: sha256: needs 64 hex digits", n + 1)
                })?,
                None => digest(key.as_bytes()),
            };
            keys.add(name, digest)
                .map_err(|err| anyhow::anyhow!("line {}: {err}", n + 1))?;
        }
        Ok(keys)
    }
}

fn from_hex(hex: &str) -> Option<Digest> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

#[derive(Debug)]
pub(crate) struct ApiKeyChecker {
    inline: KeyList,
    file: Option<Arc<Watched<KeyList>>>,
    header: Option<HeaderName>,
    query: Option<String>,
    forward_name: Option<HeaderName>,
}

impl Build for ApiKeySettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(ApiKeyChecker::new(self)?))
    }
}

impl ApiKeyChecker {
    pub(crate) fn new(settings: &ApiKeySettings) -> anyhow::Result<Self> {
        if settings.header.is_none() && settings.query.is_none() {
            bail!("give `header` or `query`: where the key is carried");
        }
        let mut inline = KeyList::default();
        for (name, key) in &settings.keys {
            if key.expose().is_empty() {
                bail!("keys.{name}: the key is empty (an unset ${{VAR}}?)");
            }
            inline.add(name, digest(key.expose().as_bytes()))?;
        }
        let file = match &settings.keys_file {
            Some(path) => Some(Watched::start(
                &path.value,
                settings.reload,
                KeyList::parse,
            )?),
            None => None,
        };
        if file.is_none() && inline.0.is_empty() {
            bail!("give `keys` or `keys_file`");
        }
        Ok(Self {
            inline,
            file,
            header: settings.header.as_ref().map(|h| h.0.clone()),
            query: settings.query.clone(),
            forward_name: settings.forward_name.as_ref().map(|h| h.0.clone()),
        })
    }

    /// The key the request carries: the header, else the query parameter.
    fn presented<'a>(&self, request: &RequestView<'a>) -> Option<std::borrow::Cow<'a, [u8]>> {
        if let Some(value) = self
            .header
            .as_ref()
            .and_then(|h| request.header(h.as_str()))
        {
            return Some(value.into());
        }
        let name = self.query.as_deref()?;
        let query = request.query?;
        query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            (key == name).then(|| {
                percent_encoding::percent_decode_str(value)
                    .collect::<Vec<u8>>()
                    .into()
            })
        })
    }
}

fn unauthorized(detail: &str) -> Flow {
    Flow::Answer(
        Answer::problem(StatusCode::UNAUTHORIZED, detail).with_header(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("ApiKey realm=\"sluice\""),
        ),
    )
}

impl Handler for ApiKeyChecker {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        if let Some(name) = &self.forward_name {
            exchange.request_headers.remove.push(name.clone());
        }
        let Some(key) = self.presented(request) else {
            return unauthorized("an API key is required");
        };
        let from_file = self.file.as_ref().map(|f| f.load());
        // Both lists are searched whatever the first says: the time taken
        // depends on how many keys there are, not on which one matched.
        let inline = self.inline.find(&key);
        let filed = from_file.as_ref().and_then(|keys| keys.find(&key));
        let Some(name) = inline.or(filed) else {
            return unauthorized("the API key is not valid");
        };
        if let Some(header) = &self.header {
            exchange.request_headers.remove.push(header.clone());
        }
        if let Some(forward) = &self.forward_name {
            exchange.request_headers.set(forward.clone(), name.clone());
        }
        if let Some(parameter) = &self.query {
            // Nor in the query: every parameter of the name goes.
            let edits = &mut exchange.request_headers;
            if let Some(query) = edits.query.as_deref().or(request.query) {
                if let Some(kept) = without_parameter(query, parameter) {
                    edits.query = Some(kept);
                }
            }
        }
        Flow::Next
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::Secret;

    /// Inline keys by name, for tests.
    fn inline(keys: &[(&str, &str)]) -> BTreeMap<String, Secret> {
        keys.iter()
            .map(|(n, k)| {
                (
                    (*n).to_string(),
                    serde_json::from_value(serde_json::Value::String((*k).into())).expect("a key"),
                )
            })
            .collect()
    }

    #[test]
    fn a_key_is_found_by_its_digest_and_others_are_not() {
        let keys = KeyList::parse(
            "# ci keys\nci: s3cr3t-key\nops: sha256:2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b\n",
        )
        .unwrap();
        assert_eq!(keys.find(b"s3cr3t-key").unwrap(), "ci");
        // sha256("secret")
        assert_eq!(keys.find(b"secret").unwrap(), "ops");
        assert!(keys.find(b"s3cr3t-kez").is_none());
        assert!(keys.find(b"").is_none());
    }

    #[test]
    fn a_bad_line_is_named_without_its_key() {
        let err = KeyList::parse("ok: fine\njust-a-secret-value\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
        assert!(!err.contains("just-a-secret-value"), "{err}");
        let err = KeyList::parse("x: sha256:abc\n").unwrap_err().to_string();
        assert!(err.contains("64 hex"), "{err}");
    }

    #[test]
    fn settings_without_keys_or_carrier_are_refused() {
        let mut settings: ApiKeySettings = serde_json::from_value(serde_json::json!({})).unwrap();
        assert!(ApiKeyChecker::new(&settings).is_err());
        settings.keys = inline(&[("ci", "k")]);
        assert!(ApiKeyChecker::new(&settings).is_ok());
        settings.header = None;
        assert!(ApiKeyChecker::new(&settings).is_err());
    }
}
