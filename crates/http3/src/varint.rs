//! QUIC variable-length integers (RFC 9000 16): two length bits, then 6,
//! 14, 30 or 62 bits of value. HTTP/3 frames and stream types use them.

/// The largest value a varint carries.
pub const MAX: u64 = (1 << 62) - 1;

/// The varint at the start of `buf` and its length; `None` if `buf` ends
/// inside it.
pub fn decode(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(..len)?;
    let mut value = (first & 0x3f) as u64;
    for &byte in &bytes[1..] {
        value = (value << 8) | byte as u64;
    }
    Some((value, len))
}

/// How many bytes `value` takes.
pub fn len(value: u64) -> usize {
    match value {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends `value` (at most [`MAX`]; larger values are written as MAX,
/// which no caller of this crate produces).
pub fn encode(value: u64, out: &mut Vec<u8>) {
    let value = value.min(MAX);
    match len(value) {
        1 => out.push(value as u8),
        2 => out.extend_from_slice(&((value as u16) | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&((value as u32) | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(value | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9000_appendix_a1_examples() {
        let cases: [(&[u8], u64); 4] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (bytes, value) in cases {
            assert_eq!(decode(bytes), Some((value, bytes.len())));
            let mut out = Vec::new();
            encode(value, &mut out);
            assert_eq!(out, bytes);
        }
        // Not minimal, still valid: 37 in two bytes.
        assert_eq!(decode(&[0x40, 0x25]), Some((37, 2)));
    }

    #[test]
    fn truncated_is_none_and_edges_round_trip() {
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[0x80, 0, 0]), None);
        for value in [0, 63, 64, 16_383, 16_384, 1_073_741_823, 1_073_741_824, MAX] {
            let mut out = Vec::new();
            encode(value, &mut out);
            assert_eq!(out.len(), len(value));
            assert_eq!(decode(&out), Some((value, out.len())));
        }
    }
}
