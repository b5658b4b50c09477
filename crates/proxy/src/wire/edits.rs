//! Header changes for one message, made by the middleware and applied by
//! the head writers while the head goes out (nothing is copied twice).

use http::{HeaderName, HeaderValue};

/// Header changes for one message, applied while its head is written.
#[derive(Debug, Default)]
pub(crate) struct HeaderEdits {
    pub remove: Vec<HeaderName>,
    /// Replace every field of the name.
    pub set: Vec<(HeaderName, HeaderValue)>,
    pub add: Vec<(HeaderName, HeaderValue)>,
    /// A request's query as it goes upstream, where a handler took
    /// parameters out of the client's (`api_key`'s key); empty: none.
    pub query: Option<String>,
}

impl HeaderEdits {
    /// Whether a field of the message called `name` is dropped (removed or replaced).
    pub(crate) fn drops(&self, name: &[u8]) -> bool {
        let named = |n: &HeaderName| name.eq_ignore_ascii_case(n.as_str().as_bytes());
        self.remove.iter().any(named) || self.set.iter().any(|(n, _)| named(n))
    }

    /// The fields to append.
    pub(crate) fn appended(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.set
            .iter()
            .chain(&self.add)
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.set.is_empty() && self.add.is_empty() && self.query.is_none()
    }

    pub(crate) fn clear(&mut self) {
        self.remove.clear();
        self.set.clear();
        self.add.clear();
        self.query = None;
    }

    /// Sets `name`, replacing an earlier set of the same name.
    pub(crate) fn set(&mut self, name: HeaderName, value: HeaderValue) {
        self.set.retain(|(n, _)| *n != name);
        self.set.push((name, value));
    }
}

/// `query` without its `name=...` parameters (a name percent-decoded
/// to `name` counts: an upstream would read it so); the others stay
/// byte for byte in their order. `None` when there was none to remove.
pub(crate) fn without_parameter(query: &str, name: &str) -> Option<String> {
    let named = |pair: &&str| {
        let key = pair.split_once('=').map_or(*pair, |(key, _)| key);
        key == name || percent_encoding::percent_decode_str(key).eq(name.bytes())
    };
    if !query.split('&').any(|pair| named(&pair)) {
        return None;
    }
    let kept: Vec<&str> = query.split('&').filter(|pair| !named(pair)).collect();
    Some(kept.join("&"))
}

/// `edits` with a `Set-Cookie: cookie` added, if there is a cookie.
#[inline]
pub(crate) fn with_cookie(
    edits: Option<HeaderEdits>,
    cookie: Option<&http::HeaderValue>,
) -> Option<HeaderEdits> {
    let Some(cookie) = cookie else {
        return edits;
    };
    let mut edits = edits.unwrap_or_default();
    edits.add.push((http::header::SET_COOKIE, cookie.clone()));
    Some(edits)
}

#[cfg(test)]
mod tests {
    use super::without_parameter;

    #[test]
    fn a_parameter_is_taken_out_and_the_rest_kept_byte_for_byte() {
        let cases = [
            ("a=1&api_key=k&b=%20x&&c", Some("a=1&b=%20x&&c")),
            ("api_key=k", Some("")),
            ("api_key", Some("")),
            ("api_key=k&api_key=j&z=9", Some("z=9")),
            ("z=9&api%5Fkey=k&api%5fkey", Some("z=9")),
            ("api_keys=k&xapi_key=1&a=api_key", None),
            ("&api_key=k&a", Some("&a")),
        ];
        for (query, kept) in cases {
            assert_eq!(
                without_parameter(query, "api_key").as_deref(),
                kept,
                "{query}"
            );
        }
    }
}
