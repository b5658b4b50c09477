//! Host forms meet their route; absolute-form targets replace the Host;
//! CONNECT is refused as a target form.

use crate::support::{
    h2_client, h2_exchange,
    lenient::{admin_text, guarded, Lenient, ADMIN_ROUTES},
};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_forms_meet_their_route() {
    let upstream = Lenient::start().await;
    let proxy = guarded(
        upstream.addr,
        "  - { path: /, host: admin.example, chain: [deny_all], upstream: app }\n  - { path: /, host: bücher.example, chain: [deny_all], upstream: app }\n  - { path: /, upstream: app }\n",
    );
    let hosts = [
        ("admin.example", 403),
        ("ADMIN.Example", 403),
        ("admin.example.", 403),
        ("admin.example:80", 403),
        ("Admin.Example.:8080", 403),
        ("xn--bcher-kva.example", 403),
        ("XN--BCHER-KVA.EXAMPLE.", 403),
        ("bücher.example", 403),
        ("other.example", 200),
        ("admin.example..", 400),
        (".admin.example", 400),
        ("user@admin.example", 400),
        ("admin.example:http", 400),
        ("admin.example:80:80", 400),
        ("admin example", 400),
        ("[::1", 400),
        // UTS 46 maps `˜` to a space: no host name (found by fuzzing).
        ("a\u{2dc}b.example", 400),
    ];
    for (host, status) in hosts {
        let before = upstream.count();
        let mut conn = proxy.conn().await;
        conn.send(format!("GET /x HTTP/1.1\r\nHost: {host}\r\n\r\n"))
            .await;
        let response = conn.read_response(false).await;
        assert_eq!(response.status, status, "Host: {host}");
        assert_eq!(
            upstream.count(),
            before + usize::from(status == 200),
            "Host: {host}"
        );
    }
    // The upstream receives the normal Host (default port dropped).
    let mut conn = proxy.conn().await;
    conn.send("GET /x HTTP/1.1\r\nHost: Other.Example.:80\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 200);
    assert_eq!(upstream.last().host, "other.example");

    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    for (authority, status) in [
        ("admin.example.", 403),
        ("ADMIN.EXAMPLE:80", 403),
        ("xn--bcher-kva.example", 403),
        ("other.example", 200),
    ] {
        let request = http::Request::get(format!("http://{authority}/x"))
            .body(())
            .unwrap();
        let (response, _, _) = h2_exchange(&sender, request, b"").await;
        assert_eq!(
            response.status().as_u16(),
            status,
            "HTTP/2 :authority {authority}"
        );
    }
    // Without `:authority` the `host` field names the host, as over
    // HTTP/1.1: the same forms meet the same routes, and one that is not
    // text, or is missing or doubled, is refused rather than routed
    // without a host (which would skip the host's routes and reach the
    // upstream with no Host).
    // Beside `:authority` a host field must name the same host (in any
    // case), once: otherwise routing and the upstream could read two hosts.
    let host_fields: [(&str, &[&[u8]], u16); 12] = [
        ("/x", &[b"admin.example"], 403),
        ("/x", &[b"ADMIN.example.:80"], 403),
        ("/x", &["bücher.example".as_bytes()], 403),
        ("/x", &[b"b\xfccher.example"], 400),
        ("/x", &[b"admin.example\xff"], 400),
        ("/x", &[], 400),
        ("/x", &[b"other.example", b"admin.example"], 400),
        ("/x", &[b"other.example"], 200),
        ("http://other.example/x", &[b"other.example"], 200),
        ("http://other.example/x", &[b"OTHER.example"], 200),
        ("http://other.example/x", &[b"admin.example"], 400),
        (
            "http://other.example/x",
            &[b"other.example", b"other.example"],
            400,
        ),
    ];
    for (target, values, status) in host_fields {
        let before = upstream.count();
        let mut request = http::Request::get(target).body(()).unwrap();
        for value in values {
            let value = http::HeaderValue::from_bytes(value).unwrap();
            request.headers_mut().append(http::header::HOST, value);
        }
        let (response, _, _) = h2_exchange(&sender, request, b"").await;
        let context = format!("HTTP/2 {target}, host {values:?}");
        assert_eq!(response.status().as_u16(), status, "{context}");
        assert_eq!(
            upstream.count(),
            before + usize::from(status == 200),
            "{context}"
        );
    }
    assert_eq!(upstream.last().host, "other.example");
    upstream.assert_admin_never_reached();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_form_authority_replaces_host_and_is_sent_in_origin_form() {
    let upstream = Lenient::start().await;
    let proxy = guarded(
        upstream.addr,
        "  - { path: /, host: admin.example, chain: [deny_all], upstream: app }\n  - { path: /, upstream: app }\n",
    );
    let mut conn = proxy.conn().await;
    conn.send("GET http://Admin.Example./x HTTP/1.1\r\nHost: other.example\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 403);
    let before = upstream.count();
    conn.send("GET http://App.Example:80/a//b/../c?q=1 HTTP/1.1\r\nHost: admin.example\r\n\r\n")
        .await;
    let response = conn.read_response(false).await;
    assert_eq!(response.status, 200);
    assert_eq!(upstream.count(), before + 1);
    let received = upstream.last();
    assert_eq!(
        (received.target.as_str(), received.host.as_str()),
        ("/a/c?q=1", "app.example")
    );
    conn.send("GET http:///x HTTP/1.1\r\nHost: t\r\n\r\n").await;
    assert_eq!(conn.read_response(false).await.status, 400);
}

/// CONNECT (authority-form) is refused with 400 and counted as
/// `target_form` over both protocols.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_is_refused_as_a_target_form() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    let mut conn = proxy.conn().await;
    conn.send("CONNECT t:443 HTTP/1.1\r\nHost: t:443\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 400);
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = http::Request::connect("t:443").body(()).unwrap();
    let (response, _, _) = h2_exchange(&sender, request, b"").await;
    assert_eq!(response.status(), 400);
    assert_eq!(upstream.count(), 0);
    let metrics = admin_text(&proxy, "/metrics").await;
    for line in [
        "sluice_requests_refused_total{reason=\"target_form\"} 2\n",
        "sluice_requests_refused_total{reason=\"malformed\"} 0\n",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
}
