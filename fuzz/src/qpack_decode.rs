//! The QPACK field-section decoder of `crates/http3` (no dynamic table):
//! any bytes decode or fail, never a panic, and never past the size limit;
//! what decodes, encoded again (plain and Huffman) and decoded, gives the
//! same fields in the same order.

use http3::{head::FieldSection, qpack};

const LIMIT: u64 = 8 * 1024;

pub fn check(data: &[u8]) {
    let mut section = FieldSection::new();
    if qpack::decode_section(data, LIMIT, &mut section).is_err() {
        return;
    }
    let size: usize = section.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
    assert!(size as u64 <= LIMIT, "decoded {size} bytes past the limit");
    for huffman in [false, true] {
        let mut encoded = Vec::new();
        qpack::encode_section(section.iter(), huffman, &mut encoded);
        let mut again = FieldSection::new();
        qpack::decode_section(&encoded, LIMIT, &mut again).expect("its own encoding decodes");
        assert_eq!(
            section.iter().collect::<Vec<_>>(),
            again.iter().collect::<Vec<_>>()
        );
    }
}
