//! Unit tests of the head rules (split from mod.rs to keep it short).

use std::net::Ipv4Addr;

use super::*;

fn forward(raw: &str, trust: bool, host_header: Option<&HeaderValue>) -> String {
    forward_to(raw, trust, host_header, None)
}

/// [`forward`] toward a host whose configured `host:port` is `fallback_host`.
fn forward_to(
    raw: &str,
    trust: bool,
    host_header: Option<&HeaderValue>,
    fallback_host: Option<&str>,
) -> String {
    let mut fields = Vec::new();
    let limits = http1::Limits {
        max_head: 4096,
        max_body: 4096,
    };
    let head = http1::parse_head_into(raw.as_bytes(), &limits, &mut fields)
        .unwrap()
        .unwrap();
    let mut out = Vec::new();
    let context = RequestContext {
        peer: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)),
        secure: false,
        trust_forwarded: trust,
        host_header,
        fallback_host,
        path: None,
        host: None,
        upgrade: head.upgrade.then_some(Offered::AsSent),
        strip_overrides: true,
        framing: Framing::None,
        edits: None,
        proxied: None,
    };
    let buf = raw.as_bytes();
    let request = Outgoing {
        method: &head.method,
        path: &buf[head.path.clone()],
        query: head.query.clone().map(|q| &buf[q]),
        host: head.host.clone().map(|h| &buf[h]),
        fields: Fields::H1 {
            buf,
            fields: &fields,
        },
    };
    request_head(&mut out, &request, &context);
    String::from_utf8(out).unwrap()
}

#[test]
fn hop_by_hop_fields_are_dropped() {
    let out = forward(
        "GET /a?b=1 HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Secret\r\nX-Secret: s\r\nKeep-Alive: 5\r\nTE: trailers\r\nUpgrade: h2c\r\nAccept: */*\r\n\r\n",
        false,
        None,
    );
    assert_eq!(
        out,
        "GET /a?b=1 HTTP/1.1\r\nHost: h\r\nAccept: */*\r\nx-forwarded-for: 10.0.0.9\r\nx-forwarded-proto: http\r\nx-forwarded-host: h\r\n\r\n"
    );
}

#[test]
fn connection_cannot_name_the_host_away() {
    // Found by the `h2_heads` fuzz target: `Connection: host` dropped the
    // client's Host, and the upstream got an HTTP/1.1 request without one.
    let out = forward(
        "GET / HTTP/1.1\r\nHost: h\r\nConnection: x, host\r\n\r\n",
        false,
        None,
    );
    assert_eq!(
        out,
        "GET / HTTP/1.1\r\nHost: h\r\nx-forwarded-for: 10.0.0.9\r\nx-forwarded-proto: http\r\nx-forwarded-host: h\r\n\r\n"
    );
}

#[test]
fn forwarded_fields_are_replaced_unless_trusted() {
    let raw = "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-Proto: https\r\nX-Forwarded-For: 2.2.2.2\r\nX-Forwarded-Host: outer\r\n\r\n";
    let untrusted = forward(raw, false, None);
    assert!(
        !untrusted.contains("1.1.1.1")
            && !untrusted.contains("https")
            && !untrusted.contains("outer")
    );
    assert!(untrusted.contains("x-forwarded-for: 10.0.0.9\r\n"));
    let trusted = forward(raw, true, None);
    assert!(
        trusted.contains("x-forwarded-for: 1.1.1.1, 2.2.2.2, 10.0.0.9\r\n"),
        "{trusted}"
    );
    assert!(
        trusted.contains("X-Forwarded-Proto: https\r\n") && !trusted.contains("x-forwarded-proto")
    );
    assert!(
        trusted.contains("X-Forwarded-Host: outer\r\n") && !trusted.contains("x-forwarded-host")
    );
}

#[test]
fn host_rewrite_and_upgrade() {
    let value = HeaderValue::from_static("backend.internal");
    let out = forward(
        "GET /ws HTTP/1.1\r\nHost: public\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        false,
        Some(&value),
    );
    assert!(out.contains("host: backend.internal\r\n") && !out.contains("Host: public"));
    assert!(out.contains("Upgrade: websocket\r\n") && out.contains("connection: upgrade\r\n"));
    assert!(out.contains("x-forwarded-host: public\r\n"));
}

#[test]
fn response_heads_reframe() {
    let raw = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nX-Keep: 2\r\n\r\n";
    let mut fields = Vec::new();
    http1::parse_response_head(raw.as_bytes(), 4096, false, &mut fields).unwrap();
    let mut out = Vec::new();
    response_head(
        &mut out,
        StatusCode::OK,
        Fields::H1 {
            buf: raw.as_bytes(),
            fields: &fields,
        },
        Framing::Chunked,
        Persistence::KeepAlive,
        None,
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "HTTP/1.1 200 OK\r\nX-Keep: 2\r\ntransfer-encoding: chunked\r\n\r\n"
    );
}

#[test]
fn override_fields_are_removed() {
    let out = forward(
        "POST /public HTTP/1.1\r\nHost: h\r\nX-Original-URL: /admin\r\nx-rewrite-url: /admin\r\nX-HTTP-Method-Override: DELETE\r\nX-HTTP-Method: PUT\r\nX-Method-Override: PATCH\r\nX-Original-Host: kept\r\n\r\n",
        false,
        None,
    );
    assert!(!out.to_ascii_lowercase().contains("/admin"), "{out}");
    assert!(!out.to_ascii_lowercase().contains("method"), "{out}");
    assert!(out.contains("X-Original-Host: kept"), "{out}");
    for name in OVERRIDES {
        assert!(is_override(name.to_ascii_uppercase().as_bytes()));
    }
    assert!(!is_override(b"x-original-urls") && !is_override(b"x-http"));
}

#[test]
fn a_request_without_host_gets_the_upstream_hosts_and_one_with_keeps_its_own() {
    // HTTP/1.0 may omit Host; the HTTP/1.1 request upstream must carry one.
    let out = forward_to(
        "GET / HTTP/1.0\r\n\r\n",
        false,
        None,
        Some("api.internal:8080"),
    );
    assert_eq!(
        out,
        "GET / HTTP/1.1\r\nhost: api.internal:8080\r\nx-forwarded-for: 10.0.0.9\r\nx-forwarded-proto: http\r\n\r\n"
    );
    let out = forward_to(
        "GET / HTTP/1.0\r\nHost: h\r\n\r\n",
        false,
        None,
        Some("api.internal:8080"),
    );
    assert_eq!(
        out,
        "GET / HTTP/1.1\r\nHost: h\r\nx-forwarded-for: 10.0.0.9\r\nx-forwarded-proto: http\r\nx-forwarded-host: h\r\n\r\n"
    );
}
