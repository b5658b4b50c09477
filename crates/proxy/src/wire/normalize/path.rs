//! Path normalisation: RFC 3986 6.2.2 (case and percent-encoding
//! normalisation) then 5.2.4 (dot segments), with merged slashes and `;`
//! path parameters as `paths` says. Routes match the result and, by
//! default, the upstream receives it, so that the proxy and the backend
//! agree on which resource was asked for.
//!
//! Nearly every path is already normal: [`normalize`] checks that in one
//! scan and returns it borrowed; only the rest is rebuilt.

use std::borrow::Cow;

use super::{
    unicode::{fold_case, Utf8},
    Refusal,
};
use crate::config::{Case, DoubleEncoding, EscapedSlash, PathSettings, Semicolon};

/// A path in normal form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalPath<'a> {
    /// The normal path (sent upstream with `paths.forward: normalized`).
    pub path: Cow<'a, str>,
    /// What routes match when it differs from `path`: `path` without its
    /// segments' `;` parameters (`paths.semicolon: strip_for_matching`),
    /// and with the non-ASCII letters that fold to ASCII ones folded
    /// (`paths.case: insensitive`).
    pub matching: Option<String>,
}

impl NormalPath<'_> {
    /// The path routes are matched against.
    pub fn for_matching(&self) -> &str {
        self.matching.as_deref().unwrap_or(&self.path)
    }
}

/// The normal form of an origin-form path (no query), or why it has none.
pub fn normalize<'a>(path: &'a str, paths: &PathSettings) -> Result<NormalPath<'a>, Refusal> {
    let (path, parameters, non_ascii) = match scan(path.as_bytes(), paths) {
        Scan::Normal {
            parameters,
            non_ascii,
        } => (Cow::Borrowed(path), parameters, non_ascii),
        Scan::Rewrite => {
            let rewritten = rewrite(path.as_bytes(), paths)?;
            let parameters = paths.semicolon == Semicolon::StripForMatching
                && parameters_at(&rewritten) < rewritten.len();
            (Cow::Owned(rewritten), parameters, true)
        }
    };
    let mut matching = parameters
        .then(|| without_parameters(&path, paths.merge_slashes))
        .filter(|stripped| *stripped != path);
    if non_ascii && paths.case == Case::Insensitive {
        if let Some(folded) = fold_case(matching.as_deref().unwrap_or(&path)) {
            matching = Some(folded);
        }
    }
    Ok(NormalPath { path, matching })
}

/// What one scan found.
pub(super) enum Scan {
    /// Already normal. `parameters`: it may have `;` (or `%3B`) parameters
    /// to strip for matching; `non_ascii`: it has escapes of non-ASCII
    /// bytes (letters that may fold to ASCII ones).
    Normal { parameters: bool, non_ascii: bool },
    /// Something to decode, encode, remove or refuse.
    Rewrite,
}

/// How a byte may appear in a normal path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// unreserved, sub-delims other than `;`, `:` and `@` (RFC 3986 3.3).
    Plain,
    Slash,
    Semicolon,
    Percent,
    /// Anything else: to be encoded, or refused.
    Other,
}

const fn classes() -> [Class; 256] {
    let mut table = [Class::Other; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b'='
                    | b':'
                    | b'@'
            )
        {
            table[b] = Class::Plain;
        }
        b += 1;
    }
    table[b'/' as usize] = Class::Slash;
    table[b';' as usize] = Class::Semicolon;
    table[b'%' as usize] = Class::Percent;
    table
}

static CLASSES: [Class; 256] = classes();

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_control(b: u8) -> bool {
    b < 0x20 || b == 0x7f
}

/// Whether `b`, written `%XX`, is in normal form under `paths`.
fn escape_stays(b: u8, paths: &PathSettings) -> bool {
    match b {
        b'/' | b'\\' => paths.escaped_slash == EscapedSlash::Keep,
        // `%3B` is `;` to a backend that decodes before it strips path
        // parameters: rejected like `;`.
        b';' => paths.semicolon != Semicolon::Reject,
        _ => !is_unreserved(b) && !is_control(b),
    }
}

/// `%25` before two hex digits (`after`: what follows it): what a backend
/// that decodes twice reads as an escape.
fn double_encoded(after: &[u8], paths: &PathSettings) -> bool {
    paths.double_encoding == DoubleEncoding::Reject
        && matches!(after, [hi, lo, ..] if hi.is_ascii_hexdigit() && lo.is_ascii_hexdigit())
}

fn upper_hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn any_hex(b: u8) -> Option<u8> {
    upper_hex(b.to_ascii_uppercase())
}

/// The one scan of the fast path: true only for a path [`rewrite`] would
/// return unchanged.
pub(super) fn scan(path: &[u8], paths: &PathSettings) -> Scan {
    if path.first() != Some(&b'/') {
        return Scan::Rewrite;
    }
    let strip = paths.semicolon == Semicolon::StripForMatching;
    let mut parameters = false;
    let mut non_ascii = false;
    let mut utf8 = Utf8::default();
    // Where an escape must be for the character begun to go on.
    let mut continues_at = 0;
    let mut segment = 1;
    let mut name_end: Option<usize> = None;
    let mut i = 1;
    while i < path.len() {
        match CLASSES[usize::from(path[i])] {
            Class::Plain => {}
            Class::Slash => {
                let name = &path[segment..name_end.unwrap_or(i)];
                if is_dot(name) || (i == segment && paths.merge_slashes) {
                    return Scan::Rewrite;
                }
                segment = i + 1;
                name_end = None;
            }
            Class::Semicolon => match paths.semicolon {
                Semicolon::Keep => {}
                Semicolon::Reject => return Scan::Rewrite,
                Semicolon::StripForMatching => {
                    parameters = true;
                    name_end.get_or_insert(i);
                }
            },
            Class::Percent => {
                let escaped = match (path.get(i + 1), path.get(i + 2)) {
                    (Some(&hi), Some(&lo)) => upper_hex(hi).zip(upper_hex(lo)),
                    _ => None,
                };
                let byte = match escaped {
                    Some((hi, lo)) if escape_stays(hi << 4 | lo, paths) => hi << 4 | lo,
                    _ => return Scan::Rewrite,
                };
                if byte >= 0x80 || utf8.pending() {
                    if (utf8.pending() && i != continues_at) || !utf8.push(byte) {
                        return Scan::Rewrite;
                    }
                    continues_at = i + 3;
                    non_ascii = true;
                } else if byte == b';' && strip {
                    parameters = true;
                    name_end.get_or_insert(i);
                } else if byte == b'%' && double_encoded(&path[i + 3..], paths) {
                    return Scan::Rewrite;
                }
                i += 2;
            }
            Class::Other => return Scan::Rewrite,
        }
        i += 1;
    }
    let last = &path[segment..name_end.filter(|_| strip).unwrap_or(path.len())];
    if is_dot(last) || utf8.pending() {
        return Scan::Rewrite;
    }
    Scan::Normal {
        parameters,
        non_ascii,
    }
}

fn is_dot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// The slow path: decodes what needs no encoding, encodes what must be,
/// refuses what cannot be made unambiguous, then removes dot segments and
/// (with `merge_slashes`) empty ones.
pub(super) fn rewrite(path: &[u8], paths: &PathSettings) -> Result<String, Refusal> {
    if path.is_empty() {
        // An absolute-form target without a path asks for `/`.
        return Ok("/".into());
    }
    if path[0] != b'/' {
        return Err(Refusal::TargetForm);
    }
    let decoded = decode(path, paths)?;
    let strip = paths.semicolon == Semicolon::StripForMatching;
    let mut out = String::with_capacity(decoded.len());
    // Where each segment kept so far starts in `out` (at its `/`).
    let mut starts: Vec<usize> = Vec::new();
    let segments: Vec<&str> = decoded[1..].split('/').collect();
    for (k, segment) in segments.iter().enumerate() {
        let last = k + 1 == segments.len();
        let name = if strip {
            &segment[..parameters_at(segment)]
        } else {
            segment
        };
        match name {
            "." => {}
            ".." => {
                let start = starts.pop().ok_or(Refusal::AboveRoot)?;
                out.truncate(start);
            }
            "" if segment.is_empty() && !last && paths.merge_slashes => {}
            _ => {
                starts.push(out.len());
                out.push('/');
                out.push_str(segment);
                continue;
            }
        }
        // A path ending in a dot segment names a directory: `/a/b/..` is `/a/`.
        if last {
            out.push('/');
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

/// Step one of [`rewrite`]: percent-encoding normalised, refusals found.
/// The result is ASCII: `%XX` only where the byte must stay encoded.
fn decode(path: &[u8], paths: &PathSettings) -> Result<String, Refusal> {
    let mut out = String::with_capacity(path.len() + 8);
    // What the escapes decode to, with the raw bytes around them, must be
    // UTF-8: a raw byte between an escaped lead byte and its continuation
    // counts as much as an escaped one.
    let mut utf8 = Utf8::default();
    let mut i = 0;
    while i < path.len() {
        let b = path[i];
        i += 1;
        if b != b'%' && (b >= 0x80 || utf8.pending()) && !utf8.push(b) {
            return Err(Refusal::NotUtf8);
        }
        match b {
            b'%' => {
                let value = match (path.get(i), path.get(i + 1)) {
                    (Some(&hi), Some(&lo)) => any_hex(hi).zip(any_hex(lo)),
                    _ => None,
                };
                let (hi, lo) = value.ok_or(Refusal::BadEscape)?;
                i += 2;
                let decoded = hi << 4 | lo;
                if is_control(decoded) {
                    return Err(Refusal::Control);
                }
                if !utf8.push(decoded) {
                    return Err(Refusal::NotUtf8);
                }
                if decoded == b';' && paths.semicolon == Semicolon::Reject {
                    return Err(Refusal::Semicolon);
                }
                if is_unreserved(decoded) {
                    out.push(char::from(decoded));
                } else if decoded == b'/' || decoded == b'\\' {
                    match paths.escaped_slash {
                        EscapedSlash::Reject => return Err(Refusal::EscapedSlash),
                        EscapedSlash::Decode => out.push('/'),
                        EscapedSlash::Keep => escape(&mut out, decoded),
                    }
                } else {
                    escape(&mut out, decoded);
                }
            }
            b'\\' => return Err(Refusal::Backslash),
            b'#' => return Err(Refusal::Fragment),
            b';' if paths.semicolon == Semicolon::Reject => return Err(Refusal::Semicolon),
            _ if is_control(b) => return Err(Refusal::Control),
            _ if CLASSES[usize::from(b)] == Class::Other => escape(&mut out, b),
            _ => out.push(char::from(b)),
        }
    }
    if utf8.pending() {
        return Err(Refusal::NotUtf8);
    }
    // Looked for in the result: decoding `%36%31` after `%25` makes `%2561`.
    if paths.double_encoding == DoubleEncoding::Reject
        && (out.match_indices("%25"))
            .any(|(at, _)| double_encoded(&out.as_bytes()[at + 3..], paths))
    {
        return Err(Refusal::DoubleEncoding);
    }
    Ok(out)
}

/// Appends `b` as `%XX` (upper-case hex).
fn escape(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(char::from(HEX[usize::from(b >> 4)]));
    out.push(char::from(HEX[usize::from(b & 15)]));
}

/// Where a normal segment's parameters begin: at its first `;` or `%3B`
/// (to a backend that decodes before it strips parameters, `%3B` is `;`),
/// else its end.
fn parameters_at(segment: &str) -> usize {
    // By hand: a substring search (`find("%3B")`) costs more to set up
    // than the segment takes to scan.
    let bytes = segment.as_bytes();
    let mut from = 0;
    while let Some(at) = bytes[from..].iter().position(|&b| b == b';' || b == b'%') {
        let at = from + at;
        if bytes[at] == b';' || bytes[at + 1..].starts_with(b"3B") {
            return at;
        }
        from = at + 1;
    }
    bytes.len()
}

/// `path` with each segment's `;…` (or `%3B…`) removed (its empty
/// segments merged with `merge_slashes`, as [`rewrite`] merges them).
fn without_parameters(path: &str, merge_slashes: bool) -> String {
    let mut out = String::with_capacity(path.len());
    let mut segments = path[1..].split('/').peekable();
    while let Some(segment) = segments.next() {
        let name = &segment[..parameters_at(segment)];
        if name.is_empty() && segments.peek().is_some() && merge_slashes {
            continue;
        }
        out.push('/');
        out.push_str(name);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}
