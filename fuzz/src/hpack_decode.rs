//! The HPACK decoder of the vendored `h2` fork: any header block decodes
//! or fails, never a panic; what decodes, encoded again by the fork's
//! table-less encoder and decoded by a fresh decoder, gives the same
//! fields in the same order.

use std::{io::Cursor, ops::ControlFlow};

use bytes::BytesMut;
use h2::hpack::{Decoder, Encoder, Header};

fn decode(decoder: &mut Decoder, block: &mut BytesMut) -> Option<Vec<Header>> {
    let mut fields = Vec::new();
    decoder
        .decode(&mut Cursor::new(block), |field| {
            fields.push(field);
            ControlFlow::Continue(())
        })
        .ok()?;
    Some(fields)
}

pub fn check(data: &[u8]) {
    let mut decoder = Decoder::new(4096);
    let Some(fields) = decode(&mut decoder, &mut BytesMut::from(data)) else {
        return;
    };
    let mut encoded = BytesMut::new();
    Encoder::default().encode(fields.iter().cloned().map(Into::into), &mut encoded);
    let again = decode(&mut Decoder::new(4096), &mut encoded).expect("its own encoding decodes");
    assert_eq!(fields, again);
}
