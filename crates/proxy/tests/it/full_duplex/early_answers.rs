//! An upstream's early answer (a 413 before the body) reaches a client
//! that is still sending its body, over HTTP/2 and HTTP/1.1, from HTTP/2
//! and HTTP/1.1 upstreams.

use std::{
    future::poll_fn,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use bytes::Bytes;
use h2::SendStream;
use http::{Request, StatusCode};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
    task::JoinHandle,
};

use super::h2_upstream;
use crate::support::{self, h2_client, h2_exchange, Proxy};
use testkit::{Behaviour, FakeServer, H2Server};

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
