//! Huffman strings (RFC 7541 5.2 and Appendix B). The code is canonical:
//! codes of one length are consecutive numbers, so a decoder needs, per
//! length, the first code, how many there are and where their symbols
//! start in a list sorted by (length, code). Decoding takes the next bits
//! and tries each length from the shortest (5 bits for the commonest
//! letters and digits): a handful of compares per byte, no table walk.

use crate::{
    huffman_table::{CODES, LENGTHS},
    Error,
};

const EOS: u16 = 256;
const EOS_CODE: u32 = 0x3fff_ffff;
const EOS_LEN: u8 = 30;
const MIN_LEN: u32 = 5;
const MAX_LEN: u32 = 30;

struct Canonical {
    first: [u32; 31],
    count: [u32; 31],
    offset: [u16; 31],
    symbols: [u16; 257],
}

const fn code(symbol: usize) -> (u32, u8) {
    if symbol == EOS as usize {
        (EOS_CODE, EOS_LEN)
    } else {
        (CODES[symbol], LENGTHS[symbol])
    }
}

/// Builds the per-length tables at compile time, and fails the build if
/// the table were not canonical (a code not the one its rank implies).
const fn canonical() -> Canonical {
    let mut symbols = [0u16; 257];
    let mut n = 0;
    let mut len = 1;
    let mut first = [0u32; 31];
    let mut count = [0u32; 31];
    let mut offset = [0u16; 31];
    let mut next_code = 0u32;
    while len <= 30 {
        first[len] = next_code;
        offset[len] = n as u16;
        // Symbols of this length, in code order.
        let mut want = next_code;
        loop {
            let mut found = usize::MAX;
            let mut s = 0;
            while s < 257 {
                let (c, l) = code(s);
                if l as usize == len && c == want {
                    found = s;
                }
                s += 1;
            }
            if found == usize::MAX {
                break;
            }
            symbols[n] = found as u16;
            n += 1;
            want += 1;
        }
        count[len] = want - next_code;
        next_code = want << 1;
        len += 1;
    }
    assert!(n == 257, "the Huffman table is not canonical");
    Canonical {
        first,
        count,
        offset,
        symbols,
    }
}

static TABLE: Canonical = canonical();

/// Decodes a whole Huffman string onto `out`; at most `max` bytes of it.
pub fn decode(src: &[u8], out: &mut Vec<u8>, max: usize) -> Result<(), Error> {
    let limit = out.len().saturating_add(max);
    // Bits not yet decoded, right-aligned in `acc`; `bits` of them.
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut input = src.iter();
    loop {
        while bits <= 56 {
            match input.next() {
                Some(&byte) => {
                    acc = (acc << 8) | byte as u64;
                    bits += 8;
                }
                None => break,
            }
        }
        if bits == 0 {
            return Ok(());
        }
        let mut symbol = None;
        let mut len = MIN_LEN;
        while len <= MAX_LEN.min(bits) {
            let value = (acc >> (bits - len)) as u32 & ((1u32 << len) - 1);
            let rank = value.wrapping_sub(TABLE.first[len as usize]);
            if rank < TABLE.count[len as usize] {
                symbol = Some(TABLE.symbols[TABLE.offset[len as usize] as usize + rank as usize]);
                break;
            }
            len += 1;
        }
        let Some(symbol) = symbol else {
            // What is left is no whole code: it must be padding, the
            // first bits of EOS (all ones), shorter than a byte.
            let rest = acc & ((1u64 << bits) - 1);
            return match bits <= 7 && rest == (1u64 << bits) - 1 {
                true => Ok(()),
                false => Err(Error::Huffman),
            };
        };
        if symbol == EOS {
            return Err(Error::Huffman);
        }
        if out.len() >= limit {
            return Err(Error::TooLong);
        }
        out.push(symbol as u8);
        bits -= len;
        acc &= (1u64 << bits) - 1;
    }
}

/// The length of `src` Huffman-coded.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| LENGTHS[b as usize] as usize).sum();
    bits.div_ceil(8)
}

/// Appends `src` Huffman-coded, the last byte padded with ones.
pub fn encode(src: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &byte in src {
        let len = LENGTHS[byte as usize] as u32;
        acc = (acc << len) | CODES[byte as usize] as u64;
        bits += len;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1u64 << bits) - 1;
    }
    if bits > 0 {
        out.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coded(src: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(src, &mut out);
        out
    }

    #[test]
    fn every_byte_round_trips_alone_and_together() {
        let all: Vec<u8> = (0..=255).collect();
        for &byte in &all {
            let mut back = Vec::new();
            decode(&coded(&[byte]), &mut back, 1).expect("decodes");
            assert_eq!(back, [byte]);
        }
        let mut back = Vec::new();
        decode(&coded(&all), &mut back, 256).expect("decodes");
        assert_eq!(back, all);
        assert_eq!(encoded_len(&all), coded(&all).len());
    }

    #[test]
    fn rfc7541_c4_and_c6_strings() {
        // C.4.1-C.4.3 and C.6.1 (response) values.
        let cases: [(&[u8], &[u8]); 4] = [
            (
                b"www.example.com",
                &[
                    0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
                ],
            ),
            (b"no-cache", &[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf]),
            (
                b"custom-key",
                &[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f],
            ),
            (b"302", &[0x64, 0x02]),
        ];
        for (plain, huff) in cases {
            assert_eq!(coded(plain), huff);
            let mut back = Vec::new();
            decode(huff, &mut back, 64).expect("decodes");
            assert_eq!(back, plain);
        }
    }

    #[test]
    fn eos_long_padding_and_zero_padding_are_refused() {
        // EOS itself: 30 ones, padded to 32 bits.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut Vec::new(), 64),
            Err(Error::Huffman)
        );
        // 'a' is 00011 (5 bits): then 3 ones of padding is fine ...
        assert_eq!(decode(&[0b0001_1111], &mut Vec::new(), 64), Ok(()));
        // ... 3 zeros are not (they start another code that never ends) ...
        assert_eq!(
            decode(&[0b0001_1000], &mut Vec::new(), 64),
            Err(Error::Huffman)
        );
        // ... nor is a whole byte of ones after it (padding over 7 bits).
        assert_eq!(
            decode(&[0b0001_1111, 0xff], &mut Vec::new(), 64),
            Err(Error::Huffman)
        );
    }

    #[test]
    fn the_limit_counts_decoded_bytes() {
        let huff = coded(b"aaaaaaaaaa");
        assert_eq!(decode(&huff, &mut Vec::new(), 9), Err(Error::TooLong));
        let mut out = b"xy".to_vec();
        assert_eq!(decode(&huff, &mut out, 10), Ok(()));
        assert_eq!(out.len(), 12);
    }
}
