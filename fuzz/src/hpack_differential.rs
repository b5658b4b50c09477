//! sluice's HPACK decoder (`crates/http2`) against the `h2` crate's, as
//! an independent reader: the input is cut into up to three header blocks
//! decoded in order on one decoder of each (the dynamic table carries
//! over). Whatever `h2` decodes, sluice's decoder decodes to the same
//! fields; what sluice decodes, encoded again by sluice's encoder, reads
//! back the same in both. The one refusal allowed is sluice's bound on a
//! decoded list (RFC 9113 6.5.2's size: names and values plus 32 per
//! field), which `h2`'s decoder does not apply: a list past it is refused
//! as too large, one within it never is.

use std::ops::ControlFlow;

use bytes::BytesMut;
use h2::hpack::{Decoder as TheirDecoder, Header};
use http2::{
    head::FieldSection,
    hpack::{self, DecodeError},
};

type Field = (Vec<u8>, Vec<u8>);

/// The list bound this target decodes with.
const MAX_LIST: usize = 1 << 16;

/// A decoded list's size as RFC 9113 6.5.2 counts it.
fn list_size(fields: &[Field]) -> usize {
    fields.iter().map(|(n, v)| n.len() + v.len() + 32).sum()
}

fn theirs(decoder: &mut TheirDecoder, block: &[u8]) -> Option<Vec<Field>> {
    let mut out = Vec::new();
    let mut buf = BytesMut::from(block);
    decoder
        .decode(&mut std::io::Cursor::new(&mut buf), |header| {
            out.push(match header {
                Header::Field { name, value } => (name.as_str().into(), value.as_bytes().into()),
                Header::Authority(v) => (b":authority".to_vec(), v.as_bytes().into()),
                Header::Method(m) => (b":method".to_vec(), m.as_str().into()),
                Header::Scheme(v) => (b":scheme".to_vec(), v.as_bytes().into()),
                Header::Path(v) => (b":path".to_vec(), v.as_bytes().into()),
                Header::Protocol(v) => (b":protocol".to_vec(), v.as_str().into()),
                Header::Status(s) => (b":status".to_vec(), s.as_str().into()),
            });
            ControlFlow::Continue(())
        })
        .ok()?;
    Some(out)
}

fn fields(section: &FieldSection) -> Vec<Field> {
    section
        .iter()
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect()
}

pub fn check(data: &[u8]) {
    let Some((&cuts, data)) = data.split_first() else {
        return;
    };
    let a = (usize::from(cuts & 0x0f) * data.len() / 16).min(data.len());
    let b = (a + usize::from(cuts >> 4) * data.len() / 16).min(data.len());
    let mut ours = hpack::Decoder::new(4096);
    let mut them = TheirDecoder::new(4096);
    for block in [&data[..a], &data[a..b], &data[b..]] {
        let mut out = FieldSection::new();
        let decoded = ours.decode(block, MAX_LIST, &mut out);
        match theirs(&mut them, block) {
            Some(expected) if decoded == Err(DecodeError::TooLarge) => {
                let size = list_size(&expected);
                assert!(size > MAX_LIST, "sluice refused a list of {size} bytes as too large");
                // Both tables are in step: the next block is compared.
                continue;
            }
            Some(expected) => {
                assert!(decoded.is_ok(), "h2 decoded what sluice refused: {expected:?}");
                assert_eq!(fields(&out), expected);
            }
            // Its decoder is lost after an error; so is ours.
            None => return,
        }
        let mut encoded = Vec::new();
        for (name, value) in out.iter() {
            hpack::encode_field(name, value, block.len() % 2 == 0, &mut encoded);
        }
        let mut again = FieldSection::new();
        hpack::Decoder::new(4096)
            .decode(&encoded, MAX_LIST, &mut again)
            .expect("its own encoding decodes");
        assert_eq!(fields(&again), fields(&out));
    }
}
