//! Encoding a response head or trailers (RFC 9204 4.5) with the static
//! table and literals only: Required Insert Count 0, Base 0, then each
//! field as a static index when name and value match an entry, a literal
//! with a static name reference when the name does, else a literal name.
//! Credentials and cookies go with the N bit (never indexed: RFC 9204
//! 4.5.4), so an intermediary re-encoding them keeps them out of its
//! dynamic table.

use fieldcoding::{encode_int, encode_string};

use super::static_table::{named, STATIC};

/// Appends a response head: `:status`, then `fields` (lower-case names).
pub fn encode_response<'a>(
    status: u16,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    huffman: bool,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&[0, 0]);
    let mut digits = [b'0'; 3];
    let status = status.min(999);
    digits[0] += (status / 100) as u8;
    digits[1] += (status / 10 % 10) as u8;
    digits[2] += (status % 10) as u8;
    field(b":status", &digits, false, out);
    for (name, value) in fields {
        field(name, value, huffman, out);
    }
}

/// Appends a field section of `fields` as they are (trailers; or a
/// request head, pseudo-headers first, when a test plays the client).
pub fn encode_section<'a>(
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    huffman: bool,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&[0, 0]);
    for (name, value) in fields {
        field(name, value, huffman, out);
    }
}

fn field(name: &[u8], value: &[u8], huffman: bool, out: &mut Vec<u8>) {
    let entries = named(name);
    let sensitive = matches!(
        name,
        b"authorization" | b"proxy-authorization" | b"cookie" | b"set-cookie"
    );
    if !sensitive {
        if let Some(&index) = entries.iter().find(|&&i| STATIC[i as usize].1 == value) {
            // Indexed, static: 1 1 index(6).
            return encode_int(out, 0xc0, 6, index as u64);
        }
    }
    let never = if sensitive { 0x20 } else { 0 };
    match entries.first() {
        // Literal, static name reference: 01 N 1 index(4).
        Some(&index) => encode_int(out, 0x50 | never, 4, index as u64),
        // Literal name: 001 N H len(3), the name as it is.
        None => encode_string(out, 0x20 | (never >> 1), 3, name, huffman),
    }
    encode_string(out, 0, 7, value, huffman);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{head::FieldSection, qpack::decode_section};

    fn round_trip(status: u16, fields: &[(&[u8], &[u8])], huffman: bool) -> FieldSection {
        let mut out = Vec::new();
        encode_response(status, fields.iter().copied(), huffman, &mut out);
        let mut section = FieldSection::new();
        decode_section(&out, 1 << 20, &mut section).expect("decodes");
        section
    }

    #[test]
    fn every_form_decodes_to_what_was_encoded() {
        let fields: [(&[u8], &[u8]); 6] = [
            (b"content-type", b"application/json"),
            (b"content-length", b"72"),
            (b"x-custom", b"a value"),
            (b"set-cookie", b"id=1"),
            (b"vary", b"origin"),
            (b"server", b"sluice"),
        ];
        for huffman in [false, true] {
            for status in [200, 404, 204, 418, 103, 999] {
                let section = round_trip(status, &fields, huffman);
                let got: Vec<_> = section.iter().collect();
                let status_text = status.to_string();
                assert_eq!(got[0], (&b":status"[..], status_text.as_bytes()));
                assert_eq!(&got[1..], &fields[..]);
            }
        }
    }

    #[test]
    fn static_matches_are_one_byte_and_secrets_are_never_indexed() {
        let mut out = Vec::new();
        encode_response(200, [(&b"vary"[..], &b"origin"[..])], false, &mut out);
        // Prefix, :status 200 (index 25), vary: origin (index 60 > 63? no: one byte).
        assert_eq!(out, [0, 0, 0xc0 | 25, 0xc0 | 60]);
        let mut out = Vec::new();
        encode_section([(&b"set-cookie"[..], &b""[..])], false, &mut out);
        // Not the static entry 14 itself: a literal with its name, N set.
        assert_eq!(out[2], 0x50 | 0x20 | 14);
        let mut out = Vec::new();
        encode_section([(&b"authorization-x"[..], &b"1"[..])], false, &mut out);
        assert_eq!(out[2] & 0xf0, 0x20, "a literal name, N clear");
    }
}
