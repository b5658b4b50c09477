//! HTTP/3 clients (docs/LIFECYCLE-h3.md): a Rust HTTP/3 client (`h3` and
//! `h3-quinn`, trusting the test CA) gets the answers an HTTP/1.1 client
//! gets, through the same routes, chain and upstreams; the listener's
//! limits and its address validation hold.

use crate::h3_support;
use crate::support;

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use bytes::Bytes;
use h3_support::{proxy, raw, raw::RawH3, Client};
use http::{Request, Response, StatusCode};
use support::{live::admin_get, Echo};
use testkit::TestCerts;
use tokio::net::TcpListener;

/// An h2c upstream answering `method path body-bytes` and counting streams.
async fn h2c_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(stream).await else {
                    return;
                };
                while let Some(Ok((request, mut respond))) = conn.accept().await {
                    tokio::spawn(async move {
                        let (parts, mut body) = request.into_parts();
                        let mut len = 0;
                        while let Some(Ok(data)) = body.data().await {
                            len += data.len();
                            let _ = body.flow_control().release_capacity(data.len());
                        }
                        let text = format!(
                            "h2c {} {} body-bytes: {len}",
                            parts.method,
                            parts.uri.path()
                        );
                        let response = Response::builder().status(200).body(()).unwrap();
                        if let Ok(mut send) = respond.send_response(response, false) {
                            let _ = send.send_data(Bytes::from(text), true);
                        }
                    });
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_get_and_post_reach_an_http11_upstream_as_http11_clients_do() {
    let certs = TestCerts::generate();
    let echo = Echo::start("e").await;
    let proxy = proxy(&certs, "", &support::one_upstream(echo.addr, ""));
    let mut client = Client::connect(proxy.addr(), &certs).await;

    let (response, body) = client.get("/pets?x=1").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(body.contains("GET /pets?x=1 HTTP/1.1"), "{body}");
    assert!(body.contains("x-forwarded-proto: https"), "{body}");
    assert!(body.contains("body-bytes: 0"), "{body}");
    // A GET's empty body stays empty upstream: no chunked framing.
    assert!(!body.to_lowercase().contains("transfer-encoding"), "{body}");
    assert_eq!(response.headers()["x-upstream-hop"], "1");

    let post = Request::post("https://localhost/pets")
        .header("content-length", "11")
        .body(())
        .unwrap();
    let (response, body) = client.exchange(post, b"hello world").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(body.contains("POST /pets HTTP/1.1"), "{body}");
    assert!(body.contains("body-bytes: 11"), "{body}");

    // A large body without a length streams (chunked upstream).
    let big = vec![b'a'; 300 * 1024];
    let post = Request::post("https://localhost/big").body(()).unwrap();
    let (response, body) = client.exchange(post, &big).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        body.contains(&format!("body-bytes: {}", big.len())),
        "{body}"
    );
    assert_eq!(echo.requests.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_post_reaches_an_h2c_upstream() {
    let certs = TestCerts::generate();
    let upstream = h2c_upstream().await;
    let routes = format!(
        "upstreams:\n  grpc:\n    hosts: [\"http://{upstream}\"]\n    protocol: h2c\nroutes:\n  - {{ path: /, upstream: grpc }}\n"
    );
    let proxy = proxy(&certs, "", &routes);
    let mut client = Client::connect(proxy.addr(), &certs).await;
    let post = Request::post("https://localhost/svc/Call")
        .body(())
        .unwrap();
    let (response, body) = client.exchange(post, b"ping").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body, "h2c POST /svc/Call body-bytes: 4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_gets_the_proxys_own_answers_404_and_502_as_problem_json() {
    let certs = TestCerts::generate();
    // Nothing listens at the upstream's address.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let down = closed.local_addr().unwrap();
    drop(closed);
    let routes = format!(
        "upstreams:\n  down:\n    hosts: [\"http://{down}\"]\n    retries: 0\nroutes:\n  - {{ path: /api, upstream: down }}\n"
    );
    let proxy = proxy(&certs, "", &routes);
    let mut client = Client::connect(proxy.addr(), &certs).await;

    let (response, body) = client.get("/nowhere").await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    assert!(body.contains("\"status\":404"), "{body}");

    let (response, body) = client.get("/api/x").await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    assert!(body.contains("\"status\":502"), "{body}");
    assert!(
        !body.contains(&down.to_string()),
        "no internal host: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tcp_listener_advertises_h3_by_alt_svc() {
    let certs = TestCerts::generate();
    let echo = Echo::start("e").await;
    let proxy = proxy(&certs, "", &support::one_upstream(echo.addr, ""));
    let addr = proxy.addr();
    let tls = tls::client_config(tls::Trust::CaFile(&certs.ca_path), None, &[b"http/1.1"]).unwrap();
    let connector = tls::tokio_rustls::TlsConnector::from(Arc::new(tls));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = tls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut stream = connector.connect(name, tcp).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\nGET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer).to_lowercase();
    assert!(answer.starts_with("http/1.1 200"), "{answer}");
    let expected = format!("alt-svc: h3=\":{}\"; ma=86400", addr.port());
    // Once per answer, on each answer of a keep-alive connection.
    assert_eq!(answer.matches(&expected).count(), 2, "{answer}");
    assert_eq!(answer.matches("alt-svc").count(), 2, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_field_section_limit_is_advertised_and_the_connection_serves_on() {
    let certs = TestCerts::generate();
    let echo = Echo::start("e").await;
    let proxy = proxy(
        &certs,
        "    h3: { max_field_section_size: 4KiB }\n",
        &support::one_upstream(echo.addr, ""),
    );
    let mut client = Client::connect(proxy.addr(), &certs).await;
    let request = Request::get("https://localhost/")
        .header("x-big", "b".repeat(8 * 1024))
        .body(())
        .unwrap();
    // The proxy advertises its limit (SETTINGS_MAX_FIELD_SECTION_SIZE):
    // a client that has its SETTINGS does not even send the request; one
    // that sends it (SETTINGS not in yet, or ignored) gets 431. The proxy
    // answers as soon as it has the head and stops reading the request
    // (STOP_SENDING): on a loaded machine that can come before the
    // client's end of stream, whose send then fails; the 431 is there.
    let sent = async {
        let mut stream = client.send.send_request(request).await?;
        let _ = stream.finish().await;
        stream.recv_response().await
    };
    match sent.await {
        Err(err) => assert!(err.to_string().contains("4096"), "{err}"),
        Ok(response) => assert_eq!(
            response.status(),
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        ),
    }
    assert_eq!(echo.requests.load(Ordering::SeqCst), 0);
    let (response, _) = client.get("/").await;
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_streams_than_max_concurrent_streams_wait_for_credit() {
    let certs = TestCerts::generate();
    // An upstream that holds each request until another one is there too
    // (or all have come: the last may be alone), then 50 ms more, in
    // which more would arrive if more streams than 2 were open at once.
    const REQUESTS: usize = 8;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    let open = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let arrived = Arc::new(AtomicUsize::new(0));
    let counters = (Arc::clone(&open), Arc::clone(&most), Arc::clone(&arrived));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (open, most, arrived) = (
                Arc::clone(&counters.0),
                Arc::clone(&counters.1),
                Arc::clone(&counters.2),
            );
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    arrived.fetch_add(1, Ordering::SeqCst);
                    testkit::until(Duration::from_secs(10), || async {
                        open.load(Ordering::SeqCst) >= 2
                            || arrived.load(Ordering::SeqCst) == REQUESTS
                    })
                    .await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    open.fetch_sub(1, Ordering::SeqCst);
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if stream.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let proxy = proxy(
        &certs,
        "    h3: { max_concurrent_streams: 2 }\n",
        &support::one_upstream(upstream, ""),
    );
    let client = Client::connect(proxy.addr(), &certs).await;
    let mut tasks = Vec::new();
    for _ in 0..REQUESTS {
        let mut send = client.send.clone();
        tasks.push(tokio::spawn(async move {
            let request = Request::get("https://localhost/").body(()).unwrap();
            let mut stream = send.send_request(request).await.unwrap();
            stream.finish().await.unwrap();
            let status = stream.recv_response().await.unwrap().status();
            while stream.recv_data().await.unwrap().is_some() {}
            status
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), StatusCode::OK);
    }
    // max_concurrent_streams 2, and the upstream holds each request
    // until a second is there: exactly 2 at once.
    assert_eq!(arrived.load(Ordering::SeqCst), REQUESTS);
    assert_eq!(most.load(Ordering::SeqCst), 2, "requests upstream at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routes_chain_applies_to_h3_requests() {
    let certs = TestCerts::generate();
    let echo = Echo::start("e").await;
    let rest = format!(
        "middleware:\n  edit:\n    headers:\n      request: {{ set: {{ x-env: prod }} }}\n      response: {{ set: {{ x-served-by: sluice }}, remove: [x-upstream-hop] }}\n  small: {{ body_limit: {{ max: 1KiB }} }}\nupstreams:\n  echo:\n    hosts: [\"http://{}\"]\nroutes:\n  - {{ path: /small, chain: [small], upstream: echo }}\n  - {{ path: /, chain: [edit], upstream: echo }}\n",
        echo.addr
    );
    let proxy = proxy(&certs, "", &rest);
    let mut client = Client::connect(proxy.addr(), &certs).await;
    let request = Request::get("https://localhost/")
        .header("x-env", "dev")
        .body(())
        .unwrap();
    let (response, body) = client.exchange(request, b"").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        body.contains("x-env: prod") && !body.contains("dev"),
        "{body}"
    );
    assert_eq!(response.headers()["x-served-by"], "sluice");
    assert!(response.headers().get("x-upstream-hop").is_none());

    let post = Request::post("https://localhost/small")
        .header("content-length", "2048")
        .body(())
        .unwrap();
    let (response, body) = client.exchange(post, &[b'a'; 2048]).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(body.contains("\"status\":413"), "{body}");
}

/// A request may name its host by a `host` field instead of
/// `:authority` (RFC 9114 4.3.1): it is routed by that host, and the
/// HTTP/1.1 upstream gets it as its Host. Two host fields, or a host field
/// naming another host than `:authority`, are refused with 400 as over
/// HTTP/1.1 and HTTP/2: neither reaches an upstream. (Written frame by
/// frame: the `h3` client leaves `:scheme` out of a request without an
/// authority, which RFC 9114 4.3.1 makes malformed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_field_without_authority_routes_and_reaches_the_upstream() {
    let certs = TestCerts::generate();
    let named = Echo::start("named").await;
    let other = Echo::start("other").await;
    let routes = format!(
        "upstreams:\n  named: {{ hosts: [\"http://{}\"] }}\n  other: {{ hosts: [\"http://{}\"] }}\nroutes:\n  - {{ host: api.example, path: /, upstream: named }}\n  - {{ path: /, upstream: other }}\n",
        named.addr, other.addr
    );
    let proxy = proxy(&certs, "", &routes);
    let client = RawH3::connect(proxy.addr(), &certs).await;
    let get = [(":method", "GET"), (":scheme", "https"), (":path", "/who")];
    let with_host = [&get[..], &[("host", "api.example")]].concat();
    let (_send, mut recv) = client.request(&raw::headers(&with_host), true).await;
    let answer = raw::answer(&mut recv, Duration::from_secs(10)).await;
    let body = answer.body();
    assert_eq!(answer.status(), Some(200), "{body}");
    assert!(body.contains("GET /who HTTP/1.1"), "{body}");
    assert!(body.contains("host: api.example"), "{body}");
    assert_eq!(named.requests.load(Ordering::SeqCst), 1);
    assert_eq!(other.requests.load(Ordering::SeqCst), 0);

    let two_hosts = [&with_host[..], &[("host", "other.example")]].concat();
    let with_authority = [
        &get[..],
        &[
            (":authority", "api.example"),
            ("host", "api.example"),
            ("host", "other.example"),
        ],
    ]
    .concat();
    let mismatch = [
        &get[..],
        &[(":authority", "api.example"), ("host", "other.example")],
    ]
    .concat();
    for fields in [two_hosts, with_authority, mismatch] {
        let (_send, mut recv) = client.request(&raw::headers(&fields), true).await;
        let answer = raw::answer(&mut recv, Duration::from_secs(10)).await;
        assert_eq!(answer.status(), Some(400), "{fields:?}: {answer:?}");
    }
    assert_eq!(named.requests.load(Ordering::SeqCst), 1);
    assert_eq!(other.requests.load(Ordering::SeqCst), 0);
}

/// HTTP/3 traffic has its own counters: connections whose HTTP/3 setup
/// completed and request streams, not counted again as HTTP/2 streams
/// (they reach the HTTP/2 codec through an in-process connection), and a
/// QUIC handshake the client gives up on (it does not trust the
/// certificate) is a failed TLS handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_connections_and_streams_are_counted_as_http3() {
    let certs = TestCerts::generate();
    let echo = Echo::start("e").await;
    let proxy = proxy(&certs, "", &support::one_upstream(echo.addr, ""));
    let mut client = Client::connect(proxy.addr(), &certs).await;
    for _ in 0..3 {
        assert_eq!(client.get("/x").await.0.status(), StatusCode::OK);
    }

    let stranger = h3_support::endpoint(&TestCerts::generate());
    let refused = stranger.connect(proxy.addr(), "localhost").unwrap().await;
    assert!(refused.is_err(), "a client without the CA connected");

    let metrics = || async { admin_get(proxy.admin(), "/metrics").await.text() };
    let failed = "sluice_tls_handshake_failures_total 1\n";
    let counted = testkit::until(Duration::from_secs(10), || async {
        metrics().await.contains(failed)
    })
    .await;
    let text = metrics().await;
    assert!(counted, "no {failed:?} in\n{text}");
    for series in [
        "sluice_h3_connections_total 1\n",
        "sluice_h3_streams_total 3\n",
        "sluice_h2_streams_total 0\n",
    ] {
        assert!(text.contains(series), "no {series:?} in\n{text}");
    }
    let stats = admin_get(proxy.admin(), "/stats.json").await.json();
    assert_eq!(stats["connections"]["h3_streams"], 3, "{stats}");
    assert_eq!(stats["connections"]["h3_connections"], 1, "{stats}");
    assert_eq!(stats["connections"]["h2_streams"], 0, "{stats}");
}
