//! Request and response flowing at once (issue 16, "Full duplex"): a
//! bidirectional gRPC-style stream interleaves through the proxy over h2c
//! and over TLS, HTTP/2 request trailers reach an HTTP/2 upstream, a
//! trailers-only answer carries no length, and an upstream's early answer
//! reaches a client that is still sending its body.

use crate::support;

use std::{
    future::poll_fn,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use bytes::{Buf, Bytes, BytesMut};
use h2::{client::SendRequest, RecvStream, SendStream};
use http::{HeaderMap, Request, StatusCode};
use support::{h2_client, h2_exchange, Proxy};
use testkit::{Behaviour, FakeServer, H2Server, TestCerts};
use tls::rustls::pki_types::ServerName;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

/// Messages in the ping-pong.
const MESSAGES: usize = 10;
/// How long an echo may take before the test fails instead of hanging.
const ECHO_DEADLINE: Duration = Duration::from_secs(10);

/// A route to one HTTP/2 upstream at `url` (`http://` for h2c, `https://` for h2).
fn h2_upstream(url: &str, certs: Option<&TestCerts>) -> String {
    let (protocol, tls) = match certs {
        None => ("h2c", String::new()),
        Some(certs) => (
            "h2",
            format!("    tls: {{ ca: \"{}\" }}\n", certs.ca_path.display()),
        ),
    };
    format!(
        "upstreams:\n  grpc:\n    hosts: [\"{url}\"]\n    protocol: {protocol}\n{tls}routes:\n  - {{ path: /, upstream: grpc }}\n"
    )
}

/// A gRPC message: a 5-byte prefix (not compressed, big-endian length), then `payload`.
fn grpc_message(payload: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + payload.len());
    out.extend_from_slice(&[0]);
    out.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    out.extend_from_slice(payload.as_bytes());
    out.freeze()
}

/// The next whole gRPC message from `body`, however its frames were cut;
/// `None` when the body ends first.
async fn next_grpc_message(body: &mut RecvStream, pending: &mut BytesMut) -> Option<String> {
    loop {
        if pending.len() >= 5 {
            let len = u32::from_be_bytes(pending[1..5].try_into().unwrap()) as usize;
            if pending.len() >= 5 + len {
                pending.advance(5);
                let payload = pending.split_to(len);
                return Some(String::from_utf8(payload.to_vec()).unwrap());
            }
        }
        let data = body.data().await?.unwrap();
        let _ = body.flow_control().release_capacity(data.len());
        pending.extend_from_slice(&data);
    }
}

/// A bidi ping-pong on one stream to the upstream's `/echo`: each message
/// is sent only once the echo of the one before came back, so the replies
/// must interleave with the sends (a proxy that waits for the end of the
/// request never answers the first: only the last message ends the
/// client's side). Ends with the upstream's `grpc-status` trailers.
async fn ping_pong(sender: &SendRequest<Bytes>, request: Request<()>) {
    let mut sender = sender.clone().ready().await.unwrap();
    let (response, mut send) = sender.send_request(request, false).unwrap();
    let mut response = Some(response);
    let mut body = None;
    let mut pending = BytesMut::new();
    for i in 0..MESSAGES {
        let payload = format!("ping {i}");
        // The last message ends the client's side (END_STREAM).
        let last = i + 1 == MESSAGES;
        send.send_data(grpc_message(&payload), last).unwrap();
        let reply = tokio::time::timeout(ECHO_DEADLINE, async {
            if let Some(response) = response.take() {
                let response = response.await.unwrap();
                assert_eq!(response.status(), StatusCode::OK);
                body = Some(response.into_body());
            }
            next_grpc_message(body.as_mut().unwrap(), &mut pending).await
        })
        .await
        .unwrap_or_else(|_| {
            panic!("no echo of message {i} before the client's end: no interleaving")
        });
        assert_eq!(reply.as_deref(), Some(payload.as_str()));
    }
    let mut body = body.unwrap();
    let end = tokio::time::timeout(ECHO_DEADLINE, async {
        let rest = next_grpc_message(&mut body, &mut pending).await;
        (rest, body.trailers().await.unwrap())
    })
    .await
    .expect("the end of the stream");
    assert_eq!(end.0, None, "no message after the last echo");
    let trailers = end.1.expect("trailers");
    assert_eq!(trailers["grpc-status"], "0");
}

/// A gRPC-style request for `uri`.
fn grpc_request(uri: &str) -> Request<()> {
    Request::post(uri)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidi_stream_interleaves_over_h2c() {
    let upstream = H2Server::start();
    let proxy = Proxy::start(&h2_upstream(&upstream.url(""), None));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    ping_pong(&sender, grpc_request("http://grpc.test/echo")).await;
    assert_eq!(upstream.requests(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidi_stream_interleaves_over_tls() {
    let certs = TestCerts::generate();
    let upstream = H2Server::start_tls(certs.server_config(&[tls::ALPN_H2]));
    let proxy = Proxy::start_yaml(&format!(
        "workers: 1
listeners:
  - address: 127.0.0.1:0
    tls: {{ cert: \"{}\", key: \"{}\" }}
{}",
        certs.cert_path.display(),
        certs.key_path.display(),
        h2_upstream(&upstream.https_url(""), Some(&certs))
    ));
    let tcp = TcpStream::connect(proxy.addr()).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let io = certs
        .connector(&[tls::ALPN_H2])
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(io.get_ref().1.alpn_protocol(), Some(tls::ALPN_H2));
    let sender = h2_client(io).await;
    ping_pong(&sender, grpc_request("https://grpc.test/echo")).await;
    assert_eq!(upstream.requests(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidi_stream_interleaves_to_an_http11_upstream() {
    let upstream = FakeServer::start(Behaviour::EchoBody);
    let proxy = Proxy::start(&support::one_upstream(upstream.addr(), ""));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    // HTTP/1.1 needs the length (or chunks): ten messages of 11 bytes.
    let length: usize = (0..MESSAGES)
        .map(|i| grpc_message(&format!("ping {i}")).len())
        .sum();
    let mut request = grpc_request("http://grpc.test/echo");
    request
        .headers_mut()
        .insert("content-length", length.into());
    ping_pong(&sender, request).await;
    assert_eq!(upstream.requests(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_bodies_leave_the_http11_upstream_connection_reusable() {
    streamed_bodies_to_an_http11_upstream("forward").await;
}

/// By default (`auto`) an HTTP/2 client's request trailers are dropped
/// toward an HTTP/1.1 upstream; the body still goes chunked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_trailers_are_dropped_toward_an_http11_upstream_by_default() {
    streamed_bodies_to_an_http11_upstream("auto").await;
}

/// Three POSTs on one HTTP/2 connection to one HTTP/1.1 upstream connection:
/// with a length, chunked, chunked with trailers (sent as the route's
/// `request_trailers` says).
async fn streamed_bodies_to_an_http11_upstream(request_trailers: &str) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::clone(&connections);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            accepted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(support::echo(stream, "one", Arc::default()));
        }
    });
    let proxy = Proxy::start(&format!(
        "upstreams:\n  echo:\n    hosts: [\"http://{addr}\"]\nroutes:\n  - {{ path: /, upstream: echo, request_trailers: {request_trailers} }}\n"
    ));
    let forward = request_trailers == "forward";
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    for round in 0..3 {
        // With a length, the body as it is; without, chunked with the
        // client's trailers in the last chunk.
        let mut request = Request::post("http://api.test/upload");
        if round == 0 {
            request = request.header("content-length", 10);
        }
        let mut ready = sender.clone().ready().await.unwrap();
        let (response, mut send) = ready
            .send_request(request.body(()).unwrap(), false)
            .unwrap();
        send.send_data(Bytes::from_static(b"01234"), false).unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        if round == 2 {
            send.send_data(Bytes::from_static(b"56789"), false).unwrap();
            let mut trailers = HeaderMap::new();
            trailers.insert("x-checksum", "c0ffee".parse().unwrap());
            send.send_trailers(trailers).unwrap();
        } else {
            send.send_data(Bytes::from_static(b"56789"), true).unwrap();
        }
        let response = tokio::time::timeout(Duration::from_secs(5), response)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.into_body();
        let mut text = Vec::new();
        while let Some(data) = body.data().await {
            text.extend_from_slice(&data.unwrap());
        }
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("body-bytes: 10"), "{text}");
        if round == 2 {
            assert!(text.contains("transfer-encoding: chunked"), "{text}");
        }
        // The HTTP/2 client's trailers, in the upstream's last chunk.
        let trailed = text.contains("trailer: x-checksum: c0ffee\n");
        assert_eq!(trailed, forward && round == 2, "round {round}: {text}");
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "one upstream connection for all"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_request_trailers_reach_an_http2_upstream() {
    let upstream = H2Server::start();
    let proxy = Proxy::start(&h2_upstream(&upstream.url(""), None));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = Request::post("http://grpc.test/upload")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut sender = sender.ready().await.unwrap();
    let (response, mut send) = sender.send_request(request, false).unwrap();
    send.send_data(Bytes::from_static(b"payload"), false)
        .unwrap();
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", "c0ffee".parse().unwrap());
    trailers.insert("grpc-timeout", "5S".parse().unwrap());
    send.send_trailers(trailers).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), response)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(upstream.body_bytes(), 7);
    let received = upstream
        .request_trailers()
        .expect("the upstream got trailers");
    assert_eq!(received["x-checksum"], "c0ffee");
    assert_eq!(received["grpc-timeout"], "5S");
}

/// The chain reads the whole body (validate): the trailers that follow it
/// still reach the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_request_trailers_reach_an_http2_upstream_when_the_chain_holds_the_body() {
    let upstream = H2Server::start();
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../specs/petstore.yaml");
    let config = h2_upstream(&upstream.url(""), None).replace(
        "routes:\n  - { path: /, upstream: grpc }",
        &format!(
            "middleware:\n  validate: {{ openapi: \"{spec}\" }}\n\
             routes:\n  - {{ path: /, chain: [validate], upstream: grpc }}"
        ),
    );
    let proxy = Proxy::start(&config);
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = Request::post("http://api.test/v1/pets")
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let mut sender = sender.ready().await.unwrap();
    let (response, mut send) = sender.send_request(request, false).unwrap();
    let pet = Bytes::from_static(br#"{"id":3,"name":"kitty","tag":"cat"}"#);
    send.send_data(pet.clone(), false).unwrap();
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", "c0ffee".parse().unwrap());
    send.send_trailers(trailers).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), response)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(upstream.body_bytes(), pet.len() as u64);
    let received = upstream
        .request_trailers()
        .expect("the upstream got trailers");
    assert_eq!(received["x-checksum"], "c0ffee");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trailers_only_grpc_answer_has_no_content_length() {
    let upstream = H2Server::start();
    let proxy = Proxy::start(&h2_upstream(&upstream.url(""), None));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = Request::post("http://grpc.test/grpc-status/7")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, body, trailers) = h2_exchange(&sender, request, &grpc_message("hi")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["grpc-status"], "7");
    assert_eq!(response.headers()["content-type"], "application/grpc");
    assert!(
        response.headers().get("content-length").is_none(),
        "{:?}",
        response.headers()
    );
    assert!(body.is_empty());
    assert!(trailers.is_none());
}

/// A large request body (under the proxy's 10 MiB limit), sent in chunks.
const BODY: usize = 8 << 20;
const CHUNK: usize = 16 << 10;
/// A pause between chunks that makes the whole body take over 5 s.
const SLOWLY: Duration = Duration::from_millis(10);

/// Sends [`BODY`] bytes on `send` in chunks (as HTTP/2 flow control
/// allows) `pause` apart, counting them in `sent`; stops when the stream
/// is closed.
fn send_h2(mut send: SendStream<Bytes>, pause: Duration, sent: Arc<AtomicUsize>) -> JoinHandle<()> {
    tokio::spawn(async move {
        while sent.load(Ordering::SeqCst) < BODY {
            send.reserve_capacity(CHUNK);
            let Some(Ok(granted)) = poll_fn(|cx| send.poll_capacity(cx)).await else {
                return;
            };
            let chunk = granted.min(BODY - sent.load(Ordering::SeqCst));
            let last = sent.load(Ordering::SeqCst) + chunk == BODY;
            if send
                .send_data(Bytes::from(vec![b'x'; chunk]), last)
                .is_err()
            {
                return;
            }
            sent.fetch_add(chunk, Ordering::SeqCst);
            tokio::time::sleep(pause).await;
        }
    })
}

/// Writes [`BODY`] bytes on `writer` in chunks `pause` apart, counting
/// them in `sent`; stops when a write fails.
fn send_h1<W>(mut writer: W, pause: Duration, sent: Arc<AtomicUsize>) -> JoinHandle<()>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let chunk = vec![b'x'; CHUNK];
        while sent.load(Ordering::SeqCst) < BODY {
            if writer.write_all(&chunk).await.is_err() {
                return;
            }
            sent.fetch_add(chunk.len(), Ordering::SeqCst);
            tokio::time::sleep(pause).await;
        }
    })
}

/// An HTTP/2 client POSTs a large body to `uri`, chunks `pause` apart;
/// the upstream's early 413 must reach it while it is still sending, and
/// its connection stays usable.
async fn h2_client_gets_the_early_answer(proxy: &Proxy, uri: &str, pause: Duration) {
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = Request::post(uri)
        .header("content-length", BODY)
        .body(())
        .unwrap();
    let mut ready = sender.clone().ready().await.unwrap();
    let (response, send) = ready.send_request(request, false).unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let writer = send_h2(send, pause, Arc::clone(&sent));
    let response = tokio::time::timeout(Duration::from_secs(4), response)
        .await
        .expect("the early answer while the body is still being sent")
        .unwrap();
    let sent_then = sent.load(Ordering::SeqCst);
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let mut body = response.into_body();
    let mut text = Vec::new();
    while let Some(Ok(data)) = body.data().await {
        text.extend_from_slice(&data);
    }
    assert_eq!(text, b"early", "the upstream's answer, not the proxy's");
    assert!(sent_then < BODY, "the client had sent all its body");
    writer.abort();
    // Only that stream ended: the connection carries the next request.
    let next = Request::get(uri).body(()).unwrap();
    let (response, body, _) = h2_exchange(&sender, next, b"").await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body, b"early");
}

/// HTTP/1.1 upstreams that answer a 413 before the body, with the pause
/// between the client's chunks: at once with a lingering close, at once
/// staying open (the client sending slowly), and after 300 ms staying
/// open and reading nothing, the client sending as fast as it can (the
/// proxy's writes to the upstream block: they must not hold up the answer).
const EARLY_ANSWERS: [(Behaviour, Duration); 3] = [
    (
        Behaviour::AnswerEarly {
            close: true,
            after: Duration::ZERO,
        },
        SLOWLY,
    ),
    (
        Behaviour::AnswerEarly {
            close: false,
            after: Duration::ZERO,
        },
        SLOWLY,
    ),
    (
        Behaviour::AnswerEarly {
            close: false,
            after: Duration::from_millis(300),
        },
        Duration::ZERO,
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_answer_from_an_http11_upstream_reaches_an_http2_client() {
    for (behaviour, pause) in EARLY_ANSWERS {
        let upstream = FakeServer::start(behaviour);
        let proxy = Proxy::start(&support::one_upstream(upstream.addr(), ""));
        h2_client_gets_the_early_answer(&proxy, "http://api.test/upload", pause).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_answer_from_an_http2_upstream_reaches_an_http2_client() {
    let upstream = H2Server::start();
    let proxy = Proxy::start(&h2_upstream(&upstream.url(""), None));
    // The upstream resets the rest of the request (NO_ERROR), or reads it on.
    for path in ["/early/413", "/early-then-read/413"] {
        let uri = format!("http://api.test{path}");
        h2_client_gets_the_early_answer(&proxy, &uri, SLOWLY).await;
    }
}

/// An HTTP/1.1 client POSTs a large body to `path`, chunks `pause` apart;
/// the upstream's early 413 (body `early`) must reach it while it is
/// still sending, and then the proxy closes the connection (RFC 9112
/// §9.6: the rest of the body is not read as a next request). The answer.
async fn h1_client_gets_the_early_answer(proxy: &Proxy, path: &str, pause: Duration) -> String {
    let stream = TcpStream::connect(proxy.addr()).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let head = format!("POST {path} HTTP/1.1\r\nhost: a\r\ncontent-length: {BODY}\r\n\r\n");
    writer.write_all(head.as_bytes()).await.unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let writing = send_h1(writer, pause, Arc::clone(&sent));
    let answer = tokio::time::timeout(Duration::from_secs(4), support::read_head(&mut reader))
        .await
        .unwrap_or_else(|_| panic!("{path}: no early answer within 4 s"));
    let sent_then = sent.load(Ordering::SeqCst);
    assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {answer}");
    assert!(sent_then < BODY, "{path}: the client had sent all");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{path}: the answer does not say the connection closes: {answer}"
    );
    // The proxy half-closes after the answer and drains what the client
    // still sends (or, past its linger, resets): either way the client
    // sees the end, while it is still writing.
    let rest = tokio::time::timeout(Duration::from_secs(4), read_until_closed(&mut reader))
        .await
        .unwrap_or_else(|_| panic!("{path}: the connection stayed open after the answer"));
    let answer = answer + &rest;
    assert!(answer.ends_with("\r\n\r\nearly"), "{path}: {answer}");
    writing.abort();
    answer
}

/// What `reader` yields until the peer closes (end of stream or reset).
async fn read_until_closed<R: AsyncRead + Unpin>(reader: &mut R) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while let Ok(n @ 1..) = reader.read(&mut buf).await {
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// [`h1_client_gets_the_early_answer`] to an HTTP/1.1 upstream that
/// behaves as `behaviour`; the answer is the upstream's, not the proxy's.
async fn h1_client_gets_the_early_answer_from_h1(behaviour: Behaviour, pause: Duration) {
    let upstream = FakeServer::start(behaviour);
    let proxy = Proxy::start(&support::one_upstream(upstream.addr(), ""));
    let answer = h1_client_gets_the_early_answer(&proxy, "/upload", pause).await;
    assert!(
        answer.contains("x-early: upstream"),
        "{behaviour:?}: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_answer_from_an_http11_upstream_reaches_an_http11_client() {
    for (behaviour, pause) in &EARLY_ANSWERS[..2] {
        h1_client_gets_the_early_answer_from_h1(*behaviour, *pause).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_early_answer_from_an_upstream_that_stops_reading_reaches_an_http11_client() {
    let (behaviour, pause) = EARLY_ANSWERS[2];
    h1_client_gets_the_early_answer_from_h1(behaviour, pause).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_answer_from_an_http2_upstream_reaches_an_http11_client() {
    let upstream = H2Server::start();
    let proxy = Proxy::start(&h2_upstream(&upstream.url(""), None));
    // The upstream resets the rest of the request (NO_ERROR), or reads it on.
    for path in ["/early/413", "/early-then-read/413"] {
        h1_client_gets_the_early_answer(&proxy, path, SLOWLY).await;
    }
}
