use super::*;

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

#[test]
fn a_v1_line_names_the_client() {
    let buf = b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\nGET / HTTP/1.1\r\n";
    let header = parse(buf, Versions::Any).unwrap().unwrap();
    assert_eq!(header.version, 1);
    assert_eq!(header.len, 45);
    assert_eq!(
        header.addresses,
        Some((addr("192.0.2.7:56324"), addr("198.51.100.1:443")))
    );
    assert_eq!(header_extent(buf), 45);
    let v6 = b"PROXY TCP6 2001:db8::1 ::1 1 65535\r\n";
    let header = parse(v6, Versions::V1).unwrap().unwrap();
    assert_eq!(
        header.addresses,
        Some((addr("[2001:db8::1]:1"), addr("[::1]:65535")))
    );
    let unknown = parse(b"PROXY UNKNOWN whatever\r\n", Versions::V1)
        .unwrap()
        .unwrap();
    assert_eq!(unknown.addresses, None);
}

#[test]
fn malformed_v1_lines_are_refused() {
    for bad in [
        &b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\n"[..],
        b"PROXY TCP4 192.0.2.7  198.51.100.1 56324 443\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 056324 443\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 65536 443\r\n",
        b"PROXY TCP4 2001:db8::1 198.51.100.1 1 443\r\n",
        b"PROXY TCP6 192.0.2.7 ::1 1 443\r\n",
        b"PROXY UDP4 192.0.2.7 198.51.100.1 1 443\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 1\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 1 2 3\r\n",
        b"PROXY TCP4 192.0.2.07 198.51.100.1 1 2\r\n",
    ] {
        assert_eq!(
            parse(bad, Versions::Any),
            Err(Invalid::V1Line),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    // No CRLF within 107 bytes.
    let long = [b"PROXY TCP4 ".as_slice(), &[b'1'; 120]].concat();
    assert_eq!(parse(&long, Versions::Any), Err(Invalid::V1Line));
    assert_eq!(header_extent(&long), V1_MAX);
    // Still arriving.
    assert_eq!(parse(b"PROXY TCP4 192.0", Versions::Any), Ok(None));
    assert_eq!(parse(b"PRO", Versions::Any), Ok(None));
}

#[test]
fn the_first_bytes_tell_a_header_from_a_request() {
    assert_eq!(start(b""), Start::Undecided);
    assert_eq!(start(b"P"), Start::Undecided);
    assert_eq!(start(b"PROX"), Start::Undecided);
    assert_eq!(start(b"PROXY "), Start::V1);
    assert_eq!(start(b"POST / HTTP/1.1"), Start::Other);
    // The HTTP/2 preface shares two bytes with version 1.
    assert_eq!(start(b"PRI * HTTP/2.0"), Start::Other);
    assert_eq!(start(b"\r\n\r\n\0\r"), Start::Undecided);
    assert_eq!(start(&V2_SIGNATURE), Start::V2);
    assert_eq!(start(b"\r\nGET"), Start::Other);
    // A TLS ClientHello.
    assert_eq!(start(&[0x16, 0x03, 0x01]), Start::Other);
}

fn v2(command: u8, family: u8, body: &[u8]) -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.push(command);
    out.push(family);
    out.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    out.extend_from_slice(body);
    out
}

#[test]
fn a_v2_header_names_the_client_and_its_tls() {
    let mut out = Vec::new();
    let ssl = [
        &[0x07u8, 0, 0, 0, 0][..],
        &[0x21, 0, 7],
        b"TLSv1.3",
        &[0x22, 0, 5],
        b"alice",
        &[0x23, 0, 22],
        b"TLS_AES_128_GCM_SHA256",
    ]
    .concat();
    write_v2(
        &mut out,
        Some((addr("192.0.2.7:5000"), addr("198.51.100.1:443"))),
        &[
            (0x01, b"h2"),
            (0x02, b"api.example"),
            (0x20, &ssl),
            (0x05, b"conn-1"),
        ],
    );
    out.extend_from_slice(b"GET / HTTP/1.1\r\n");
    let header = parse(&out, Versions::V2).unwrap().unwrap();
    assert_eq!(header_extent(&out), header.len);
    assert_eq!(&out[header.len..], b"GET / HTTP/1.1\r\n");
    assert_eq!(
        header.addresses,
        Some((addr("192.0.2.7:5000"), addr("198.51.100.1:443")))
    );
    assert_eq!(header.tlvs.alpn.as_deref(), Some("h2"));
    assert_eq!(header.tlvs.authority.as_deref(), Some("api.example"));
    assert_eq!(header.tlvs.unique_id.as_deref(), Some("conn-1"));
    let ssl = header.tlvs.ssl.unwrap();
    assert!(ssl.client_ssl && ssl.client_cert && ssl.verified);
    assert_eq!(ssl.version.as_deref(), Some("TLSv1.3"));
    assert_eq!(ssl.cn.as_deref(), Some("alice"));
    assert_eq!(ssl.cipher.as_deref(), Some("TLS_AES_128_GCM_SHA256"));
}

#[test]
fn v2_local_and_ipv6_and_mixed_families() {
    let mut local = Vec::new();
    write_v2(&mut local, None, &[]);
    assert_eq!(local.len(), 16);
    let header = parse(&local, Versions::Any).unwrap().unwrap();
    assert_eq!(header.addresses, None);
    let mut mixed = Vec::new();
    write_v2(
        &mut mixed,
        Some((addr("192.0.2.7:5000"), addr("[2001:db8::2]:443"))),
        &[],
    );
    let header = parse(&mixed, Versions::Any).unwrap().unwrap();
    assert_eq!(
        header.addresses,
        Some((addr("[::ffff:192.0.2.7]:5000"), addr("[2001:db8::2]:443")))
    );
    let mut line = Vec::new();
    write_v1(
        &mut line,
        Some((addr("192.0.2.7:5000"), addr("[2001:db8::2]:443"))),
    );
    assert_eq!(
        line,
        b"PROXY TCP6 ::ffff:192.0.2.7 2001:db8::2 5000 443\r\n".to_vec()
    );
    let header = parse(&line, Versions::Any).unwrap().unwrap();
    assert_eq!(
        header.addresses,
        Some((addr("[::ffff:192.0.2.7]:5000"), addr("[2001:db8::2]:443")))
    );
}

#[test]
fn v2_headers_with_bad_lengths_are_refused() {
    // Too short for two IPv4 addresses and ports.
    assert_eq!(
        parse(&v2(0x21, 0x11, &[0; 11]), Versions::Any),
        Err(Invalid::V2Length)
    );
    assert_eq!(
        parse(&v2(0x21, 0x21, &[0; 35]), Versions::Any),
        Err(Invalid::V2Length)
    );
    // A TLV running past the end.
    let body = [&[0u8; 12][..], &[0x02, 0, 9], b"short"].concat();
    assert_eq!(
        parse(&v2(0x21, 0x11, &body), Versions::Any),
        Err(Invalid::V2Length)
    );
    // A TLV header cut short.
    let body = [&[0u8; 12][..], &[0x02, 0]].concat();
    assert_eq!(
        parse(&v2(0x21, 0x11, &body), Versions::Any),
        Err(Invalid::V2Length)
    );
    // Longer than accepted: refused on the fixed part alone.
    let mut long = V2_SIGNATURE.to_vec();
    long.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
    assert_eq!(parse(&long, Versions::Any), Err(Invalid::V2Length));
    // An SSL TLV shorter than its fixed part.
    let body = [&[0u8; 12][..], &[0x20, 0, 2, 1, 0]].concat();
    assert_eq!(
        parse(&v2(0x21, 0x11, &body), Versions::Any),
        Err(Invalid::V2Length)
    );
    // Truncated: more is needed.
    let whole = v2(0x21, 0x11, &[0; 12]);
    assert_eq!(parse(&whole[..20], Versions::Any), Ok(None));
    assert_eq!(header_extent(&whole[..20]), 20);
    assert_eq!(parse(&whole[..10], Versions::Any), Ok(None));
}

#[test]
fn v2_commands_families_and_versions() {
    assert_eq!(
        parse(&v2(0x22, 0x11, &[0; 12]), Versions::Any),
        Err(Invalid::V2Command)
    );
    assert_eq!(
        parse(&v2(0x11, 0x11, &[0; 12]), Versions::Any),
        Err(Invalid::V2Command)
    );
    assert_eq!(
        parse(&v2(0x21, 0x41, &[0; 12]), Versions::Any),
        Err(Invalid::V2Family)
    );
    // UDP.
    assert_eq!(
        parse(&v2(0x21, 0x12, &[0; 12]), Versions::Any),
        Err(Invalid::V2Family)
    );
    // AF_UNIX: the connection's own addresses stand.
    let unix = parse(&v2(0x21, 0x31, &[0; 216]), Versions::Any)
        .unwrap()
        .unwrap();
    assert_eq!(unix.addresses, None);
    assert_eq!(
        parse(&v2(0x21, 0x11, &[0; 12]), Versions::V1),
        Err(Invalid::Version)
    );
    assert_eq!(
        parse(b"PROXY UNKNOWN\r\n", Versions::V2),
        Err(Invalid::Version)
    );
}

#[test]
fn the_crc32c_tlv_is_checked() {
    // RFC 3720 B.4: 32 bytes of zeros.
    assert_eq!(crc32c(&[0; 32]), 0x8a91_36aa);
    assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    let mut out = Vec::new();
    write_v2(
        &mut out,
        Some((addr("192.0.2.7:5000"), addr("198.51.100.1:443"))),
        &[(0x03, &[0, 0, 0, 0])],
    );
    let sum = crc32c(&out);
    let at = out.len() - 4;
    out[at..].copy_from_slice(&sum.to_be_bytes());
    assert!(parse(&out, Versions::Any).unwrap().is_some());
    out[at] ^= 1;
    assert_eq!(parse(&out, Versions::Any), Err(Invalid::V2Checksum));
}

#[test]
fn unprintable_tlv_values_are_left_out() {
    let mut out = Vec::new();
    write_v2(
        &mut out,
        Some((addr("192.0.2.7:5000"), addr("198.51.100.1:443"))),
        &[(0x02, b"evil\r\nx-admin: 1"), (0x01, b"")],
    );
    let header = parse(&out, Versions::Any).unwrap().unwrap();
    assert_eq!(header.tlvs.authority, None);
    assert_eq!(header.tlvs.alpn, None);
}
