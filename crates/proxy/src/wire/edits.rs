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
        self.remove.is_empty() && self.set.is_empty() && self.add.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.remove.clear();
        self.set.clear();
        self.add.clear();
    }

    /// Sets `name`, replacing an earlier set of the same name.
    pub(crate) fn set(&mut self, name: HeaderName, value: HeaderValue) {
        self.set.retain(|(n, _)| *n != name);
        self.set.push((name, value));
    }
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
