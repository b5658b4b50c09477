use super::*;

fn section(fields: &[(&str, &str)]) -> FieldSection {
    let mut s = FieldSection::new();
    for (n, v) in fields {
        s.push(n.as_bytes(), v.as_bytes());
    }
    s
}

const GET: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "https"),
    (":authority", "example.com"),
    (":path", "/a?b"),
];

fn with(extra: &[(&str, &str)]) -> Vec<(&'static str, &'static str)> {
    let mut all: Vec<(&str, &str)> = GET.to_vec();
    // Leak is fine in a test: the fields outlive the call.
    for (n, v) in extra {
        all.push((
            Box::leak(n.to_string().into_boxed_str()),
            Box::leak(v.to_string().into_boxed_str()),
        ));
    }
    all
}

#[test]
fn a_plain_get_is_taken_apart() {
    let head = request(section(&with(&[("accept", "*/*"), ("x-a", "1")]))).expect("valid");
    assert_eq!(head.method(), b"GET");
    assert_eq!(head.scheme(), Some(&b"https"[..]));
    assert_eq!(head.authority(), Some(&b"example.com"[..]));
    assert_eq!(head.path(), Some(&b"/a?b"[..]));
    let regular: Vec<_> = head.iter().collect();
    assert_eq!(regular, [(&b"accept"[..], &b"*/*"[..]), (b"x-a", b"1")]);
    let (buf, ranges) = head.fields();
    assert_eq!(&buf[ranges[1].0.clone()], b"x-a");
}

#[test]
fn pseudo_header_order_duplicates_and_unknown_ones_are_malformed() {
    let after = section(&[
        (":method", "GET"),
        (":scheme", "https"),
        ("accept", "*/*"),
        (":path", "/"),
        (":authority", "a"),
    ]);
    assert_eq!(request(after), Err("a pseudo-header after a regular field"));
    let twice = section(
        &with(&[])
            .into_iter()
            .chain([(":path", "/admin")])
            .collect::<Vec<_>>(),
    );
    assert_eq!(request(twice), Err("a pseudo-header given twice"));
    for bad in [":status", ":foo"] {
        let mut fields = GET.to_vec();
        fields.insert(1, (bad, "200"));
        assert!(request(section(&fields)).is_err(), "{bad}");
    }
    let mut fields = GET.to_vec();
    fields.push((":protocol", "websocket"));
    assert!(request(section(&fields)).is_err());
}

#[test]
fn required_pseudo_headers_and_connect() {
    for missing in [":method", ":scheme", ":path"] {
        let fields: Vec<_> = GET.iter().copied().filter(|(n, _)| *n != missing).collect();
        assert!(request(section(&fields)).is_err(), "{missing}");
    }
    let no_authority: Vec<_> = GET
        .iter()
        .copied()
        .filter(|(n, _)| *n != ":authority")
        .collect();
    assert_eq!(
        request(section(&no_authority)),
        Err("no :authority and no host")
    );
    let mut with_host = no_authority.clone();
    with_host.push(("host", "example.com"));
    assert!(request(section(&with_host)).is_ok());
    assert!(request(section(&[(":method", "CONNECT"), (":authority", "a:443")])).is_ok());
    assert!(request(section(&[
        (":method", "CONNECT"),
        (":authority", "a:443"),
        (":path", "/")
    ]))
    .is_err());
    assert!(request(section(&[(":method", "CONNECT")])).is_err());
    let mut userinfo = GET.to_vec();
    userinfo[2] = (":authority", "user:pw@example.com");
    assert_eq!(request(section(&userinfo)), Err("userinfo in :authority"));
    let mut empty_path = GET.to_vec();
    empty_path[3] = (":path", "");
    assert!(request(section(&empty_path)).is_err());
    let mut spaced = GET.to_vec();
    spaced[3] = (":path", "/a b");
    assert!(request(section(&spaced)).is_err());
}

#[test]
fn regular_field_rules() {
    let bad: [(&str, &str); 11] = [
        ("Accept", "*/*"),
        ("x a", "1"),
        ("", "1"),
        ("x-a", "a\r\nb: c"),
        ("x-a", "a\0"),
        ("x-a", " padded"),
        ("x-a", "padded\t"),
        ("connection", "close"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "websocket"),
        ("te", "gzip"),
    ];
    for field in bad {
        assert!(request(section(&with(&[field]))).is_err(), "{field:?}");
    }
    assert!(request(section(&with(&[("te", "trailers")]))).is_ok());
    assert!(request(section(&with(&[("x-empty", "")]))).is_ok());
}

#[test]
fn content_length_must_be_one_number() {
    let head = request(section(&with(&[("content-length", "5")]))).expect("valid");
    assert_eq!(head.content_length(), Some(5));
    assert!(request(section(&with(&[
        ("content-length", "5"),
        ("content-length", "5")
    ])))
    .is_ok());
    for bad in [
        &[("content-length", "5"), ("content-length", "6")][..],
        &[("content-length", "5, 5")],
        &[("content-length", "-1")],
        &[("content-length", "99999999999999999999")],
    ] {
        assert!(request(section(&with(bad))).is_err(), "{bad:?}");
    }
}

#[test]
fn trailers_carry_no_pseudo_headers() {
    assert!(trailers(&section(&[("grpc-status", "0")])).is_ok());
    assert_eq!(
        trailers(&section(&[(":path", "/admin")])),
        Err("a pseudo-header in trailers")
    );
    assert!(trailers(&section(&[("x-a", "a\nb")])).is_err());
}

#[test]
fn response_heads() {
    let ok = section(&[(":status", "204"), ("x-a", "1"), ("content-length", "0")]);
    assert_eq!(response(&ok), Ok((204, 1)));
    assert_eq!(content_length(&ok, 1), Ok(Some(0)));
    for bad in [
        &[("x-a", "1"), (":status", "200")][..],
        &[(":status", "20")],
        &[(":status", "099")],
        &[(":status", "200"), (":status", "201")],
        &[(":status", "200"), (":path", "/")],
        &[(":status", "200"), ("Upper", "1")],
        &[(":status", "200"), ("connection", "close")],
        &[],
    ] {
        assert!(response(&section(bad)).is_err(), "{bad:?}");
    }
    let two = section(&[
        (":status", "200"),
        ("content-length", "1"),
        ("content-length", "2"),
    ]);
    assert!(content_length(&two, 1).is_err());
}
