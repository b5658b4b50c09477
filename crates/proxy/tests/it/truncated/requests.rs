//! Request bodies an HTTP/2 client (RST_STREAM) or an HTTP/3 client
//! (RESET_STREAM) breaks off, with and without content-length: an
//! HTTP/1.1 upstream never receives a whole request (no last chunk, fewer
//! bytes than the content-length) and its connection is closed; an
//! HTTP/2 upstream's stream is reset, never ended (not even just before
//! the reset: an upstream may act on a request as soon as it ends).

use std::{
    any::Any,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use bytes::Bytes;
use http::Request;
use testkit::{HostileUpstream, Step, TestCerts};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::{DECLARED, SENT};
use crate::{
    h3_support::{self, Client},
    support::{
        self,
        h2raw::{frame, kind, Reader, ACK, END_STREAM},
        live::until,
        Proxy,
    },
};

#[derive(Debug, Clone, Copy)]
enum ClientProtocol {
    H2,
    H3,
}

/// A POST of which the client sends the head and [`SENT`] bytes of
/// body (declaring [`DECLARED`] when `length`), waits until `reached`
/// says the upstream has them, then resets its stream: CANCEL over
/// HTTP/2, H3_REQUEST_CANCELLED over HTTP/3. What it returns holds the
/// client's connection open until dropped.
async fn break_off(
    protocol: ClientProtocol,
    proxy: &Proxy,
    certs: &TestCerts,
    length: bool,
    reached: impl Fn() -> bool,
) -> Box<dyn Any> {
    let mut request = Request::post("https://localhost/upload");
    if length {
        request = request.header("content-length", DECLARED);
    }
    let request = request.body(()).unwrap();
    let part = Bytes::from(vec![b'a'; SENT]);
    let arrived = || async { reached() };
    let held: Box<dyn Any> = match protocol {
        ClientProtocol::H2 => {
            let tcp = TcpStream::connect(proxy.addr()).await.unwrap();
            let name = tls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let stream = certs
                .connector(&[tls::ALPN_H2])
                .connect(name, tcp)
                .await
                .unwrap();
            let sender = support::h2_client(stream).await;
            let mut sender = sender.ready().await.unwrap();
            let (response, mut body) = sender.send_request(request, false).unwrap();
            body.send_data(part, false).unwrap();
            assert!(
                until(Duration::from_secs(5), arrived).await,
                "the body's first part never reached the upstream"
            );
            body.send_reset(h2::Reason::CANCEL);
            Box::new((sender, body, response))
        }
        ClientProtocol::H3 => {
            let mut client = Client::connect(proxy.addr(), certs).await;
            let mut stream = client.send.send_request(request).await.unwrap();
            stream.send_data(part).await.unwrap();
            assert!(
                until(Duration::from_secs(5), arrived).await,
                "the body's first part never reached the upstream"
            );
            stream.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
            Box::new((client, stream))
        }
    };
    held
}

/// Each client protocol, with and without content-length.
fn cases() -> Vec<(ClientProtocol, bool)> {
    [ClientProtocol::H2, ClientProtocol::H3]
        .into_iter()
        .flat_map(|protocol| [(protocol, false), (protocol, true)])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_the_client_breaks_off_never_reaches_an_http1_upstream_whole() {
    let certs = TestCerts::generate();
    for (protocol, length) in cases() {
        let case = format!("{protocol:?}, content-length: {length}");
        // It would answer a whole request at once.
        let upstream = HostileUpstream::start(|_| {
            vec![Step::Write(
                b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nwhole".to_vec(),
            )]
        });
        let rest = support::one_upstream(upstream.addr(), "    retries: 0\n");
        let proxy = h3_support::proxy(&certs, "", &rest);
        // Its head and the part sent: more than SENT bytes.
        let reached = || upstream.bytes_received() > SENT as u64;
        let held = break_off(protocol, &proxy, &certs, length, reached).await;
        let closed = until(Duration::from_secs(5), || async {
            upstream.open_connections() == 0
        })
        .await;
        assert!(closed, "{case}: the upstream connection stayed open");
        // Chunked, a whole request ends with its last chunk; with a
        // length, with that many bytes: neither came.
        assert_eq!(upstream.connections(), 1, "{case}");
        assert!(
            upstream.requests().is_empty(),
            "{case}: the upstream got a whole request: {:?}",
            String::from_utf8_lossy(&upstream.requests()[0])
        );
        drop(held);
    }
}

/// An h2c upstream that speaks only as much HTTP/2 as a proxy needs to
/// send it a request (its SETTINGS, an ACK of the proxy's) and never
/// answers: it records, frame by frame, what reached it of the request,
/// so that an END_STREAM is seen even when a reset follows it at once.
struct FrameRecorder {
    addr: std::net::SocketAddr,
    /// Request body bytes (DATA payloads).
    data: Arc<AtomicU64>,
    /// A HEADERS or DATA frame ended the request (END_STREAM).
    ended: Arc<AtomicBool>,
    /// RST_STREAM came for it.
    reset: Arc<AtomicBool>,
}

impl FrameRecorder {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let recorder = Self {
            addr,
            data: Arc::default(),
            ended: Arc::default(),
            reset: Arc::default(),
        };
        let (data, ended, reset) = (
            Arc::clone(&recorder.data),
            Arc::clone(&recorder.ended),
            Arc::clone(&recorder.reset),
        );
        tokio::spawn(async move {
            let Ok((mut io, _)) = listener.accept().await else {
                return;
            };
            let mut preface = [0u8; 24];
            if io.read_exact(&mut preface).await.is_err() {
                return;
            }
            let settings = frame(kind::SETTINGS, 0, 0, &[]);
            if io.write_all(&settings).await.is_err() {
                return;
            }
            let mut reader = Reader::new();
            while let Some(f) = reader.next(&mut io, Duration::from_secs(30)).await {
                match f.kind {
                    kind::SETTINGS if f.flags & ACK == 0 => {
                        let ack = frame(kind::SETTINGS, ACK, 0, &[]);
                        if io.write_all(&ack).await.is_err() {
                            return;
                        }
                    }
                    kind::DATA => {
                        data.fetch_add(f.payload.len() as u64, Ordering::SeqCst);
                        if f.flags & END_STREAM != 0 {
                            ended.store(true, Ordering::SeqCst);
                        }
                    }
                    kind::HEADERS if f.flags & END_STREAM != 0 => {
                        ended.store(true, Ordering::SeqCst);
                    }
                    kind::RST_STREAM => reset.store(true, Ordering::SeqCst),
                    _ => {}
                }
            }
        });
        recorder
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_the_client_breaks_off_resets_the_http2_upstream_stream() {
    let certs = TestCerts::generate();
    for (protocol, length) in cases() {
        let case = format!("{protocol:?}, content-length: {length}");
        let upstream = FrameRecorder::start().await;
        let rest = format!(
            "upstreams:\n  h2c:\n    hosts: [\"http://{}\"]\n    protocol: h2c\n    retries: 0\nroutes:\n  - {{ path: /, upstream: h2c }}\n",
            upstream.addr
        );
        let proxy = h3_support::proxy(&certs, "", &rest);
        let reached = || upstream.data.load(Ordering::SeqCst) >= SENT as u64;
        let held = break_off(protocol, &proxy, &certs, length, reached).await;
        let reset = until(Duration::from_secs(5), || async {
            upstream.reset.load(Ordering::SeqCst)
        })
        .await;
        assert!(reset, "{case}: the upstream stream was not reset");
        // Not ended first (END_STREAM, then a reset): an upstream may act
        // on a request as soon as it ends.
        assert!(!upstream.ended.load(Ordering::SeqCst), "{case}: ended");
        assert_eq!(upstream.data.load(Ordering::SeqCst), SENT as u64, "{case}");
        drop(held);
    }
}
