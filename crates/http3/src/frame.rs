//! HTTP/3 frames (RFC 9114 7): a type and a length, both varints, then
//! the payload. Only the frame header is parsed here; each stream's
//! decoder decides what a type means where it stands.

use crate::{varint, Code, Error};

pub const DATA: u64 = 0x0;
pub const HEADERS: u64 = 0x1;
pub const CANCEL_PUSH: u64 = 0x3;
pub const SETTINGS: u64 = 0x4;
pub const PUSH_PROMISE: u64 = 0x5;
pub const GOAWAY: u64 = 0x7;
pub const MAX_PUSH_ID: u64 = 0xd;

/// Frame types of HTTP/2 that HTTP/3 reserves: receiving one is
/// H3_FRAME_UNEXPECTED wherever it stands (RFC 9114 7.2.8).
pub fn is_http2_only(kind: u64) -> bool {
    matches!(kind, 0x2 | 0x6 | 0x8 | 0x9)
}

/// A frame's type and payload length, and the bytes they took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: u64,
    pub len: u64,
    pub size: usize,
}

/// The frame header at the start of `buf`; `None` if `buf` ends in it.
pub fn decode_header(buf: &[u8]) -> Option<Header> {
    let (kind, a) = varint::decode(buf)?;
    let (len, b) = varint::decode(&buf[a..])?;
    Some(Header {
        kind,
        len,
        size: a + b,
    })
}

/// Appends a frame header.
pub fn encode_header(kind: u64, len: u64, out: &mut Vec<u8>) {
    varint::encode(kind, out);
    varint::encode(len, out);
}

pub const SETTINGS_QPACK_MAX_TABLE_CAPACITY: u64 = 0x1;
pub const SETTINGS_MAX_FIELD_SECTION_SIZE: u64 = 0x6;
pub const SETTINGS_QPACK_BLOCKED_STREAMS: u64 = 0x7;

/// The settings either side sends; the rest are ignored (RFC 9114 7.2.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settings {
    pub qpack_max_table_capacity: u64,
    pub qpack_blocked_streams: u64,
    /// Unlimited when absent.
    pub max_field_section_size: Option<u64>,
}

/// Reads a SETTINGS payload. A setting given twice or one of HTTP/2's
/// identifiers (0x0, 0x2-0x5) is H3_SETTINGS_ERROR (RFC 9114 7.2.4,
/// 7.2.4.1); a payload that ends inside a varint is H3_FRAME_ERROR.
pub fn decode_settings(mut payload: &[u8]) -> Result<Settings, Error> {
    let mut settings = Settings::default();
    // Identifiers seen, to refuse a repeat; a payload is bounded by the
    // caller, so a plain list is enough.
    let mut seen = Vec::new();
    while !payload.is_empty() {
        let truncated =
            Error::Connection(Code::H3_FRAME_ERROR, "a SETTINGS frame ends in a varint");
        let (id, a) = varint::decode(payload).ok_or(truncated)?;
        let (value, b) = varint::decode(&payload[a..]).ok_or(truncated)?;
        payload = &payload[a + b..];
        if matches!(id, 0x0 | 0x2..=0x5) {
            return Err(Error::Connection(
                Code::H3_SETTINGS_ERROR,
                "an HTTP/2 setting in SETTINGS",
            ));
        }
        if seen.contains(&id) {
            return Err(Error::Connection(
                Code::H3_SETTINGS_ERROR,
                "a setting given twice",
            ));
        }
        seen.push(id);
        match id {
            SETTINGS_QPACK_MAX_TABLE_CAPACITY => settings.qpack_max_table_capacity = value,
            SETTINGS_QPACK_BLOCKED_STREAMS => settings.qpack_blocked_streams = value,
            SETTINGS_MAX_FIELD_SECTION_SIZE => settings.max_field_section_size = Some(value),
            _ => {}
        }
    }
    Ok(settings)
}

/// Appends a whole SETTINGS frame. Zero values, the defaults, are left
/// out; so is QPACK's table capacity, which this codec keeps at 0.
pub fn encode_settings(settings: &Settings, out: &mut Vec<u8>) {
    let mut payload = Vec::new();
    if let Some(max) = settings.max_field_section_size {
        varint::encode(SETTINGS_MAX_FIELD_SECTION_SIZE, &mut payload);
        varint::encode(max, &mut payload);
    }
    encode_header(SETTINGS, payload.len() as u64, out);
    out.extend_from_slice(&payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_unknown_ones_are_skipped() {
        let mut frame = Vec::new();
        let mine = Settings {
            max_field_section_size: Some(16_384),
            ..Settings::default()
        };
        encode_settings(&mine, &mut frame);
        let header = decode_header(&frame).expect("whole");
        assert_eq!(header.kind, SETTINGS);
        assert_eq!(decode_settings(&frame[header.size..]), Ok(mine));
        // A grease identifier (0x1f * N + 0x21) is ignored.
        let mut payload = Vec::new();
        for v in [0x21, 7, SETTINGS_QPACK_MAX_TABLE_CAPACITY, 4096] {
            varint::encode(v, &mut payload);
        }
        let theirs = decode_settings(&payload).expect("valid");
        assert_eq!(theirs.qpack_max_table_capacity, 4096);
    }

    #[test]
    fn repeated_http2_and_truncated_settings_are_errors() {
        let with = |pairs: &[u64]| {
            let mut payload = Vec::new();
            for &v in pairs {
                varint::encode(v, &mut payload);
            }
            decode_settings(&payload)
        };
        for h2 in [0x0, 0x2, 0x3, 0x4, 0x5] {
            assert!(matches!(
                with(&[h2, 1]),
                Err(Error::Connection(Code::H3_SETTINGS_ERROR, _))
            ));
        }
        assert!(matches!(
            with(&[6, 1, 6, 2]),
            Err(Error::Connection(Code::H3_SETTINGS_ERROR, _))
        ));
        assert!(matches!(
            decode_settings(&[0x06]),
            Err(Error::Connection(Code::H3_FRAME_ERROR, _))
        ));
    }
}
