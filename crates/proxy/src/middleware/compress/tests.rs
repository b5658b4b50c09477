use super::*;
use crate::wire::edits::HeaderEdits;
use crate::wire::fields::Fields;
use filter::Skip;
use http::{HeaderMap, StatusCode};

fn policy(settings: CompressSettings) -> Arc<Policy> {
    Arc::new(Policy::new(&settings))
}

fn offer(policy: &Arc<Policy>, encoding: Option<Encoding>) -> Offer {
    Offer {
        policy: Arc::clone(policy),
        encoding,
        head: false,
    }
}

fn head(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    map
}

/// The rule that stops a response, or `None` when it is compressed;
/// with the head edits made either way.
fn decide(offer: Offer, status: u16, pairs: &[(&str, &str)]) -> (Option<Skip>, HeaderEdits) {
    let map = head(pairs);
    let mut edits = HeaderEdits::default();
    let status = StatusCode::from_u16(status).unwrap();
    let started = offer.start(status, Fields::Map(&map), false, &mut edits);
    (started.err(), edits)
}

const JSON: (&str, &str) = ("content-type", "application/json; charset=utf-8");

#[test]
fn each_rule_keeps_its_responses_uncompressed() {
    let p = policy(CompressSettings::default());
    let gzip = Some(Encoding::Gzip);
    assert_eq!(decide(offer(&p, gzip), 200, &[JSON]).0, None);
    let mut head_request = offer(&p, gzip);
    head_request.head = true;
    assert_eq!(decide(head_request, 200, &[JSON]).0, Some(Skip::NoBody));
    for status in [204, 206, 304, 103] {
        assert_eq!(
            decide(offer(&p, gzip), status, &[JSON]).0,
            Some(Skip::NoBody),
            "{status}"
        );
    }
    // An error page is compressed like any other body.
    assert_eq!(decide(offer(&p, gzip), 404, &[JSON]).0, None);
    let encoded = [JSON, ("content-encoding", "br")];
    assert_eq!(
        decide(offer(&p, gzip), 200, &encoded).0,
        Some(Skip::Encoded)
    );
    let no_transform = [JSON, ("cache-control", "public, No-Transform")];
    assert_eq!(
        decide(offer(&p, gzip), 200, &no_transform).0,
        Some(Skip::NoTransform)
    );
    for other in [
        "image/png",
        "application/octet-stream",
        "application/grpc",
        "application/grpc+proto",
        "application/grpc-web-text",
    ] {
        let pairs = [("content-type", other)];
        assert_eq!(
            decide(offer(&p, gzip), 200, &pairs).0,
            Some(Skip::Type),
            "{other}"
        );
    }
    assert_eq!(decide(offer(&p, gzip), 200, &[]).0, Some(Skip::Type));
    let sse = [("content-type", "text/event-stream")];
    assert_eq!(decide(offer(&p, gzip), 200, &sse).0, Some(Skip::Type));
    let with_sse = policy(CompressSettings {
        event_stream: true,
        ..CompressSettings::default()
    });
    assert_eq!(decide(offer(&with_sse, gzip), 200, &sse).0, None);
    let small = [JSON, ("content-length", "1023")];
    assert_eq!(decide(offer(&p, gzip), 200, &small).0, Some(Skip::Small));
    let large = [JSON, ("content-length", "1024")];
    assert_eq!(decide(offer(&p, gzip), 200, &large).0, None);
    assert_eq!(
        decide(offer(&p, None), 200, &[JSON]).0,
        Some(Skip::NotAccepted)
    );
}

#[test]
fn the_head_says_what_changed() {
    let p = policy(CompressSettings::default());
    let pairs = [
        JSON,
        ("content-length", "5000"),
        ("etag", "\"v1\""),
        ("accept-ranges", "bytes"),
    ];
    let (skip, edits) = decide(offer(&p, Some(Encoding::Br)), 200, &pairs);
    assert_eq!(skip, None);
    assert!(edits.drops(b"content-length") && edits.drops(b"accept-ranges"));
    let appended: Vec<(&[u8], &[u8])> = edits.appended().collect();
    assert!(appended.contains(&(&b"content-encoding"[..], &b"br"[..])));
    assert!(appended.contains(&(&b"etag"[..], &b"W/\"v1\""[..])));
    assert!(appended.contains(&(&b"vary"[..], &b"accept-encoding"[..])));
    // A weak ETag stays; a Vary that already names it gets no second.
    let pairs = [
        JSON,
        ("etag", "W/\"v1\""),
        ("vary", "Origin, Accept-Encoding"),
    ];
    let (_, edits) = decide(offer(&p, Some(Encoding::Gzip)), 200, &pairs);
    assert!(!edits.drops(b"etag"));
    assert!(!edits.appended().any(|(name, _)| name == b"vary"));
    // Eligible but not accepted: Vary only.
    let (skip, edits) = decide(offer(&p, None), 200, &[JSON]);
    assert_eq!(skip, Some(Skip::NotAccepted));
    let appended: Vec<(&[u8], &[u8])> = edits.appended().collect();
    assert_eq!(appended, [(&b"vary"[..], &b"accept-encoding"[..])]);
    // Not eligible: nothing.
    let (_, edits) = decide(offer(&p, None), 200, &[("content-type", "image/png")]);
    assert!(edits.is_empty());
}

/// Decodes `bytes` of `encoding` with an independent decoder (flate2's
/// gzip reader, the brotli crate's decompressor, libzstd's).
fn decode(encoding: Encoding, bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match encoding {
        Encoding::Gzip => {
            flate2::read::GzDecoder::new(bytes)
                .read_to_end(&mut out)
                .unwrap();
        }
        Encoding::Br => {
            brotli::Decompressor::new(bytes, 4096)
                .read_to_end(&mut out)
                .unwrap();
        }
        Encoding::Zstd => {
            out = zstd::stream::decode_all(bytes).unwrap();
        }
    }
    out
}

#[test]
fn each_coding_streams_the_exact_bytes_and_flushes_each_chunk() {
    let p = policy(CompressSettings::default());
    let body = budget::sample(300_000);
    for encoding in [Encoding::Gzip, Encoding::Br, Encoding::Zstd] {
        let mut edits = HeaderEdits::default();
        let map = head(&[JSON]);
        let mut compression = offer(&p, Some(encoding))
            .start(StatusCode::OK, Fields::Map(&map), false, &mut edits)
            .unwrap();
        let mut out = Vec::new();
        for chunk in body.chunks(7_777) {
            let before = out.len();
            compression.data(chunk, &mut out).unwrap();
            // Flushed: what came so far decodes to the body so far
            // (checked on the first chunk: a streamed event arrives whole).
            if before == 0 {
                let so_far = partial(encoding, &out);
                assert_eq!(so_far, &body[..chunk.len()], "{encoding:?}");
            }
        }
        compression.finish(&mut out).unwrap();
        assert_eq!(decode(encoding, &out), body, "{encoding:?}");
        assert!(
            out.len() < body.len() / 3,
            "{encoding:?}: {} bytes",
            out.len()
        );
    }
}

/// What a streaming decoder makes of a stream that is not ended yet.
fn partial(encoding: Encoding, bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = vec![0u8; 64 * 1024];
    let n = match encoding {
        Encoding::Gzip => {
            let mut decoder = flate2::read::GzDecoder::new(bytes);
            read_available(&mut decoder, &mut out)
        }
        Encoding::Br => {
            let mut decoder = brotli::Decompressor::new(bytes, 4096);
            read_available(&mut decoder, &mut out)
        }
        Encoding::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::new(bytes).unwrap();
            read_available(&mut decoder, &mut out)
        }
    };
    out.truncate(n);
    let _ = Read::by_ref(&mut &bytes[..]);
    out
}

/// Reads until the decoder has no more (an unexpected end of a stream
/// that is not finished counts as the end).
fn read_available(reader: &mut impl std::io::Read, out: &mut [u8]) -> usize {
    let mut filled = 0;
    while filled < out.len() {
        match reader.read(&mut out[filled..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => filled += n,
        }
    }
    filled
}

#[test]
fn a_full_budget_sends_responses_uncompressed_and_gives_back_on_drop() {
    let gzip_cost = budget::gzip_bytes(12, 5) + budget::OUTPUT_ALLOWANCE;
    let settings = CompressSettings {
        algorithms: vec![Encoding::Gzip],
        max_memory: (2 * gzip_cost) as u64,
        ..CompressSettings::default()
    };
    let p = policy(settings);
    let map = head(&[JSON]);
    let start = || {
        let mut edits = HeaderEdits::default();
        offer(&p, Some(Encoding::Gzip)).start(StatusCode::OK, Fields::Map(&map), false, &mut edits)
    };
    let first = start().unwrap();
    let second = start().unwrap();
    assert_eq!(start().err(), Some(Skip::Memory));
    assert_eq!(p.budget.used(), 2 * gzip_cost);
    drop(first);
    let third = start().unwrap();
    drop((second, third));
    assert_eq!(p.budget.used(), 0);
    assert_eq!(p.budget.refused.load(Relaxed), 1);
}

#[test]
fn reservations_cover_what_the_compressors_hold() {
    // Brotli and Zstandard are measured; the streams' own counts stay
    // within what was reserved for them.
    let p = policy(CompressSettings::default());
    let body = budget::sample(600_000);
    for encoding in [Encoding::Br, Encoding::Zstd] {
        let map = head(&[JSON]);
        let mut edits = HeaderEdits::default();
        let mut compression = offer(&p, Some(encoding))
            .start(StatusCode::OK, Fields::Map(&map), false, &mut edits)
            .unwrap();
        let mut out = Vec::new();
        for chunk in body.chunks(16 * 1024) {
            out.clear();
            compression.data(chunk, &mut out).unwrap();
        }
        assert_eq!(
            p.budget.grown.load(Relaxed),
            0,
            "{encoding:?} outgrew its reservation"
        );
        drop(compression);
    }
    assert_eq!(p.budget.used(), 0);
}
