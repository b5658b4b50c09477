use super::*;

#[test]
fn content_types_translate() {
    let of =
        |t: &str| translated(t.as_bytes()).map(|(v, text)| (v.to_str().unwrap().to_string(), text));
    assert_eq!(
        of("application/grpc-web"),
        Some(("application/grpc".into(), false))
    );
    assert_eq!(
        of("application/grpc-web+proto"),
        Some(("application/grpc+proto".into(), false))
    );
    assert_eq!(
        of("application/grpc-web+json; charset=utf-8"),
        Some(("application/grpc+json".into(), false))
    );
    assert_eq!(
        of("application/grpc-web-text"),
        Some(("application/grpc".into(), true))
    );
    assert_eq!(
        of("Application/gRPC-Web-Text+proto"),
        Some(("application/grpc+proto".into(), true))
    );
    assert_eq!(of("application/grpc"), None);
    assert_eq!(of("application/grpc-webx"), None);
    assert_eq!(of("application/grpc-web+"), None);
    assert_eq!(of("application/json"), None);
}

fn answer(
    offer: Offer,
    pairs: &[(&str, &str)],
    empty: bool,
) -> (Option<GrpcWebResponse>, HeaderEdits) {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    let mut edits = HeaderEdits::default();
    let started = offer.start(Fields::Map(&map), empty, &mut edits);
    (started, edits)
}

#[test]
fn the_answer_head_becomes_grpc_web() {
    let (filter, edits) = answer(
        Offer { text: false },
        &[("content-type", "application/grpc+proto")],
        false,
    );
    assert!(filter.is_some());
    let appended: Vec<(&[u8], &[u8])> = edits.appended().collect();
    assert_eq!(
        appended,
        [(&b"content-type"[..], &b"application/grpc-web+proto"[..])]
    );
    assert!(edits.drops(b"content-length"));
    let (_, edits) = answer(
        Offer { text: true },
        &[("content-type", "application/grpc")],
        false,
    );
    let appended: Vec<(&[u8], &[u8])> = edits.appended().collect();
    assert_eq!(
        appended,
        [(&b"content-type"[..], &b"application/grpc-web-text"[..])]
    );
    // Trailers-only: the head changes, no body to write.
    let (filter, edits) = answer(
        Offer { text: true },
        &[("content-type", "application/grpc"), ("grpc-status", "5")],
        true,
    );
    assert!(filter.is_none() && !edits.is_empty());
    // Not gRPC (an upstream's 404 page): untouched.
    let (filter, edits) = answer(
        Offer { text: false },
        &[("content-type", "text/html")],
        false,
    );
    assert!(filter.is_none() && edits.is_empty());
}

#[test]
fn trailers_end_the_body_as_a_frame() {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    trailers.insert("grpc-message", "ok".parse().unwrap());
    let mut binary = GrpcWebResponse { text: false };
    let mut out = Vec::new();
    binary.data(b"\0\0\0\0\x02hi", &mut out);
    assert_eq!(binary.end(Some(&trailers), &mut out), Trailers::InBody);
    let block = b"grpc-status: 0\r\ngrpc-message: ok\r\n";
    let mut expected = b"\0\0\0\0\x02hi\x80".to_vec();
    expected.extend_from_slice(&u32::try_from(block.len()).unwrap().to_be_bytes());
    expected.extend_from_slice(block);
    assert_eq!(out, expected);
    // Text: each write a padded run; a decoder reads them back whole.
    let mut text = GrpcWebResponse { text: true };
    let mut out = Vec::new();
    text.data(b"\0\0\0\0\x02hi", &mut out);
    assert!(out.ends_with(b"="));
    text.end(Some(&trailers), &mut out);
    let mut decoder = Base64Decoder::default();
    let mut decoded = Vec::new();
    for piece in out.chunks(5) {
        decoder.data(piece, &mut decoded).unwrap();
    }
    decoder.end().unwrap();
    assert_eq!(decoded, expected);
}

#[test]
fn the_request_decoder_takes_runs_and_refuses_what_is_not_base64() {
    let mut decoder = Base64Decoder::default();
    let mut out = Vec::new();
    decoder.data(b"aGVs", &mut out).unwrap();
    decoder.data(b"bG8=d29y", &mut out).unwrap();
    decoder.data(b"bGQ", &mut out).unwrap();
    assert!(decoder.end().is_err(), "a group cut short");
    decoder.data(b"=", &mut out).unwrap();
    decoder.end().unwrap();
    assert_eq!(out, b"helloworld");
    let mut bad = Default::default();
    assert!(Base64Decoder::data(&mut bad, b"a$==", &mut Vec::new()).is_err());
    let mut bad = Base64Decoder::default();
    assert!(bad.data(b"a=bc", &mut Vec::new()).is_err());
}
