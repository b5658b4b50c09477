//! String literals (RFC 7541 5.2; RFC 9204 4.1.2): a Huffman flag, the
//! length as a prefixed integer, then the bytes. The flag is the bit just
//! above the length's prefix (bit 7 in HPACK and for QPACK values; lower
//! for QPACK's literal names).

use crate::{huffman, int, Error};

/// Decodes the string at the start of `buf`, whose length keeps the low
/// `prefix` bits of the first byte, appending it to `out` when it decodes
/// to at most `max` bytes. Returns the bytes it took from `buf`.
pub fn decode(buf: &[u8], prefix: u8, out: &mut Vec<u8>, max: usize) -> Result<usize, Error> {
    debug_assert!((1..=7).contains(&prefix));
    let huffman = *buf.first().ok_or(Error::Incomplete)? & (1 << prefix) != 0;
    let (len, at) = int::decode(buf, prefix)?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| at.checked_add(len))
        .ok_or(Error::TooLong)?;
    let bytes = buf.get(at..end).ok_or(Error::Incomplete)?;
    if huffman {
        huffman::decode(bytes, out, max)?;
    } else if bytes.len() > max {
        return Err(Error::TooLong);
    } else {
        out.extend_from_slice(bytes);
    }
    Ok(end)
}

/// Appends `value` as a string literal with `flags` above its Huffman bit:
/// Huffman-coded when `huffman` is asked and that is shorter.
pub fn encode(out: &mut Vec<u8>, flags: u8, prefix: u8, value: &[u8], huffman: bool) {
    debug_assert!((1..=7).contains(&prefix));
    let coded = if huffman {
        huffman::encoded_len(value)
    } else {
        usize::MAX
    };
    if coded < value.len() {
        int::encode(out, flags | 1 << prefix, prefix, coded as u64);
        huffman::encode(value, out);
    } else {
        int::encode(out, flags, prefix, value.len() as u64);
        out.extend_from_slice(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7541_c4_huffman_and_c3_plain_strings() {
        // C.4.1: "www.example.com", Huffman-coded.
        let coded = [
            0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        let mut out = Vec::new();
        assert_eq!(decode(&coded, 7, &mut out, 100), Ok(coded.len()));
        assert_eq!(out, b"www.example.com");
        let mut again = Vec::new();
        encode(&mut again, 0, 7, b"www.example.com", true);
        assert_eq!(again, coded);
        // C.3.1: the same string plain.
        let mut plain = Vec::new();
        encode(&mut plain, 0, 7, b"www.example.com", false);
        assert_eq!(plain[0], 15);
        let mut out = Vec::new();
        assert_eq!(decode(&plain, 7, &mut out, 100), Ok(16));
        assert_eq!(out, b"www.example.com");
    }

    #[test]
    fn a_qpack_literal_name_keeps_its_flag_below_bit_7() {
        // QPACK's literal name: 001NHxxx, the flag at bit 3, length in 3 bits.
        let mut out = Vec::new();
        encode(&mut out, 0b0010_0000, 3, b"custom-key", true);
        assert_eq!(out[0] & 0b1110_0000, 0b0010_0000);
        assert_ne!(out[0] & 0b1000, 0, "Huffman is shorter here");
        let mut name = Vec::new();
        assert_eq!(decode(&out, 3, &mut name, 64), Ok(out.len()));
        assert_eq!(name, b"custom-key");
    }

    #[test]
    fn limits_and_truncation() {
        let mut out = Vec::new();
        encode(&mut out, 0, 7, b"0123456789", false);
        assert_eq!(decode(&out, 7, &mut Vec::new(), 9), Err(Error::TooLong));
        assert_eq!(
            decode(&out[..5], 7, &mut Vec::new(), 64),
            Err(Error::Incomplete)
        );
        let mut coded = Vec::new();
        encode(&mut coded, 0, 7, b"aaaaaaaaaaaaaaaaaaaa", true);
        assert_eq!(decode(&coded, 7, &mut Vec::new(), 19), Err(Error::TooLong));
        // A length near u64::MAX is refused, not added.
        let huge = [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f];
        assert!(decode(&huge, 7, &mut Vec::new(), 64).is_err());
    }
}
