use super::*;
use crate::{qpack::encode_section, varint};

/// A HEADERS frame with `fields` as literal names (a client's encoder).
fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut payload = Vec::new();
    encode_section(
        fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        true,
        &mut payload,
    );
    let mut out = Vec::new();
    frame::encode_header(frame::HEADERS, payload.len() as u64, &mut out);
    out.extend_from_slice(&payload);
    out
}

fn data(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_header(frame::DATA, body.len() as u64, &mut out);
    out.extend_from_slice(body);
    out
}

fn frame_of(kind: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_header(kind, payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

const POST: [(&str, &str); 5] = [
    (":method", "POST"),
    (":scheme", "https"),
    (":authority", "a.example"),
    (":path", "/upload"),
    ("content-length", "5"),
];

/// Feeds `bytes` one byte at a time (the worst split), then the end.
fn events(bytes: &[u8]) -> Result<Vec<Event>, Error> {
    let mut decoder = RequestDecoder::new(16_384);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        buf.extend_from_slice(&[b]);
        let fin = i + 1 == bytes.len();
        while let Some(event) = decoder.decode(&mut buf, fin)? {
            out.push(event);
        }
    }
    if bytes.is_empty() {
        while let Some(event) = decoder.decode(&mut buf, true)? {
            out.push(event);
        }
    }
    Ok(out)
}

fn body_of(events: &[Event]) -> Vec<u8> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Data(d) => Some(d.to_vec()),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn head_body_in_pieces_trailers_and_end() {
    let mut stream = headers(&POST);
    stream.extend(frame_of(0x21, b"grease")); // an unknown frame, skipped
    stream.extend(data(b"he"));
    stream.extend(data(b""));
    stream.extend(data(b"llo"));
    stream.extend(headers(&[("x-sum", "abc")]));
    let got = events(&stream).expect("valid");
    assert!(matches!(&got[0], Event::Head(head) if head.path() == Some(&b"/upload"[..])));
    assert_eq!(body_of(&got), b"hello");
    assert!(
        matches!(&got[got.len() - 2], Event::Trailers(t) if t.get(b"x-sum") == Some(&b"abc"[..]))
    );
    assert_eq!(got.last(), Some(&Event::End));
}

#[test]
fn frame_sequence_errors_close_the_connection() {
    let unexpected = |bytes: Vec<u8>| {
        matches!(
            events(&bytes),
            Err(Error::Connection(Code::H3_FRAME_UNEXPECTED, _))
        )
    };
    // DATA first.
    assert!(unexpected(data(b"x")));
    // HEADERS (head), HEADERS (trailers), DATA.
    let mut h_h_d = headers(&POST[..4]);
    h_h_d.extend(headers(&[("x", "1")]));
    h_h_d.extend(data(b"x"));
    assert!(unexpected(h_h_d));
    // A third HEADERS.
    let mut three = headers(&POST[..4]);
    three.extend(headers(&[("x", "1")]));
    three.extend(headers(&[("y", "1")]));
    assert!(unexpected(three));
    // Control frames and HTTP/2 types on a request stream.
    for kind in [
        frame::SETTINGS,
        frame::GOAWAY,
        frame::MAX_PUSH_ID,
        frame::CANCEL_PUSH,
        frame::PUSH_PROMISE,
        0x2,
        0x6,
        0x8,
        0x9,
    ] {
        let mut bytes = headers(&POST[..4]);
        let mut payload = Vec::new();
        varint::encode(0, &mut payload);
        bytes.extend(frame_of(kind, &payload));
        assert!(unexpected(bytes), "type {kind:#x}");
    }
}

#[test]
fn a_second_full_request_head_is_malformed_trailers() {
    let mut smuggled = headers(&POST[..4]);
    smuggled.extend(headers(&[(":method", "GET"), (":path", "/admin")]));
    assert_eq!(
        events(&smuggled),
        Err(Error::Stream(
            Code::H3_MESSAGE_ERROR,
            "a pseudo-header in trailers"
        ))
    );
}

#[test]
fn content_length_must_match_the_body() {
    let mut short = headers(&POST);
    short.extend(data(b"hey"));
    assert!(matches!(
        events(&short),
        Err(Error::Stream(Code::H3_MESSAGE_ERROR, _))
    ));
    let mut long = headers(&POST);
    long.extend(data(b"hello!"));
    assert!(matches!(
        events(&long),
        Err(Error::Stream(Code::H3_MESSAGE_ERROR, _))
    ));
}

#[test]
fn truncation_and_empty_streams() {
    assert_eq!(
        events(&[]),
        Err(Error::Stream(
            Code::H3_REQUEST_INCOMPLETE,
            "the stream ended before the head"
        ))
    );
    let head = headers(&POST[..4]);
    assert!(matches!(
        events(&head[..head.len() - 1]),
        Err(Error::Connection(Code::H3_FRAME_ERROR, _))
    ));
    let mut mid_data = headers(&POST[..4]);
    mid_data.extend(&data(b"hello")[..4]);
    assert!(matches!(
        events(&mid_data),
        Err(Error::Connection(Code::H3_FRAME_ERROR, _))
    ));
}

#[test]
fn an_oversize_head_is_431_before_its_payload_is_read() {
    let mut decoder = RequestDecoder::new(64);
    let big: Vec<(&str, &str)> = POST[..4]
        .iter()
        .copied()
        .chain([("x-big", "a-long-value-that-is-long")])
        .collect();
    let mut buf = BytesMut::from(&headers(&big)[..3]);
    // Only the frame header is here: its length alone decides.
    let result = decoder.decode(&mut buf, false);
    assert!(
        matches!(result, Err(Error::HeadTooLarge) | Ok(None)),
        "{result:?}"
    );
    let mut decoder = RequestDecoder::new(64);
    let mut buf = BytesMut::from(&headers(&big)[..]);
    assert_eq!(decoder.decode(&mut buf, false), Err(Error::HeadTooLarge));
}

#[test]
fn a_dynamic_reference_fails_qpack() {
    // Required Insert Count 1.
    let bytes = frame_of(frame::HEADERS, &[0x02, 0x00, 0x80]);
    assert!(matches!(
        events(&bytes),
        Err(Error::Connection(Code::QPACK_DECOMPRESSION_FAILED, _))
    ));
    // Indexed with T = 0 (dynamic).
    let bytes = frame_of(frame::HEADERS, &[0x00, 0x00, 0x80]);
    assert!(matches!(
        events(&bytes),
        Err(Error::Connection(Code::QPACK_DECOMPRESSION_FAILED, _))
    ));
    // Static index 99, past the table.
    let bytes = frame_of(frame::HEADERS, &[0x00, 0x00, 0xff, 0x24]);
    assert!(matches!(
        events(&bytes),
        Err(Error::Connection(Code::QPACK_DECOMPRESSION_FAILED, _))
    ));
}
