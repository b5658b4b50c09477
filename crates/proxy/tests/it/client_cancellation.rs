//! A client that goes away, resets or stops reading takes its upstream
//! work with it (issue 26): a reset HTTP/2 stream cancels its upstream
//! exchange on both upstream protocols, many such resets get GOAWAY, an
//! HTTP/1.1 client closing mid-request closes the upstream connection, a
//! client that stops reading is dropped after `limits.send_timeout`, and
//! padded HTTP/2 field values are refused.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, StatusCode};
use support::{
    h2_client, h2_exchange,
    h2raw::{frame, goaway_code},
    live::until,
    Proxy,
};
use testkit::{H2Server, HostileUpstream, RawConn, Step};
use tokio::{io::AsyncWriteExt, net::TcpStream};

/// An HTTP/1.1 upstream that answers after 10 s, or, for `/big`, at once
/// with 8 MiB.
fn slow_upstream() -> HostileUpstream {
    HostileUpstream::start(|request| {
        if request.starts_with(b"GET /big ") {
            let mut answer = b"HTTP/1.1 200 OK\r\nContent-Length: 8388608\r\n\r\n".to_vec();
            answer.resize(answer.len() + 8 * 1024 * 1024, b'x');
            return vec![Step::Write(answer)];
        }
        vec![
            Step::Wait(Duration::from_secs(10)),
            Step::Write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow".to_vec()),
        ]
    })
}

fn route_to(url: &str, protocol: &str, settings: &str) -> String {
    format!("{settings}upstreams:\n  up:\n    hosts: [\"{url}\"]\n    protocol: {protocol}\nroutes:\n  - {{ path: /, upstream: up }}\n")
}

/// A HEADERS block for GET `path` at authority `test` (literal fields
/// with indexed names, no Huffman).
fn get_block(path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x04, path.len() as u8];
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, 4]);
    block.extend_from_slice(b"test");
    block
}

/// Opens `streams` streams on a raw HTTP/2 connection, each reset
/// (CANCEL) once the upstream has its request (`arrived` counts them
/// there); the connection.
async fn open_and_reset(
    proxy: &Proxy,
    path: &str,
    streams: u32,
    arrived: impl Fn() -> u64,
) -> TcpStream {
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    preface.extend(frame(0x4, 0, 0, &[]));
    stream.write_all(&preface).await.unwrap();
    for i in 0..streams {
        let id = 2 * i + 1;
        let headers = frame(0x1, 0x4 | 0x1, id, &get_block(path));
        if stream.write_all(&headers).await.is_err() {
            break;
        }
        let reached = until(Duration::from_secs(5), || async {
            arrived() > u64::from(i)
        })
        .await;
        assert!(reached, "request {i} never reached the upstream");
        if stream
            .write_all(&frame(0x3, 0, id, &8u32.to_be_bytes()))
            .await
            .is_err()
        {
            break;
        }
    }
    stream
}

/// Waits (3 s at most) for `sluice_guard_events_total{event="EVENT"}` to
/// reach `expected`, then asserts it is exactly that: a stream's task
/// counts its event just after dropping its upstream work, so the upstream
/// may see the close a moment before the count moves.
async fn assert_events(proxy: &Proxy, event: &str, expected: u64) {
    until(Duration::from_secs(3), || async {
        guard_events(proxy, event).await >= expected
    })
    .await;
    assert_eq!(guard_events(proxy, event).await, expected, "{event}");
}

/// The value of `sluice_guard_events_total{event="EVENT"}`.
async fn guard_events(proxy: &Proxy, event: &str) -> u64 {
    let metrics = support::live::admin_get(proxy.admin(), "/metrics")
        .await
        .text();
    let line = format!("sluice_guard_events_total{{event=\"{event}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(line.as_str()))
        .unwrap_or_else(|| panic!("no {event} in\n{metrics}"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_stream_closes_its_http1_upstream_connection_at_once() {
    let upstream = slow_upstream();
    let proxy = Proxy::start(&route_to(&upstream.url(), "http1", ""));
    let arrived = || upstream.requests().len() as u64;
    let mut client = open_and_reset(&proxy, "/slow", 30, arrived).await;
    assert!(
        until(Duration::from_secs(3), || async {
            upstream.requests().len() == 30 && upstream.open_connections() == 0
        })
        .await,
        "{} requests, {} upstream connections still open",
        upstream.requests().len(),
        upstream.open_connections()
    );
    assert_events(&proxy, "h2_stream_reset", 30).await;
    assert_eq!(
        goaway_code(&mut client, Duration::from_secs(1)).await,
        None,
        "30 is under the limit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_stream_resets_its_http2_upstream_stream() {
    let upstream = H2Server::start();
    let proxy = Proxy::start(&route_to(&upstream.url(""), "h2c", ""));
    let _client = open_and_reset(&proxy, "/delay/10000", 30, || upstream.requests()).await;
    assert!(
        until(Duration::from_secs(3), || async {
            upstream.requests() == 30 && upstream.in_flight() == 0
        })
        .await,
        "{} requests, {} still in flight upstream",
        upstream.requests(),
        upstream.in_flight()
    );
    assert_eq!(upstream.cancelled(), 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_premature_resets_get_goaway_enhance_your_calm() {
    let upstream = slow_upstream();
    let settings = "http2: { max_premature_resets: 10, premature_reset_window: 1m }\n";
    let proxy = Proxy::start(&route_to(&upstream.url(), "http1", settings));
    let arrived = || upstream.requests().len() as u64;
    let mut client = open_and_reset(&proxy, "/slow", 11, arrived).await;
    assert_eq!(
        goaway_code(&mut client, Duration::from_secs(1)).await,
        Some(0xb),
        "ENHANCE_YOUR_CALM"
    );
    assert_events(&proxy, "h2_reset_flood", 1).await;
    assert!(
        until(Duration::from_secs(3), || async {
            upstream.open_connections() == 0
        })
        .await,
        "upstream connections outlived the connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_client_that_closes_mid_request_closes_the_upstream_connection() {
    let upstream = slow_upstream();
    let proxy = Proxy::start(&route_to(&upstream.url(), "http1", ""));
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    client
        .write_all(b"GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    assert!(
        until(Duration::from_secs(3), || async {
            upstream.open_connections() == 1
        })
        .await,
        "the request never reached the upstream"
    );
    drop(client);
    assert!(
        until(Duration::from_secs(3), || async {
            upstream.open_connections() == 0
        })
        .await,
        "the upstream connection outlived its client"
    );
    assert_events(&proxy, "client_closed", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_client_that_stops_reading_is_dropped_after_the_send_timeout() {
    let upstream = slow_upstream();
    let settings = "limits: { send_timeout: 1s }\n";
    let proxy = Proxy::start(&route_to(&upstream.url(), "http1", settings));
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    client
        .write_all(b"GET /big HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    // The client reads nothing: the proxy's write stalls, then gives up.
    assert!(
        until(Duration::from_secs(10), || async {
            upstream.connections() == 1 && upstream.open_connections() == 0
        })
        .await,
        "the upstream connection is still held by a client that reads nothing"
    );
    assert_events(&proxy, "send_timeout", 1).await;
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_that_grants_no_window_loses_its_stream_after_the_send_timeout() {
    let upstream = slow_upstream();
    let settings = "limits: { send_timeout: 1s }\n";
    let proxy = Proxy::start(&route_to(&upstream.url(), "http1", settings));
    let io = TcpStream::connect(proxy.addr()).await.unwrap();
    let (sender, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, Bytes>(io)
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = Request::get("http://test/big").body(()).unwrap();
    let mut sender = sender.ready().await.unwrap();
    let (response, _) = sender.send_request(request, true).unwrap();
    let mut body = response.await.unwrap().into_body();
    let ended = tokio::time::timeout(Duration::from_secs(10), body.data()).await;
    let err = ended.unwrap().unwrap().unwrap_err();
    assert_eq!(err.reason(), Some(h2::Reason::CANCEL), "{err}");
    assert!(
        until(Duration::from_secs(3), || async {
            upstream.open_connections() == 0
        })
        .await,
        "the upstream connection outlived the stream"
    );
    assert_events(&proxy, "send_timeout", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_field_values_with_leading_or_trailing_whitespace_are_refused() {
    let upstream = HostileUpstream::start(|_| {
        vec![Step::Write(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
        )]
    });
    let proxy = Proxy::start(&route_to(&upstream.url(), "http1", ""));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    for value in [" a", "a ", "\ta"] {
        let request = Request::get("http://test/")
            .header("x-a", HeaderValue::from_str(value).unwrap())
            .body(())
            .unwrap();
        let (response, body, _) = h2_exchange(&sender, request, b"").await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{value:?}");
        assert!(String::from_utf8_lossy(&body).contains("malformed"));
    }
    assert!(
        upstream.requests().is_empty(),
        "a padded value was forwarded"
    );
    let request = Request::get("http://test/")
        .header("x-a", "a b")
        .body(())
        .unwrap();
    let (response, _, _) = h2_exchange(&sender, request, b"").await;
    assert_eq!(response.status(), StatusCode::OK);
    let raw = String::from_utf8(upstream.requests().pop().unwrap()).unwrap();
    assert!(raw.contains("x-a: a b\r\n"), "{raw}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_client_that_closes_mid_request_resets_the_http2_upstream_stream() {
    let upstream = H2Server::start();
    let proxy = Proxy::start(&route_to(&upstream.url(""), "h2c", ""));
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    client
        .write_all(b"GET /delay/10000 HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    assert!(
        until(Duration::from_secs(3), || async {
            upstream.in_flight() == 1
        })
        .await,
        "the request never reached the upstream"
    );
    drop(client);
    assert!(
        until(Duration::from_secs(3), || async {
            upstream.in_flight() == 0 && upstream.cancelled() == 1
        })
        .await,
        "the upstream stream outlived its client"
    );
    assert_events(&proxy, "client_closed", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_stop_reading_an_http2_upstream_answer_are_dropped_after_the_send_timeout() {
    let upstream = H2Server::start();
    let settings = "limits: { send_timeout: 1s }\n";
    let proxy = Proxy::start(&route_to(&upstream.url(""), "h2c", settings));
    // An HTTP/1.1 client that reads nothing: its connection is closed.
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    client
        .write_all(b"GET /size/16777216 HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    assert!(
        until(Duration::from_secs(10), || async {
            guard_events(&proxy, "send_timeout").await == 1
        })
        .await,
        "the proxy still writes to a client that reads nothing"
    );
    drop(client);
    // An HTTP/2 client that grants no window: its stream is reset.
    let io = TcpStream::connect(proxy.addr()).await.unwrap();
    let (sender, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, Bytes>(io)
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = Request::get("http://test/size/65536").body(()).unwrap();
    let mut sender = sender.ready().await.unwrap();
    let (response, _) = sender.send_request(request, true).unwrap();
    let mut body = response.await.unwrap().into_body();
    let ended = tokio::time::timeout(Duration::from_secs(10), body.data()).await;
    let err = ended.unwrap().unwrap().unwrap_err();
    assert_eq!(err.reason(), Some(h2::Reason::CANCEL), "{err}");
    assert_events(&proxy, "send_timeout", 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_client_that_leaves_while_queued_for_a_connection_is_never_sent_upstream() {
    let upstream = HostileUpstream::start(|_| {
        vec![
            Step::Wait(Duration::from_millis(500)),
            Step::Write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()),
        ]
    });
    let proxy = Proxy::start(&route_to(&upstream.url(), "http1", "").replace(
        "    protocol: http1\n",
        "    protocol: http1\n    max_connections: 1\n",
    ));
    // A takes the only connection; B queues behind it, then leaves.
    let mut first = proxy.conn().await;
    first
        .send("GET /first HTTP/1.1\r\nHost: test\r\n\r\n")
        .await;
    assert!(
        until(Duration::from_secs(3), || async {
            upstream.requests().len() == 1
        })
        .await,
        "the first request never reached the upstream"
    );
    let mut queued = TcpStream::connect(proxy.addr()).await.unwrap();
    queued
        .write_all(b"GET /queued HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    // B is queued once the host's queue counts it (`/upstreams`' `waiting`).
    let waiting = || async {
        let body = RawConn::connect(proxy.admin())
            .await
            .get("/upstreams")
            .await
            .json();
        body["upstreams"]["up"]["hosts"][0]["waiting"].as_u64()
    };
    assert!(
        until(Duration::from_secs(3), || async {
            waiting().await == Some(1)
        })
        .await,
        "the second request never queued: waiting {:?}",
        waiting().await
    );
    drop(queued);
    assert_events(&proxy, "client_closed", 1).await;
    assert_eq!(first.read_response(false).await.status, 200);
    // The next request, queued after the one that left, is served; the
    // one that left never reached the upstream.
    assert_eq!(proxy.conn().await.get("/third").await.status, 200);
    let paths: Vec<String> = upstream
        .requests()
        .iter()
        .map(|r| {
            String::from_utf8_lossy(r)
                .split(' ')
                .nth(1)
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(paths, ["/first", "/third"]);
}
