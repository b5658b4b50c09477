//! Text in and out: percent-decoding of path segments, query and form
//! values and JSON pointers, and the quoting and cutting of values echoed
//! in violation messages. A leaf that the parameter rules, the schema
//! checks, the router and the spec loader all use. Decoding is
//! hand-written rather than the `percent-encoding` crate because a
//! malformed escape (`%zz`, `%2`) must be an error here, where that crate
//! passes it through.

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

/// How far an echoed value is shown in a message before it is cut: a
/// violation is safe to send back, so a hostile value cannot make it large.
pub(crate) const ECHO_CHARS: usize = 64;

/// `text` cut to at most `max` characters, with `…` when cut.
pub(crate) fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => {
            let mut out = String::with_capacity(at + 3);
            out.push_str(&text[..at]);
            out.push('…');
            out
        }
    }
}

/// A value shown in a message: quoted, escaped like Rust's `{:?}`, and cut
/// (with `…`) once the escaped text reaches [`ECHO_CHARS`] characters.
pub(crate) fn show(value: &str) -> String {
    let mut out = String::with_capacity(ECHO_CHARS + 8);
    out.push('"');
    let mut shown = 0;
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        // `'` inside double quotes needs no escape; `escape_debug` adds one.
        if c == '\'' {
            shown += 1;
            out.push(c);
        } else {
            let escaped = c.escape_debug();
            shown += escaped.len();
            out.extend(escaped);
        }
        if shown >= ECHO_CHARS {
            if !chars.as_str().is_empty() {
                out.push('…');
            }
            break;
        }
    }
    out.push('"');
    out
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

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate_chars("héllo", 2), "hé…");
        assert_eq!(truncate_chars("abc", 3), "abc");
        assert_eq!(truncate_chars("abcd", 3), "abc…");
        assert_eq!(truncate_chars("", 0), "");
    }

    #[test]
    fn shown_values_are_quoted_escaped_and_cut() {
        assert_eq!(show("it's"), "\"it's\"");
        assert_eq!(show("a\"b\n"), "\"a\\\"b\\n\"");
        let exactly = "x".repeat(ECHO_CHARS);
        assert_eq!(show(&exactly), format!("\"{exactly}\""));
        let longer = "x".repeat(ECHO_CHARS + 1);
        assert_eq!(show(&longer), format!("\"{exactly}…\""));
        // An escape counts as the characters it shows: 32 `\n` fill the 64.
        let newlines = "\n".repeat(40);
        assert_eq!(show(&newlines), format!("\"{}…\"", "\\n".repeat(32)));
    }
}
