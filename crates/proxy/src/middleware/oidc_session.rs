//! What the `oidc` handler keeps in cookies and asks the provider:
//! sealed cookies (AES-256-GCM, a random nonce each, the cookie's purpose
//! as associated data so a login cookie never opens as a session), PKCE,
//! the discovery document and the token endpoint's answers.

use std::time::Duration;

use anyhow::{bail, Context as _};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use ring::{
    aead::{self, Aad, LessSafeKey, Nonce, UnboundKey, NONCE_LEN},
    rand::{SecureRandom as _, SystemRandom},
};
use serde::{Deserialize, Serialize};

use http::{header, HeaderValue};

use super::{jwks::call, Exchange, RequestView};
use crate::config::Secret;

/// Seals with the first key; opens with any (keys rotate on reload).
pub(crate) struct Sealer {
    keys: Vec<LessSafeKey>,
    random: SystemRandom,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sealer({} keys)", self.keys.len())
    }
}

impl Sealer {
    pub(crate) fn new(keys: &[Secret]) -> anyhow::Result<Self> {
        if keys.is_empty() {
            bail!("cookie_keys: give at least one key (32 random bytes, base64: openssl rand -base64 32)");
        }
        let mut sealing = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let text = key.expose().trim();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .or_else(|_| URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')))
                .ok()
                .filter(|b| b.len() == 32)
                .with_context(|| format!("cookie_keys[{i}]: not 32 bytes in base64"))?;
            let key = UnboundKey::new(&aead::AES_256_GCM, &bytes)
                .map_err(|_| anyhow::anyhow!("cookie_keys[{i}]: not an AES-256 key"))?;
            sealing.push(LessSafeKey::new(key));
        }
        Ok(Self {
            keys: sealing,
            random: SystemRandom::new(),
        })
    }

    /// `purpose` is bound to the cookie: one sealed for another purpose does not open.
    pub(crate) fn seal(&self, purpose: &str, plain: &[u8]) -> String {
        let mut nonce = [0; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .expect("the system's random source");
        let mut sealed = plain.to_vec();
        self.keys[0]
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(purpose.as_bytes()),
                &mut sealed,
            )
            .expect("AES-GCM seals any length a cookie can have");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// The plain bytes, when a key of ours sealed `text` for `purpose`.
    pub(crate) fn open(&self, purpose: &str, text: &str) -> Option<Vec<u8>> {
        if text.len() > 16 * 1024 {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        if bytes.len() < NONCE_LEN + aead::AES_256_GCM.tag_len() {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        self.keys.iter().find_map(|key| {
            let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
            let mut buf = sealed.to_vec();
            let plain = key
                .open_in_place(nonce, Aad::from(purpose.as_bytes()), &mut buf)
                .ok()?;
            Some(plain.to_vec())
        })
    }

    /// `n` random bytes, base64url.
    pub(super) fn random_text(&self, n: usize) -> String {
        let mut bytes = vec![0; n];
        self.random
            .fill(&mut bytes)
            .expect("the system's random source");
        URL_SAFE_NO_PAD.encode(bytes)
    }
}

/// A login under way: what the callback must find again.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Login {
    pub state: String,
    pub nonce: String,
    pub verifier: String,
    /// Where the browser goes after the login: a path on this site.
    pub return_to: String,
    /// Unix seconds.
    pub expires: u64,
}

/// A session: the ID token (verified again on each request, from the
/// verifier's cache) and the refresh token.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Session {
    pub id_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// Unix seconds: the session ends then, refreshes included.
    pub expires: u64,
}

/// PKCE's S256 challenge of `verifier`.
pub(super) fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        verifier.as_bytes(),
    ))
}

/// The provider's endpoints, from its discovery document.
#[derive(Debug, Deserialize)]
pub(super) struct Discovery {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    #[serde(default)]
    pub end_session_endpoint: Option<String>,
    #[serde(default)]
    pub id_token_signing_alg_values_supported: Vec<String>,
}

/// Reads the discovery document of `issuer` (on a thread of its own: the
/// caller may be inside a runtime).
pub(super) fn discover(issuer: &str, timeout: Duration) -> anyhow::Result<Discovery> {
    let url: http::Uri = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    )
    .parse()
    .context("the issuer does not make a discovery URL")?;
    let shown = url.to_string();
    let answer = std::thread::spawn(move || -> anyhow::Result<(http::StatusCode, Vec<u8>)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            tokio::time::timeout(
                timeout,
                call(&url, "GET", "Accept: application/json\r\n", b""),
            )
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {timeout:?}"))?
        })
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the discovery thread panicked"))?;
    let (status, body) =
        answer.with_context(|| format!("cannot read the discovery document {shown}"))?;
    if status != http::StatusCode::OK {
        bail!("{shown} answered {status}");
    }
    let discovery: Discovery = serde_json::from_slice(&body)
        .with_context(|| format!("{shown}: not a discovery document"))?;
    if discovery.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
        bail!(
            "{shown} names the issuer `{}`, not `{issuer}`",
            discovery.issuer
        );
    }
    Ok(discovery)
}

/// The token endpoint's answer.
#[derive(Debug, Deserialize)]
pub(super) struct Tokens {
    pub id_token: Option<String>,
    pub refresh_token: Option<String>,
}

/// Why the token endpoint gave no tokens.
#[derive(Debug)]
pub(super) enum TokenError {
    /// It refused (400/401): a replayed or stale code, a revoked refresh token.
    Refused,
    /// It could not be reached or answered nonsense.
    Unavailable,
}

/// What a form value keeps as it is: RFC 3986's unreserved characters.
const FORM_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `application/x-www-form-urlencoded` of `pairs` (also a query string).
pub(super) fn form(pairs: &[(&str, &str)]) -> String {
    use percent_encoding::utf8_percent_encode;
    let mut out = String::new();
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(&utf8_percent_encode(name, FORM_VALUE).to_string());
        out.push('=');
        out.push_str(&utf8_percent_encode(value, FORM_VALUE).to_string());
    }
    out
}

/// A POST of `body` to the token endpoint, the client authenticated by
/// HTTP Basic (`client_secret_basic`) when it has a secret.
pub(super) async fn tokens(
    endpoint: &http::Uri,
    client_id: &str,
    secret: Option<&str>,
    body: String,
    timeout: Duration,
) -> Result<Tokens, TokenError> {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    let mut extra = String::from(
        "Content-Type: application/x-www-form-urlencoded\r\nAccept: application/json\r\n",
    );
    if let Some(secret) = secret {
        let pair = format!(
            "{}:{}",
            utf8_percent_encode(client_id, NON_ALPHANUMERIC),
            utf8_percent_encode(secret, NON_ALPHANUMERIC)
        );
        extra.push_str(&format!(
            "Authorization: Basic {}\r\n",
            base64::engine::general_purpose::STANDARD.encode(pair)
        ));
    }
    let answer = tokio::time::timeout(timeout, call(endpoint, "POST", &extra, body.as_bytes()))
        .await
        .map_err(|_| TokenError::Unavailable)?
        .map_err(|_| TokenError::Unavailable)?;
    match answer.0.as_u16() {
        200 => serde_json::from_slice(&answer.1).map_err(|_| TokenError::Unavailable),
        400 | 401 => Err(TokenError::Refused),
        _ => Err(TokenError::Unavailable),
    }
}

/// The value of `name` among the `Cookie` fields' pairs.
pub(crate) fn cookie<'a>(values: impl Iterator<Item = &'a [u8]>, name: &str) -> Option<&'a str> {
    values
        .filter_map(|v| std::str::from_utf8(v).ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (n, v) = pair.trim().split_once('=')?;
            (n == name).then_some(v)
        })
}

/// The query parameter `name`, percent-decoded.
pub(crate) fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (n, v) = pair.split_once('=')?;
        (n == name).then(|| {
            percent_encoding::percent_decode_str(&v.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

/// The `Cookie` fields without ours, for the upstream.
pub(super) fn strip_cookies(request: &RequestView<'_>, names: [&str; 2], exchange: &mut Exchange) {
    let mut kept = Vec::new();
    let mut ours = false;
    for value in request.fields.get_all("cookie") {
        for pair in String::from_utf8_lossy(value).split(';') {
            let name = pair.trim().split('=').next().unwrap_or_default();
            if names.contains(&name) {
                ours = true;
            } else if !pair.trim().is_empty() {
                kept.push(pair.trim().to_string());
            }
        }
    }
    if !ours {
        return;
    }
    match HeaderValue::from_str(&kept.join("; ")) {
        Ok(value) if !kept.is_empty() => exchange.request_headers.set(header::COOKIE, value),
        _ => exchange.request_headers.remove.push(header::COOKIE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> Secret {
        let text = base64::engine::general_purpose::STANDARD.encode([byte; 32]);
        serde_json::from_value(serde_json::Value::String(text)).unwrap()
    }

    #[test]
    fn a_cookie_opens_with_any_listed_key_and_for_its_purpose_only() {
        let old = Sealer::new(&[key(1)]).unwrap();
        let rotated = Sealer::new(&[key(2), key(1)]).unwrap();
        let other = Sealer::new(&[key(3)]).unwrap();
        let sealed = old.seal("session", b"hello");
        assert_eq!(rotated.open("session", &sealed).unwrap(), b"hello");
        assert!(other.open("session", &sealed).is_none());
        assert!(old.open("login", &sealed).is_none());
        let mut tampered = sealed.into_bytes();
        let last = tampered.len() - 3;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        assert!(old
            .open("session", std::str::from_utf8(&tampered).unwrap())
            .is_none());
        assert!(old.open("session", "!!").is_none());
    }

    #[test]
    fn keys_must_be_32_bytes() {
        let short: Secret = serde_json::from_value(serde_json::json!("c2hvcnQ=")).unwrap();
        let err = Sealer::new(&[key(1), short]).unwrap_err().to_string();
        assert!(
            err.contains("cookie_keys[1]") && !err.contains("c2hvcnQ"),
            "{err}"
        );
    }

    #[test]
    fn pkce_challenge_is_rfc_7636s_example() {
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn cookies_and_query_parameters_are_found_by_exact_name() {
        let fields: [&[u8]; 2] = [b"a=1; sluice_session=xyz", b"sluice_session_login=abc"];
        assert_eq!(
            cookie(fields.iter().copied(), "sluice_session"),
            Some("xyz")
        );
        assert_eq!(
            cookie(fields.iter().copied(), "sluice_session_login"),
            Some("abc")
        );
        assert_eq!(
            query_param(Some("code=a%2Fb&state=s+t"), "state").as_deref(),
            Some("s t")
        );
        assert_eq!(
            query_param(Some("code=a%2Fb"), "code").as_deref(),
            Some("a/b")
        );
    }
}
