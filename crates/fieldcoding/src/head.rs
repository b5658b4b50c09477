//! Heads as flat fields: one buffer of names and values back to back and
//! a list of ranges into it, in the order received (the shape of the
//! `http1` crate's parsed heads, so the proxy reads all protocols the same
//! way). And the rules that make a request head well-formed (RFC 9114
//! 4.2-4.3, the same as HTTP/2's in RFC 9113 8.2-8.3): a request that
//! breaks one is malformed and never reaches an upstream.

use std::ops::Range;

/// One field: the ranges of its name and value in the section's buffer.
pub type FieldRange = (Range<usize>, Range<usize>);

/// A decoded field section (a request head or trailers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSection {
    buf: Vec<u8>,
    fields: Vec<FieldRange>,
}

impl FieldSection {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a field.
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        let start = self.buf.len();
        self.buf.extend_from_slice(name);
        let mid = self.buf.len();
        self.buf.extend_from_slice(value);
        self.fields.push((start..mid, mid..self.buf.len()));
    }

    /// The buffer the ranges point into, and the ranges.
    pub fn parts(&self) -> (&[u8], &[FieldRange]) {
        (&self.buf, &self.fields)
    }

    /// Every field, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.fields
            .iter()
            .map(|(n, v)| (&self.buf[n.clone()], &self.buf[v.clone()]))
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The first value of the field called `name` (lower case).
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// For a decoder: the buffer it decodes a field's name and then its
    /// value onto (from [`Self::mark`]), before [`Self::close_field`].
    pub fn buf_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Where the next field will start in the buffer.
    pub fn mark(&self) -> usize {
        self.buf.len()
    }

    /// Records the field decoded since `mark`: its first `name_len` bytes
    /// are the name, the rest the value. A decoder that has written
    /// nothing past `mark + name_len` records an empty value.
    pub fn close_field(&mut self, mark: usize, name_len: usize) {
        let end = self.buf.len();
        let mid = (mark + name_len).min(end);
        self.fields.push((mark.min(mid)..mid, mid..end));
    }

    /// Removes the fields recorded after the first `len` (and their bytes).
    pub fn truncate(&mut self, len: usize) {
        if let Some((name, _)) = self.fields.get(len) {
            self.buf.truncate(name.start);
        }
        self.fields.truncate(len);
    }

    /// Empties the section, keeping its buffers.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.fields.clear();
    }
}

/// A well-formed request head: its section, where each pseudo-header's
/// value is, and where the regular fields start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    section: FieldSection,
    method: Range<usize>,
    scheme: Option<Range<usize>>,
    authority: Option<Range<usize>>,
    path: Option<Range<usize>>,
    regular: usize,
    content_length: Option<u64>,
}

impl RequestHead {
    pub fn method(&self) -> &[u8] {
        &self.section.buf[self.method.clone()]
    }

    pub fn scheme(&self) -> Option<&[u8]> {
        self.scheme.clone().map(|r| &self.section.buf[r])
    }

    pub fn authority(&self) -> Option<&[u8]> {
        self.authority.clone().map(|r| &self.section.buf[r])
    }

    /// Absent only for CONNECT.
    pub fn path(&self) -> Option<&[u8]> {
        self.path.clone().map(|r| &self.section.buf[r])
    }

    /// The declared body length (every Content-Length field agrees).
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// The regular fields (pseudo-headers left out): the buffer and ranges.
    pub fn fields(&self) -> (&[u8], &[FieldRange]) {
        (&self.section.buf, &self.section.fields[self.regular..])
    }

    /// The regular fields, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.section.iter().skip(self.regular)
    }
}

/// Checks a request head and says where its parts are, or why it is
/// malformed.
pub fn request(section: FieldSection) -> Result<RequestHead, &'static str> {
    let (mut method, mut scheme, mut authority, mut path) = (None, None, None, None);
    let mut regular = section.fields.len();
    let mut host = None;
    let mut content_length = None;
    for (at, (name, value)) in section.fields.iter().enumerate() {
        let (n, v) = (&section.buf[name.clone()], &section.buf[value.clone()]);
        if let Some(pseudo) = n.strip_prefix(b":") {
            if at > regular {
                return Err("a pseudo-header after a regular field");
            }
            let slot = match pseudo {
                b"method" => &mut method,
                b"scheme" => &mut scheme,
                b"authority" => &mut authority,
                b"path" => &mut path,
                b"protocol" => return Err(":protocol without extended CONNECT"),
                _ => return Err("an unknown or response pseudo-header in a request"),
            };
            if slot.replace(value.clone()).is_some() {
                return Err("a pseudo-header given twice");
            }
            if !v.iter().all(|&b| (0x21..0x7f).contains(&b)) || v.is_empty() {
                return Err("a pseudo-header value with a space, a control or no byte");
            }
            continue;
        }
        regular = regular.min(at);
        regular_field(n, v)?;
        match n {
            // Several host fields, or one naming another host than
            // :authority, are the proxy's to refuse (400), as for the
            // other HTTP versions.
            b"host" => host = Some(value.clone()),
            b"content-length" => {
                let len = decimal(v).ok_or("a content-length that is not a number")?;
                if content_length.replace(len).is_some_and(|was| was != len) {
                    return Err("content-length fields that disagree");
                }
            }
            _ => {}
        }
    }
    let method = method.ok_or("no :method")?;
    let connect = &section.buf[method.clone()] == b"CONNECT";
    if !section.buf[method.clone()].iter().copied().all(is_tchar) {
        return Err("a :method that is not a token");
    }
    if connect {
        if scheme.is_some() || path.is_some() {
            return Err("CONNECT with :scheme or :path");
        }
        if authority.is_none() {
            return Err("CONNECT without :authority");
        }
    } else {
        let scheme_bytes = &section.buf[scheme.clone().ok_or("no :scheme")?];
        if !is_scheme(scheme_bytes) {
            return Err("a :scheme that is not a scheme");
        }
        if path.is_none() {
            return Err("no :path");
        }
        let has_authority = matches!(scheme_bytes, b"http" | b"https");
        if has_authority && authority.is_none() && host.is_none() {
            return Err("no :authority and no host");
        }
    }
    if let Some(a) = &authority {
        if section.buf[a.clone()].contains(&b'@') {
            return Err("userinfo in :authority");
        }
    }
    Ok(RequestHead {
        method,
        scheme,
        authority,
        path,
        regular: regular.min(section.fields.len()),
        content_length,
        section,
    })
}

/// Checks a response head (RFC 9113 8.3.2, RFC 9114 4.3.2): `:status`
/// first and alone among pseudo-headers, three digits from 100; the
/// regular fields by the shared rules. The status, and the index of the
/// first regular field.
pub fn response(section: &FieldSection) -> Result<(u16, usize), &'static str> {
    let mut fields = section.iter();
    let status = match fields.next() {
        Some((b":status", value)) if value.len() == 3 && value.iter().all(u8::is_ascii_digit) => {
            let status = value
                .iter()
                .fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
            if status < 100 {
                return Err("a :status below 100");
            }
            status
        }
        Some((b":status", _)) => return Err("a :status that is not three digits"),
        _ => return Err("no :status first"),
    };
    for (name, value) in fields {
        if name.starts_with(b":") {
            return Err("a second or unknown pseudo-header in a response");
        }
        regular_field(name, value)?;
    }
    Ok((status, 1))
}

/// The declared body length of `section`'s regular fields from index
/// `from`: every `content-length` one and the same number.
pub fn content_length(section: &FieldSection, from: usize) -> Result<Option<u64>, &'static str> {
    let mut length = None;
    for (name, value) in section.iter().skip(from) {
        if name == b"content-length" {
            let len = decimal(value).ok_or("a content-length that is not a number")?;
            if length.replace(len).is_some_and(|was| was != len) {
                return Err("content-length fields that disagree");
            }
        }
    }
    Ok(length)
}

/// Checks trailers: regular fields only (RFC 9114 4.1.2).
pub fn trailers(section: &FieldSection) -> Result<(), &'static str> {
    for (name, value) in section.iter() {
        if name.starts_with(b":") {
            return Err("a pseudo-header in trailers");
        }
        regular_field(name, value)?;
    }
    Ok(())
}

/// The rules every regular field keeps (RFC 9114 4.2, RFC 9113 8.2.1-8.2.2).
fn regular_field(name: &[u8], value: &[u8]) -> Result<(), &'static str> {
    if name.is_empty() || !name.iter().copied().all(is_tchar) {
        return Err("a field name that is not a token");
    }
    if name.iter().any(u8::is_ascii_uppercase) {
        return Err("a field name with upper-case letters");
    }
    if value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err("a field value with NUL, CR or LF");
    }
    if value.first().is_some_and(|&b| b == b' ' || b == b'\t')
        || value.last().is_some_and(|&b| b == b' ' || b == b'\t')
    {
        return Err("a field value with white space at an end");
    }
    match name {
        b"connection" | b"proxy-connection" | b"keep-alive" | b"transfer-encoding" | b"upgrade" => {
            Err("a connection-specific field")
        }
        b"te" if !value.eq_ignore_ascii_case(b"trailers") => Err("te other than trailers"),
        _ => Ok(()),
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_scheme(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_alphabetic)
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
}

/// A Content-Length value: digits only, at most 19 of them.
fn decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests;
