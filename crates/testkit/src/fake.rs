//! A deliberately simple HTTP/1.1 server that misbehaves on request, for
//! testing clients (the load generator, later the proxy's upstream side):
//! it counts requests, delays some answers, stalls, closes mid-answer or
//! answers garbage.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpListener,
    sync::watch,
    time::Instant,
};
use tokio_rustls::TlsAcceptor;

/// The answer to every request: `200 OK` with body `ok`.
pub const OK_RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// How the server answers.
#[derive(Debug, Clone, Copy)]
pub enum Behaviour {
    /// Every request gets [`OK_RESPONSE`] at once.
    Normal,
    /// The `nth`, `2 * nth`, ... request on each connection is answered after
    /// `delay`; the answers before it are flushed first.
    DelayEvery { nth: u64, delay: Duration },
    /// Answers due between `after` and `after + stall` from the server's start
    /// wait until the stall ends, on every connection.
    StallOnce { after: Duration, stall: Duration },
    /// Requests are read and never answered.
    Silent,
    /// Nothing is ever read: the client's writes back up.
    NeverRead,
    /// The first request on each connection is answered with
    /// `Connection: close`, then the connection is closed, whatever else
    /// was pipelined behind it.
    CloseAfterAnswer,
    /// Half of a response, then the connection is closed.
    CloseMidResponse,
    /// A response that is not HTTP.
    Malformed,
    /// The first request on each connection is answered with
    /// [`EARLY_RESPONSE`] (a 413) `after` its head is in, its body unread
    /// (nothing is read meanwhile, as while a server asks an
    /// authorisation service). With `close`, the answer says `Connection: close`, the
    /// connection is shut for writing and what the client still sends is
    /// read and discarded (a lingering close, RFC 9112 9.6). Without, the
    /// connection stays open and nothing more is read: a client that
    /// keeps sending fills the socket buffers and blocks.
    AnswerEarly { close: bool, after: Duration },
    /// Each request is answered at once with a chunked 200; its body
    /// (Content-Length framed) goes back chunk by chunk as it arrives,
    /// then the last chunk with the trailer `grpc-status: 0`: a full-duplex
    /// HTTP/1.1 server, like a bidi stream.
    EchoBody,
}

/// The answer of [`Behaviour::AnswerEarly`] (without its `Connection` field).
pub const EARLY_RESPONSE: &[u8] =
    b"HTTP/1.1 413 Payload Too Large\r\nx-early: upstream\r\nContent-Length: 5\r\n";

/// A running fake server; stops when dropped.
#[derive(Debug)]
pub struct FakeServer {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeServer {
    pub fn start(behaviour: Behaviour) -> Self {
        Self::start_with(behaviour, None)
    }

    /// The same over TLS with `certs`' server certificate; the URL stays
    /// `http://`-less: use [`FakeServer::https_url`].
    pub fn start_tls(behaviour: Behaviour, certs: &crate::TestCerts) -> Self {
        Self::start_with(behaviour, Some(certs.acceptor()))
    }

    fn start_with(behaviour: Behaviour, tls: Option<TlsAcceptor>) -> Self {
        let std_listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake server");
        std_listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = std_listener.local_addr().expect("fake server address");
        let requests = Arc::new(AtomicU64::new(0));
        let (stop, stop_rx) = watch::channel(false);
        let counter = Arc::clone(&requests);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("fake server runtime");
            runtime.block_on(accept_loop(std_listener, behaviour, counter, stop_rx, tls));
        });
        Self {
            addr,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `https://localhost:PORT` followed by `path` (the name the test certificate carries).
    pub fn https_url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.addr.port())
    }

    /// Complete request heads received so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    behaviour: Behaviour,
    requests: Arc<AtomicU64>,
    mut stop: watch::Receiver<bool>,
    tls: Option<TlsAcceptor>,
) {
    let listener = TcpListener::from_std(listener).expect("register the fake listener");
    let started = Instant::now();
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let requests = Arc::clone(&requests);
                let stop = stop.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve(stream, behaviour, requests, started, stop).await,
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                serve(stream, behaviour, requests, started, stop).await;
                            }
                        }
                    }
                });
            }
        }
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    behaviour: Behaviour,
    requests: Arc<AtomicU64>,
    started: Instant,
    mut stop: watch::Receiver<bool>,
) {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut on_connection = 0u64;
    let mut chunk = [0u8; 16 * 1024];
    if let Behaviour::NeverRead = behaviour {
        let _ = stop.changed().await;
        return;
    }
    loop {
        let read = tokio::select! {
            _ = stop.changed() => return,
            read = stream.read(&mut chunk) => read,
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        // Requests are heads without bodies (but for EchoBody): each ends
        // with an empty line.
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let length = content_length(&buf[..end + 4]);
            buf.drain(..end + 4);
            requests.fetch_add(1, Ordering::SeqCst);
            on_connection += 1;
            match behaviour {
                Behaviour::Normal => out.extend_from_slice(OK_RESPONSE),
                Behaviour::DelayEvery { nth, delay } => {
                    if on_connection.is_multiple_of(nth) {
                        if stream.write_all(&out).await.is_err() {
                            return;
                        }
                        out.clear();
                        tokio::time::sleep(delay).await;
                    }
                    out.extend_from_slice(OK_RESPONSE);
                }
                Behaviour::StallOnce { after, stall } => {
                    let now = Instant::now();
                    let (from, until) = (started + after, started + after + stall);
                    if now >= from && now < until {
                        if stream.write_all(&out).await.is_err() {
                            return;
                        }
                        out.clear();
                        tokio::time::sleep_until(until).await;
                    }
                    out.extend_from_slice(OK_RESPONSE);
                }
                Behaviour::Silent | Behaviour::NeverRead => {}
                Behaviour::CloseAfterAnswer => {
                    let answer =
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
                    let _ = stream.write_all(answer).await;
                    let _ = stream.shutdown().await;
                    return;
                }
                Behaviour::CloseMidResponse => {
                    let _ = stream
                        .write_all(&OK_RESPONSE[..OK_RESPONSE.len() - 1])
                        .await;
                    return;
                }
                Behaviour::Malformed => out.extend_from_slice(b"HTTP/1.1 two hundred\r\n\r\n"),
                Behaviour::EchoBody => {
                    if !echo_body(&mut stream, &mut buf, length).await {
                        return;
                    }
                }
                Behaviour::AnswerEarly { close, after } => {
                    tokio::time::sleep(after).await;
                    answer_early(&mut stream, close, &mut stop).await;
                    return;
                }
            }
        }
        if !out.is_empty() {
            if stream.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
    }
}

/// [`Behaviour::AnswerEarly`], once a head is in.
async fn answer_early<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    close: bool,
    stop: &mut watch::Receiver<bool>,
) {
    let mut answer = EARLY_RESPONSE.to_vec();
    if close {
        answer.extend_from_slice(b"Connection: close\r\n");
    }
    answer.extend_from_slice(b"\r\nearly");
    if stream.write_all(&answer).await.is_err() {
        return;
    }
    if !close {
        let _ = stop.changed().await;
        return;
    }
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 16 * 1024];
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            read = stream.read(&mut sink) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
        }
    }
}

/// The Content-Length of a request head (0 without one).
pub(crate) fn content_length(head: &[u8]) -> u64 {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut fields);
    if request.parse(head).is_err() {
        return 0;
    }
    request
        .headers
        .iter()
        .find(|field| field.name.eq_ignore_ascii_case("content-length"))
        .and_then(|field| std::str::from_utf8(field.value).ok()?.trim().parse().ok())
        .unwrap_or(0)
}

/// [`Behaviour::EchoBody`] for one request whose head was taken off `buf`;
/// what follows its body stays in `buf`. False when the connection broke.
async fn echo_body<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    length: u64,
) -> bool {
    let head =
        b"HTTP/1.1 200 OK\r\ncontent-type: application/grpc\r\ntransfer-encoding: chunked\r\n\r\n";
    if stream.write_all(head).await.is_err() {
        return false;
    }
    let mut left = length;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let take = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if take > 0 {
            let mut framed = format!("{take:x}\r\n").into_bytes();
            framed.extend(buf.drain(..take));
            framed.extend_from_slice(b"\r\n");
            if stream.write_all(&framed).await.is_err() {
                return false;
            }
            left -= take as u64;
        }
        if left == 0 {
            break;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    stream
        .write_all(b"0\r\ngrpc-status: 0\r\n\r\n")
        .await
        .is_ok()
}
