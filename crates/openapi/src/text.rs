//! Percent-decoding of path segments, query and form values and JSON
//! pointers: a leaf that the parameter rules, the router and the spec
//! loader all use. Hand-written rather than the `percent-encoding` crate
//! because a malformed escape (`%zz`, `%2`) must be an error here, where
//! that crate passes it through.

use std::borrow::Cow;

/// Decodes `%XX` escapes (and `+` as space when `plus_as_space`).
/// Borrows when there is nothing to decode; `Err` on a malformed escape.
pub(crate) fn percent_decode(raw: &[u8], plus_as_space: bool) -> Result<Cow<'_, [u8]>, ()> {
    if !raw
        .iter()
        .any(|&b| b == b'%' || (plus_as_space && b == b'+'))
    {
        return Ok(Cow::Borrowed(raw));
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'%' => {
                let hi = raw.get(i + 1).and_then(|&b| hex(b)).ok_or(())?;
                let lo = raw.get(i + 2).and_then(|&b| hex(b)).ok_or(())?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' if plus_as_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(Cow::Owned(out))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes and checks UTF-8; the violation message on failure.
pub(crate) fn decode_text(raw: &[u8], plus_as_space: bool) -> Result<Cow<'_, str>, &'static str> {
    match percent_decode(raw, plus_as_space).map_err(|()| "has an invalid percent-encoding")? {
        Cow::Borrowed(bytes) => std::str::from_utf8(bytes)
            .map(Cow::Borrowed)
            .map_err(|_| "is not valid UTF-8"),
        Cow::Owned(bytes) => String::from_utf8(bytes)
            .map(Cow::Owned)
            .map_err(|_| "is not valid UTF-8 once percent-decoded"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert!(matches!(
            percent_decode(b"abc", true),
            Ok(Cow::Borrowed(b"abc"))
        ));
        assert_eq!(
            percent_decode(b"a%20b+c", true).as_deref(),
            Ok(&b"a b c"[..])
        );
        assert_eq!(percent_decode(b"a+b", false).as_deref(), Ok(&b"a+b"[..]));
        assert_eq!(
            percent_decode(b"%E2%82%ac", false).as_deref(),
            Ok("€".as_bytes())
        );
        for bad in [&b"%"[..], b"%2", b"%zz", b"a%g1"] {
            assert!(percent_decode(bad, false).is_err());
        }
        assert_eq!(
            decode_text(b"%ff", false),
            Err("is not valid UTF-8 once percent-decoded")
        );
        assert_eq!(decode_text(b"\xff", false), Err("is not valid UTF-8"));
    }
}
