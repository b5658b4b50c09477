//! The HTTP/3 request-stream decoder of `crates/http3`, fed arbitrary
//! bytes in pieces (their size from the first byte): never a panic, no
//! body byte that was not received, nothing after the end, and a head it
//! yields is one that its own rules accept when encoded and read again.

use bytes::BytesMut;
use http3::{
    head,
    head::FieldSection,
    qpack,
    request::{Event, RequestDecoder},
};

pub fn check(data: &[u8]) {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let piece = usize::from(first % 31) + 1;
    let mut decoder = RequestDecoder::new(4096);
    let mut buf = BytesMut::new();
    let mut body = 0usize;
    let mut ended = false;
    let chunks: Vec<&[u8]> = stream.chunks(piece).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        buf.extend_from_slice(chunk);
        let fin = i + 1 == chunks.len();
        loop {
            match decoder.decode(&mut buf, fin) {
                Ok(Some(event)) => {
                    assert!(!ended, "an event after the end");
                    match event {
                        Event::Head(head) => {
                            let mut fields: Vec<(&[u8], &[u8])> = Vec::new();
                            fields.push((b":method", head.method()));
                            if let Some(s) = head.scheme() {
                                fields.push((b":scheme", s));
                            }
                            if let Some(a) = head.authority() {
                                fields.push((b":authority", a));
                            }
                            if let Some(p) = head.path() {
                                fields.push((b":path", p));
                            }
                            fields.extend(head.iter());
                            let mut encoded = Vec::new();
                            qpack::encode_section(fields, false, &mut encoded);
                            let mut again = FieldSection::new();
                            qpack::decode_section(&encoded, 1 << 20, &mut again).expect("decodes");
                            head::request(again).expect("a head it yielded is well-formed");
                        }
                        Event::Data(data) => body += data.len(),
                        Event::Trailers(trailers) => {
                            head::trailers(&trailers).expect("trailers it yielded are well-formed")
                        }
                        Event::End => ended = true,
                    }
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    assert!(
        body <= stream.len(),
        "{body} body bytes from {} received",
        stream.len()
    );
}
