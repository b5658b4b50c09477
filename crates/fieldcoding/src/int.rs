//! Prefixed integers (RFC 7541 5.1; RFC 9204 4.1.1): the low `prefix`
//! bits of the first byte, then 7 bits a byte while the high bit is set.

use crate::Error;

/// The largest value either format carries (QPACK's varint bound).
const MAX: u64 = (1 << 62) - 1;

/// Decodes the integer at the start of `buf` whose first byte keeps its
/// low `prefix` bits (1..=8) for it: the value and the bytes it took.
pub fn decode(buf: &[u8], prefix: u8) -> Result<(u64, usize), Error> {
    debug_assert!((1..=8).contains(&prefix));
    let mask = (1u16 << prefix) as u64 - 1;
    let first = *buf.first().ok_or(Error::Incomplete)? as u64 & mask;
    if first < mask {
        return Ok((first, 1));
    }
    let mut value = mask;
    let mut shift = 0u32;
    for (at, &byte) in buf.iter().enumerate().skip(1) {
        // 62 bits fit in 9 continuation bytes; a 10th could only add
        // zeros or overflow, and is refused either way.
        if shift > 56 {
            return Err(Error::IntegerOverflow);
        }
        value += ((byte & 0x7f) as u64) << shift;
        if value > MAX {
            return Err(Error::IntegerOverflow);
        }
        if byte & 0x80 == 0 {
            return Ok((value, at + 1));
        }
        shift += 7;
    }
    Err(Error::Incomplete)
}

/// Appends `value` with `flags` in the first byte's bits above `prefix`.
pub fn encode(out: &mut Vec<u8>, flags: u8, prefix: u8, value: u64) {
    debug_assert!((1..=8).contains(&prefix));
    let mask = (1u16 << prefix) as u64 - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7541_examples_c1() {
        // C.1.1: 10 in a 5-bit prefix.
        assert_eq!(decode(&[0b0000_1010], 5), Ok((10, 1)));
        // C.1.2: 1337 in a 5-bit prefix.
        assert_eq!(
            decode(&[0b0001_1111, 0b1001_1010, 0b0000_1010], 5),
            Ok((1337, 3))
        );
        // C.1.3: 42 starting at an octet boundary.
        assert_eq!(decode(&[42], 8), Ok((42, 1)));
        let mut out = Vec::new();
        encode(&mut out, 0b1110_0000, 5, 1337);
        assert_eq!(out, [0b1111_1111, 0b1001_1010, 0b0000_1010]);
    }

    #[test]
    fn round_trips_at_every_prefix_and_edge() {
        for prefix in 1..=8u8 {
            for value in [0, 1, 126, 127, 128, 254, 255, 256, 1 << 20, MAX - 1, MAX] {
                let mut out = Vec::new();
                encode(&mut out, 0, prefix, value);
                assert_eq!(
                    decode(&out, prefix),
                    Ok((value, out.len())),
                    "{prefix} {value}"
                );
                // Every shorter input is incomplete, never a wrong value.
                for cut in 0..out.len() {
                    assert_eq!(decode(&out[..cut], prefix), Err(Error::Incomplete));
                }
            }
        }
    }

    #[test]
    fn values_past_62_bits_and_endless_continuations_are_refused() {
        let mut out = Vec::new();
        encode(&mut out, 0, 8, MAX);
        // One more than MAX: the last byte's bit 0 raised.
        let mut over = vec![0xff];
        over.extend_from_slice(&[0xff; 8]);
        over.push(0x7f);
        assert_eq!(decode(&over, 8), Err(Error::IntegerOverflow));
        // Zero-valued continuation bytes forever: refused, not looped.
        let mut zeros = vec![0x1f];
        zeros.extend_from_slice(&[0x80; 20]);
        assert_eq!(decode(&zeros, 5), Err(Error::IntegerOverflow));
    }
}
