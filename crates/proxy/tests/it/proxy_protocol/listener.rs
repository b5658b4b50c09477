//! `listeners[].proxy_protocol`: a trusted balancer's header names the
//! client for everything that looks at the client (ip_filter, rate limit
//! keys, X-Forwarded-For, the access log), its TLVs reach the upstream in
//! the configured headers; a header from anyone else, a truncated one,
//! one with bad lengths, and a trusted connection without one are closed
//! before any byte reaches an upstream.

use std::{net::SocketAddr, sync::atomic::Ordering};

use proxy::wire::proxy_protocol::{write_v1, write_v2};
use testkit::TestCerts;
use tokio::io::AsyncWriteExt;

use super::{connect_from, guard_event, read_to_close, request_after, status, upstream_saw};
use crate::support::{self, Echo, Proxy};

const TRUSTED: &str = "127.0.0.1";
const STRANGER: &str = "127.0.0.2";

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

/// A proxy whose listener takes PROXY headers from 127.0.0.1 (`listener`:
/// more keys of the listener, after `proxy_protocol`'s own), with
/// `middleware` and a catch-all route through `chain` to `echo`.
fn proxy(echo: SocketAddr, listener: &str, proxy_protocol: &str, rest: &str) -> Proxy {
    Proxy::start_yaml(&format!(
        "workers: 1\nlisteners:\n  - address: 127.0.0.1:0\n    proxy_protocol: {{ version: any, trusted: [127.0.0.1/32]{proxy_protocol} }}\n{listener}admin: {{ address: 127.0.0.1:0, hosts: [test] }}\nupstreams:\n  echo:\n    hosts: [\"http://{echo}\"]\n{rest}"
    ))
}

fn v1(client: &str) -> Vec<u8> {
    let mut header = Vec::new();
    write_v1(&mut header, Some((addr(client), addr("198.51.100.1:443"))));
    header
}

fn v2(client: &str, tlvs: &[(u8, &[u8])]) -> Vec<u8> {
    let mut header = Vec::new();
    write_v2(
        &mut header,
        Some((addr(client), addr("198.51.100.1:443"))),
        tlvs,
    );
    header
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_names_the_client_for_every_handler_and_the_log() {
    let echo = Echo::start("e").await;
    let log = std::env::temp_dir().join(format!("sluice-pp-access-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let rest = format!(
        "middleware:\n  access_log: {{ path: \"{}\" }}\n  deny: {{ ip_filter: {{ deny: [192.0.2.66/32] }} }}\n  limit: {{ rate_limit: {{ key: client_ip, rate: 1/m, burst: 1 }} }}\nroutes:\n  - {{ path: /, chain: [access_log, deny, limit], upstream: echo }}\n",
        log.display()
    );
    let proxy = proxy(echo.addr, "", "", &rest);
    let at = proxy.addr();
    let ask = |header: Vec<u8>| async move {
        let mut stream = connect_from(TRUSTED, at).await;
        request_after(&mut stream, &header, "/pets", "").await
    };
    let first = ask(v1("192.0.2.7:5000")).await;
    assert_eq!(status(&first), 200, "{first}");
    assert_eq!(
        upstream_saw(&first, "x-forwarded-for").as_deref(),
        Some("192.0.2.7")
    );
    // The rate limit's key is the header's client: a second request from
    // it is refused, one from another client is not.
    let again = ask(v1("192.0.2.7:5001")).await;
    assert_eq!(status(&again), 429, "{again}");
    let other = ask(v2("192.0.2.8:5000", &[])).await;
    assert_eq!(status(&other), 200, "{other}");
    assert_eq!(
        upstream_saw(&other, "x-forwarded-for").as_deref(),
        Some("192.0.2.8")
    );
    // ip_filter judges the header's client.
    let denied = ask(v1("192.0.2.66:5000")).await;
    assert_eq!(status(&denied), 403, "{denied}");
    assert_eq!(echo.requests.load(Ordering::SeqCst), 2);

    let lines = support::access_log_lines(&log, 4).await;
    let text = format!("{lines:?}");
    let clients: Vec<&str> = lines
        .iter()
        .map(|l| l["client"].as_str().unwrap())
        .collect();
    assert_eq!(
        clients,
        ["192.0.2.7", "192.0.2.7", "192.0.2.8", "192.0.2.66"],
        "{text}"
    );
    let via = lines[0]["proxy"]["via"].as_str().unwrap();
    assert!(via.starts_with("127.0.0.1:"), "{text}");
    assert_eq!(lines[0]["proxy"]["version"], 1);
    assert_eq!(lines[2]["proxy"]["version"], 2);
    let _ = std::fs::remove_file(&log);
}

/// A version 2 header with the TLVs a TLS-ending balancer sends.
fn tls_balancer_header(client: &str, cn: &[u8]) -> Vec<u8> {
    let ssl = [
        &[0x07u8, 0, 0, 0, 0][..],
        &[0x21, 0, 7],
        b"TLSv1.3",
        &[0x22, 0, u8::try_from(cn.len()).unwrap()],
        cn,
    ]
    .concat();
    v2(
        client,
        &[
            (0x01, b"h2"),
            (0x02, b"api.example"),
            (0x20, &ssl),
            (0x05, b"lb-42"),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tlvs_go_upstream_in_their_headers_and_a_client_cannot_forge_them() {
    let echo = Echo::start("e").await;
    let headers = ", headers: { authority: x-proxy-authority, tls_client_cn: x-client-cn, tls_client_verified: x-client-verified, unique_id: x-lb-id, alpn: x-proxy-alpn }";
    let proxy = proxy(
        echo.addr,
        "",
        headers,
        "routes:\n  - { path: /, upstream: echo }\n",
    );
    // h2c (prior knowledge) after the header: its own connection task.
    let mut stream = connect_from(TRUSTED, proxy.addr()).await;
    stream
        .write_all(&tls_balancer_header("192.0.2.9:6000", b"alice"))
        .await
        .unwrap();
    let sender = support::h2_client(stream).await;
    let request = http::Request::builder()
        .uri(format!("http://{}/pets", proxy.addr()))
        .header("x-client-cn", "mallory")
        .header("x-lb-id", "forged")
        .body(())
        .unwrap();
    let (response, body, _) = support::h2_exchange(&sender, request, b"").await;
    assert_eq!(response.status(), 200);
    let body = String::from_utf8(body).unwrap();
    let saw = |name: &str| -> Vec<&str> {
        body.lines()
            .filter_map(|l| l.split_once(':'))
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
            .collect()
    };
    assert_eq!(saw("x-client-cn"), ["alice"], "{body}");
    assert_eq!(saw("x-lb-id"), ["lb-42"], "{body}");
    assert_eq!(saw("x-proxy-authority"), ["api.example"], "{body}");
    assert_eq!(saw("x-proxy-alpn"), ["h2"], "{body}");
    assert_eq!(saw("x-client-verified"), ["true"], "{body}");
    assert_eq!(saw("x-forwarded-for"), ["192.0.2.9"], "{body}");
    // The balancer ended the client's TLS.
    assert_eq!(saw("x-forwarded-proto"), ["https"], "{body}");

    // A client that connects directly cannot pass its own.
    let mut direct = connect_from(STRANGER, proxy.addr()).await;
    let answer = request_after(&mut direct, b"", "/pets", "x-client-cn: mallory\r\n").await;
    assert_eq!(status(&answer), 200, "{answer}");
    assert_eq!(upstream_saw(&answer, "x-client-cn"), None, "{answer}");
    assert_eq!(
        upstream_saw(&answer, "x-forwarded-for").as_deref(),
        Some(STRANGER)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_from_strangers_and_broken_headers_never_reach_an_upstream() {
    let echo = Echo::start("e").await;
    let proxy = proxy(
        echo.addr,
        "limits: { header_read_timeout: 1s }\n",
        "",
        "routes:\n  - { path: /, upstream: echo }\n",
    );
    let at = proxy.addr();
    // A stranger's header: closed without a byte.
    for header in [v1("192.0.2.7:5000"), v2("192.0.2.7:5000", &[])] {
        let mut stream = connect_from(STRANGER, at).await;
        let answer = request_after(&mut stream, &header, "/pets", "").await;
        assert_eq!(answer, "", "a stranger's header was served");
    }
    // A stranger without one is served, as itself.
    let mut stream = connect_from(STRANGER, at).await;
    let answer = request_after(&mut stream, b"", "/pets", "").await;
    assert_eq!(
        upstream_saw(&answer, "x-forwarded-for").as_deref(),
        Some(STRANGER)
    );
    assert_eq!(echo.requests.load(Ordering::SeqCst), 1);

    // The balancer's connection without a header.
    let mut stream = connect_from(TRUSTED, at).await;
    assert_eq!(request_after(&mut stream, b"", "/pets", "").await, "");
    // A version 2 header whose address block is too short for IPv4, and
    // one whose TLV runs past its end.
    let mut short = proxy::wire::proxy_protocol::V2_SIGNATURE.to_vec();
    short.extend_from_slice(&[0x21, 0x11, 0, 8, 192, 0, 2, 7, 198, 51, 100, 1]);
    let mut overrun = v2("192.0.2.7:5000", &[(0x02, b"api.example")]);
    let len = overrun.len();
    overrun[len - 13] = 0xff;
    // A malformed version 1 line.
    let bad_line = b"PROXY TCP4 192.0.2.7 198.51.100.1 99999 443\r\n".to_vec();
    for header in [short, overrun, bad_line] {
        let mut stream = connect_from(TRUSTED, at).await;
        assert_eq!(request_after(&mut stream, &header, "/pets", "").await, "");
    }
    // Truncated: the connection ends mid-header; or goes silent past
    // `limits.header_read_timeout`.
    let mut stream = connect_from(TRUSTED, at).await;
    stream
        .write_all(b"PROXY TCP4 192.0.2.7 198.51")
        .await
        .unwrap();
    stream.shutdown().await.unwrap();
    assert_eq!(read_to_close(&mut stream).await, "");
    let mut stream = connect_from(TRUSTED, at).await;
    let whole = v2("192.0.2.7:5000", &[]);
    stream.write_all(&whole[..20]).await.unwrap();
    assert_eq!(read_to_close(&mut stream).await, "");

    assert_eq!(echo.requests.load(Ordering::SeqCst), 1);
    let admin = proxy.admin();
    assert_eq!(guard_event(admin, "proxy_header_untrusted").await, 2);
    assert_eq!(guard_event(admin, "proxy_header_missing").await, 1);
    assert_eq!(guard_event(admin, "proxy_header_invalid").await, 3);
    assert_eq!(guard_event(admin, "proxy_header_incomplete").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_comes_before_the_tls_handshake() {
    let certs = TestCerts::generate();
    let echo = Echo::start("e").await;
    let tls = format!(
        "    tls: {{ cert: \"{}\", key: \"{}\" }}\n",
        certs.cert_path.display(),
        certs.key_path.display()
    );
    let proxy = proxy(
        echo.addr,
        &tls,
        "",
        "routes:\n  - { path: /, upstream: echo }\n",
    );
    let connector = certs.connector(&[b"http/1.1"]);
    let name = tls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tcp = connect_from(TRUSTED, proxy.addr()).await;
    tcp.write_all(&v2("192.0.2.10:7000", &[])).await.unwrap();
    let mut stream = connector.connect(name.clone(), tcp).await.unwrap();
    let answer = request_after(&mut stream, b"", "/pets", "").await;
    assert_eq!(status(&answer), 200, "{answer}");
    assert_eq!(
        upstream_saw(&answer, "x-forwarded-for").as_deref(),
        Some("192.0.2.10")
    );
    assert_eq!(
        upstream_saw(&answer, "x-forwarded-proto").as_deref(),
        Some("https")
    );
    // A stranger's TLS without a header is served as itself; the
    // balancer's without one is refused before its handshake.
    let tcp = connect_from(STRANGER, proxy.addr()).await;
    let mut stream = connector.connect(name.clone(), tcp).await.unwrap();
    let answer = request_after(&mut stream, b"", "/pets", "").await;
    assert_eq!(
        upstream_saw(&answer, "x-forwarded-for").as_deref(),
        Some(STRANGER)
    );
    let tcp = connect_from(TRUSTED, proxy.addr()).await;
    assert!(connector.connect(name, tcp).await.is_err());
    assert_eq!(echo.requests.load(Ordering::SeqCst), 2);
}
