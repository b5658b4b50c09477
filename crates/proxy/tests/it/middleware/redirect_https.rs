//! `redirect_https` through the proxy: one route on a plain listener and
//! a TLS one (h2, http1, h3). Plain HTTP/1.1 and h2c clients get the
//! redirect, with their host, path and query; TLS clients over HTTP/1.1,
//! HTTP/2 and HTTP/3 reach the upstream; a hostile Host is refused and
//! never written into `Location`.

use std::sync::Arc;

use http::Request;
use testkit::{RawConn, TestCerts};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::{
    h3_support,
    support::{h2_client, h2_exchange, Echo, Proxy},
};

/// Listener 0 plain, listener 1 TLS with h3; `/` through `to_https`
/// (port 8443, `status`) to the echo upstream.
fn proxy(certs: &TestCerts, echo: std::net::SocketAddr, status: u16) -> Proxy {
    Proxy::start_yaml(&format!(
        "workers: 1\n\
         listeners:\n\
         \x20 - address: 127.0.0.1:0\n\
         \x20 - address: 127.0.0.1:0\n\
         \x20   protocols: [h2, http1, h3]\n\
         \x20   tls: {{ cert: \"{}\", key: \"{}\" }}\n\
         upstreams:\n  echo: {{ hosts: [\"http://{echo}\"] }}\n\
         middleware:\n  to_https: {{ redirect_https: {{ port: 8443, status: {status} }} }}\n\
         routes:\n  - {{ path: /, chain: [to_https], upstream: echo }}\n",
        certs.cert_path.display(),
        certs.key_path.display(),
    ))
}

/// A TLS connection to `addr` offering `alpn`, trusting the test CA.
async fn tls(
    addr: std::net::SocketAddr,
    certs: &TestCerts,
    alpn: &[&[u8]],
) -> tls::tokio_rustls::client::TlsStream<TcpStream> {
    let config = tls::client_config(tls::Trust::CaFile(&certs.ca_path), None, alpn).unwrap();
    let connector = tls::tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = tls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    connector.connect(name, tcp).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_is_redirected_and_tls_goes_through_for_every_protocol() {
    let certs = TestCerts::generate();
    let echo = Echo::start("echo").await;
    let proxy = proxy(&certs, echo.addr, 308);
    let (plain, secure) = (proxy.listener(0), proxy.listener(1));

    // HTTP/1.1 in the clear: a GET and a POST (308: resent as it was).
    let mut conn = RawConn::connect(plain).await;
    for request in [
        &b"GET /pets/1?x=1&y HTTP/1.1\r\nHost: Svc.Test:8080\r\n\r\n"[..],
        b"POST /pets/1?x=1&y HTTP/1.1\r\nHost: svc.test\r\nContent-Length: 5\r\n\r\nhello",
    ] {
        conn.send(request).await;
        let answer = conn.read_response(false).await;
        assert_eq!(answer.status, 308, "{}", answer.text());
        assert_eq!(
            answer.header("location"),
            Some("https://svc.test:8443/pets/1?x=1&y")
        );
        assert!(answer.body.is_empty(), "{}", answer.text());
    }

    // HTTP/2 in the clear (h2c).
    let h2c = h2_client(TcpStream::connect(plain).await.unwrap()).await;
    let request = Request::get("http://svc.test/pets?q=2").body(()).unwrap();
    let (response, body, _) = h2_exchange(&h2c, request, b"").await;
    assert_eq!(response.status(), 308);
    assert_eq!(
        response.headers()["location"],
        "https://svc.test:8443/pets?q=2"
    );
    assert!(body.is_empty());

    // Over TLS: HTTP/1.1 and HTTP/2 (ALPN) and HTTP/3 reach the upstream.
    let mut http11 = tls(secure, &certs, &[b"http/1.1"]).await;
    http11
        .write_all(b"GET /pets HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    http11.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("GET /pets"),
        "the upstream answered: {answer}"
    );

    let h2 = h2_client(tls(secure, &certs, &[b"h2"]).await).await;
    let request = Request::get("https://localhost/pets").body(()).unwrap();
    let (response, body, _) = h2_exchange(&h2, request, b"").await;
    assert_eq!(response.status(), 200, "{}", String::from_utf8_lossy(&body));
    assert!(!response.headers().contains_key("location"));

    let mut h3 = h3_support::Client::connect(secure, &certs).await;
    let (response, body) = h3.get("/pets").await;
    assert_eq!(response.status(), 200, "{body}");
    assert!(body.contains("GET /pets"), "the upstream answered: {body}");
}

/// A Host the redirect cannot name is 400 with a problem, over HTTP/1.1
/// and h2c; nothing of it is sent back in a `Location`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_is_no_host_is_refused_not_echoed() {
    let certs = TestCerts::generate();
    let echo = Echo::start("echo").await;
    let proxy = proxy(&certs, echo.addr, 301);
    let plain = proxy.listener(0);
    for host in ["evil.test@good.test", "good.test/evil", "a b"] {
        let mut conn = RawConn::connect(plain).await;
        conn.send(format!("GET /x HTTP/1.1\r\nHost: {host}\r\n\r\n"))
            .await;
        let answer = conn.read_response(false).await;
        assert_eq!(answer.status, 400, "{host}: {}", answer.text());
        assert_eq!(answer.header("location"), None, "{host}");
        assert!(!answer.text().contains("evil"), "{}", answer.text());
    }
    let h2c = h2_client(TcpStream::connect(plain).await.unwrap()).await;
    let request = Request::get("http://user@evil.test/x").body(()).unwrap();
    let (response, body, _) = h2_exchange(&h2c, request, b"").await;
    assert_eq!(response.status(), 400, "{}", String::from_utf8_lossy(&body));
    assert!(!response.headers().contains_key("location"));
    // A good Host on the same proxy: the configured status.
    let mut conn = RawConn::connect(plain).await;
    conn.send(&b"GET /x HTTP/1.1\r\nHost: good.test\r\n\r\n"[..])
        .await;
    let answer = conn.read_response(false).await;
    assert_eq!(answer.status, 301);
    assert_eq!(answer.header("location"), Some("https://good.test:8443/x"));
}
