//! Encoding heads (RFC 7541 6) without a dynamic table: each field is a
//! static index when name and value are in the static table, else a
//! literal without indexing (never indexed for credentials and cookies)
//! with the static name index where there is one, written straight into
//! the frame buffer. A proxy forwards fields that mostly differ per
//! request, so a table of its own rarely pays for its hashing and copies,
//! and the peer's decoder keeps nothing for what sluice sends.

use fieldcoding::{encode_int, encode_string};

use super::static_table::find;

/// Appends one field.
pub fn encode_field(name: &[u8], value: &[u8], huffman: bool, out: &mut Vec<u8>) {
    let (named, exact) = find(name, value);
    let sensitive = matches!(
        name,
        b"authorization" | b"proxy-authorization" | b"cookie" | b"set-cookie"
    );
    if let (Some(index), false) = (exact, sensitive) {
        // Indexed: 1 index(7).
        return encode_int(out, 0x80, 7, index as u64);
    }
    // Without indexing 0000, never indexed 0001; index(4), 0 = a literal name.
    let flags = if sensitive { 0x10 } else { 0x00 };
    match named {
        Some(index) => encode_int(out, flags, 4, index as u64),
        None => {
            out.push(flags);
            encode_string(out, 0, 7, name, huffman);
        }
    }
    encode_string(out, 0, 7, value, huffman);
}

/// Appends a response head: `:status`, then `fields` (lower-case names).
pub fn encode_response<'a>(
    status: u16,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    huffman: bool,
    out: &mut Vec<u8>,
) {
    let status = status.min(999);
    let digits = [
        b'0' + (status / 100) as u8,
        b'0' + (status / 10 % 10) as u8,
        b'0' + (status % 10) as u8,
    ];
    encode_field(b":status", &digits, false, out);
    for (name, value) in fields {
        encode_field(name, value, huffman, out);
    }
}

/// Appends a request head: the pseudo-headers (`authority` left out when
/// `None`), then `fields`.
pub fn encode_request<'a>(
    pseudo: [(&'static [u8], Option<&[u8]>); 4],
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    huffman: bool,
    out: &mut Vec<u8>,
) {
    for (name, value) in pseudo {
        if let Some(value) = value {
            encode_field(name, value, huffman, out);
        }
    }
    for (name, value) in fields {
        encode_field(name, value, huffman, out);
    }
}
