//! A small HTTP/2 server (the `h2` crate) for testing HTTP/2 clients: h2c
//! with prior knowledge, or TLS with the caller's configuration. It counts
//! requests, request-body bytes and the most streams it had in flight at
//! once on one connection; it can refuse, reset or fail streams and shut
//! connections down ([`H2Options`]); it answers by path:
//!
//! - `/status/NNN`: status NNN, body `ok`;
//! - `/delay/MS`: 200 `ok` after MS milliseconds;
//! - `/size/N`: 200 with a body of N bytes;
//! - `/grpc-status/N`: a trailers-only gRPC answer: one HEADERS frame
//!   with END_STREAM carrying `grpc-status: N`;
//! - anything else: 200 `ok`.
//!
//! Request bodies are read to the end (with flow control) before those
//! answers, and the request's trailers are kept ([`H2Server::request_trailers`]).
//! Two paths answer while the request is still arriving:
//!
//! - `/echo`: a bidirectional stream: 200 `application/grpc` at once,
//!   each request DATA frame sent back as it arrives, and when the
//!   request ends, trailers `grpc-status: 0`;
//! - `/early/NNN`: status NNN with body `early` as soon as the head is in,
//!   the request body unread (h2 then resets the stream with NO_ERROR,
//!   RFC 9113 8.1);
//! - `/early-then-read/NNN`: the same answer, then the request body is
//!   read to its end (no reset).

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use bytes::Bytes;
use h2::{server::SendResponse, Reason, RecvStream};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use tls::tokio_rustls::{rustls::ServerConfig, TlsAcceptor};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    sync::watch,
};

/// How an [`H2Server`] runs.
#[derive(Debug, Default)]
pub struct H2Options {
    /// TLS with this configuration (give it ALPN `h2`, e.g. with
    /// `tls::server_config(identity, None, &[tls::ALPN_H2])`); connections
    /// that do not negotiate `h2` are closed after the handshake. Without
    /// it, h2c with prior knowledge.
    pub tls: Option<ServerConfig>,
    /// Shut each connection down gracefully (GOAWAY) after it has carried
    /// this many streams.
    pub goaway_after: Option<u64>,
    /// Refuse the first n streams of each connection unprocessed
    /// (RST_STREAM REFUSED_STREAM).
    pub refuse_first: u64,
    /// Reset the next n streams of each connection (after the refused
    /// ones) with INTERNAL_ERROR once their head is in: processed, then
    /// failed before any answer (a reset, not a refusal).
    pub reset_first: u64,
    /// Answer the next n streams of each connection (after the reset
    /// ones) `503 Service Unavailable`, body `unavailable`.
    pub unavailable_first: u64,
}

/// The connection-level behaviour of [`H2Options`], copied to each connection.
#[derive(Debug, Clone, Copy)]
struct Limits {
    goaway_after: Option<u64>,
    refuse_first: u64,
    reset_first: u64,
    unavailable_first: u64,
}

/// What the server has seen, shared with its tasks.
#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    refused: AtomicU64,
    body_bytes: AtomicU64,
    max_streams: AtomicUsize,
    /// Streams whose client reset them while their answer waited.
    cancelled: AtomicU64,
    /// Streams being answered now.
    in_flight: AtomicUsize,
    request_trailers: Mutex<Option<HeaderMap>>,
    /// The `traceparent` of each request processed, in order.
    traceparents: Mutex<Vec<String>>,
    /// The `:path` (path and query) of each request processed, in order.
    targets: Mutex<Vec<String>>,
}

/// A running HTTP/2 test server on 127.0.0.1; stops when dropped.
#[derive(Debug)]
pub struct H2Server {
    addr: SocketAddr,
    counters: Arc<Counters>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl H2Server {
    /// h2c: HTTP/2 with prior knowledge on plain TCP.
    pub fn start() -> Self {
        Self::start_with(H2Options::default())
    }

    /// HTTP/2 over TLS with `config` (see [`H2Options::tls`]).
    pub fn start_tls(config: ServerConfig) -> Self {
        Self::start_with(H2Options {
            tls: Some(config),
            ..H2Options::default()
        })
    }

    pub fn start_with(options: H2Options) -> Self {
        let tls = options
            .tls
            .map(|config| TlsAcceptor::from(Arc::new(config)));
        let limits = Limits {
            goaway_after: options.goaway_after,
            refuse_first: options.refuse_first,
            reset_first: options.reset_first,
            unavailable_first: options.unavailable_first,
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the h2 server");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("h2 server address");
        let counters = Arc::new(Counters::default());
        let (stop, stop_rx) = watch::channel(false);
        let shared = Arc::clone(&counters);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("h2 server runtime");
            runtime.block_on(accept_loop(listener, shared, stop_rx, tls, limits));
        });
        Self {
            addr,
            counters,
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

    /// `https://localhost:PORT` followed by `path`.
    pub fn https_url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.addr.port())
    }

    /// Requests (streams) answered or being answered so far.
    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::SeqCst)
    }

    /// The `traceparent` of each request processed so far (those that had one).
    pub fn traceparents(&self) -> Vec<String> {
        self.counters
            .traceparents
            .lock()
            .map(|seen| seen.clone())
            .unwrap_or_default()
    }

    /// The `:path` (path and query) of each request processed so far.
    pub fn targets(&self) -> Vec<String> {
        self.counters
            .targets
            .lock()
            .map(|seen| seen.clone())
            .unwrap_or_default()
    }

    /// Streams refused unprocessed so far ([`H2Options::refuse_first`]).
    pub fn refused(&self) -> u64 {
        self.counters.refused.load(Ordering::SeqCst)
    }

    /// Request-body bytes received so far.
    pub fn body_bytes(&self) -> u64 {
        self.counters.body_bytes.load(Ordering::SeqCst)
    }

    /// The trailers of the last request that ended with trailers.
    /// Streams the client reset while their answer waited (`/delay/MS`).
    pub fn cancelled(&self) -> u64 {
        self.counters.cancelled.load(Ordering::SeqCst)
    }

    /// Streams being answered now, on all connections.
    pub fn in_flight(&self) -> usize {
        self.counters.in_flight.load(Ordering::SeqCst)
    }

    pub fn request_trailers(&self) -> Option<HeaderMap> {
        self.counters
            .request_trailers
            .lock()
            .ok()
            .and_then(|trailers| trailers.clone())
    }

    /// The most streams in flight at once on any one connection.
    pub fn max_streams(&self) -> usize {
        self.counters.max_streams.load(Ordering::SeqCst)
    }
}

impl Drop for H2Server {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    counters: Arc<Counters>,
    mut stop: watch::Receiver<bool>,
    tls: Option<TlsAcceptor>,
    limits: Limits,
) {
    let listener = TcpListener::from_std(listener).expect("register the h2 listener");
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                let _ = tcp.set_nodelay(true);
                let counters = Arc::clone(&counters);
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve(tcp, counters, limits).await,
                        Some(acceptor) => {
                            let Ok(stream) = acceptor.accept(tcp).await else { return };
                            if stream.get_ref().1.alpn_protocol() == Some(tls::ALPN_H2) {
                                serve(stream, counters, limits).await;
                            }
                        }
                    }
                });
            }
        }
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(io: S, counters: Arc<Counters>, limits: Limits) {
    let Ok(mut conn) = h2::server::handshake(io).await else {
        return;
    };
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut streams = 0;
    while let Some(Ok((request, mut respond))) = conn.accept().await {
        streams += 1;
        if limits.goaway_after == Some(streams) {
            // Streams already on their way are still served.
            conn.graceful_shutdown();
        }
        if streams <= limits.refuse_first {
            respond.send_reset(Reason::REFUSED_STREAM);
            counters.refused.fetch_add(1, Ordering::SeqCst);
            continue;
        }
        counters.requests.fetch_add(1, Ordering::SeqCst);
        if let (Some(value), Ok(mut seen)) = (
            request.headers().get("traceparent"),
            counters.traceparents.lock(),
        ) {
            seen.push(String::from_utf8_lossy(value.as_bytes()).into_owned());
        }
        if let (Some(target), Ok(mut seen)) =
            (request.uri().path_and_query(), counters.targets.lock())
        {
            seen.push(target.as_str().to_string());
        }
        let failing = streams - limits.refuse_first;
        if failing <= limits.reset_first {
            respond.send_reset(Reason::INTERNAL_ERROR);
            continue;
        }
        if failing - limits.reset_first <= limits.unavailable_first {
            let payload = Bytes::from_static(b"unavailable");
            send(&mut respond, StatusCode::SERVICE_UNAVAILABLE, payload);
            continue;
        }
        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        counters.max_streams.fetch_max(now, Ordering::SeqCst);
        counters.in_flight.fetch_add(1, Ordering::SeqCst);
        let counters = Arc::clone(&counters);
        let in_flight = Arc::clone(&in_flight);
        tokio::spawn(async move {
            answer(request, respond, &counters).await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
            counters.in_flight.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

async fn answer(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    counters: &Counters,
) {
    let path = request.uri().path().to_string();
    let mut body = request.into_body();
    if path == "/echo" {
        echo(body, respond, counters).await;
        return;
    }
    let early = [("/early/", false), ("/early-then-read/", true)]
        .into_iter()
        .find_map(|(prefix, read)| Some((path.strip_prefix(prefix)?, read)));
    if let Some((status, read)) = early {
        let status = status.parse().unwrap_or(StatusCode::BAD_REQUEST);
        send(&mut respond, status, Bytes::from_static(b"early"));
        if !read {
            return;
        }
    }
    while let Some(Ok(data)) = body.data().await {
        counters
            .body_bytes
            .fetch_add(data.len() as u64, Ordering::SeqCst);
        let _ = body.flow_control().release_capacity(data.len());
    }
    keep_trailers(&mut body, counters).await;
    if early.is_some() {
        return;
    }
    if let Some(code) = path.strip_prefix("/grpc-status/") {
        let Ok(code) = HeaderValue::from_str(code) else {
            return;
        };
        let response = Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/grpc")
            .header("grpc-status", code)
            .body(())
            .expect("a valid response head");
        let _ = respond.send_response(response, true);
        return;
    }
    if path == "/forged-trailers" {
        // `ok`, then trailers that forge fields a proxy controls in heads.
        let response = Response::builder()
            .status(StatusCode::OK)
            .body(())
            .expect("a valid response head");
        let Ok(mut stream) = respond.send_response(response, false) else {
            return;
        };
        let _ = stream.send_data(Bytes::from_static(b"ok"), false);
        let mut trailers = HeaderMap::new();
        for (name, value) in [
            ("grpc-status", "0"),
            ("x-forwarded-for", "6.6.6.6"),
            ("set-cookie", "session=forged"),
            ("x-served-by", "forged"),
        ] {
            trailers.insert(name, HeaderValue::from_static(value));
        }
        let _ = stream.send_trailers(trailers);
        return;
    }
    if let Some(count) = path.strip_prefix("/interim/") {
        // `103 Early Hints` this many times, then the answer.
        for _ in 0..count.parse::<u32>().unwrap_or(0) {
            let hints = Response::builder()
                .status(StatusCode::EARLY_HINTS)
                .header("link", "</style.css>; rel=preload")
                .body(())
                .expect("a valid interim head");
            if respond.send_informational(hints).is_err() {
                return;
            }
        }
        send(&mut respond, StatusCode::OK, Bytes::from_static(b"FIRST"));
        return;
    }
    // Answered unless the client resets the stream first.
    let routed = route(&path);
    let reset = std::future::poll_fn(|cx| respond.poll_reset(cx));
    tokio::select! {
        (status, payload) = routed => send(&mut respond, status, payload),
        _ = reset => {
            counters.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A whole answer with a Content-Length.
fn send(respond: &mut SendResponse<Bytes>, status: StatusCode, payload: Bytes) {
    let response = Response::builder()
        .status(status)
        .header("content-length", payload.len())
        .body(())
        .expect("a valid response head");
    let Ok(mut stream) = respond.send_response(response, false) else {
        return;
    };
    // Buffered by h2 and sent as the client's windows allow.
    let _ = stream.send_data(payload, true);
}

/// Keeps the request's trailers, if it ended with some.
async fn keep_trailers(body: &mut RecvStream, counters: &Counters) {
    if let Ok(Some(trailers)) = body.trailers().await {
        if let Ok(mut kept) = counters.request_trailers.lock() {
            *kept = Some(trailers);
        }
    }
}

/// `/echo`: each DATA frame goes back as it arrives; trailers at the end.
async fn echo(mut body: RecvStream, mut respond: SendResponse<Bytes>, counters: &Counters) {
    let response = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/grpc")
        .body(())
        .expect("a valid response head");
    let Ok(mut stream) = respond.send_response(response, false) else {
        return;
    };
    while let Some(Ok(data)) = body.data().await {
        let len = data.len();
        counters.body_bytes.fetch_add(len as u64, Ordering::SeqCst);
        if stream.send_data(data, false).is_err() {
            return;
        }
        let _ = body.flow_control().release_capacity(len);
    }
    keep_trailers(&mut body, counters).await;
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let _ = stream.send_trailers(trailers);
}

async fn route(path: &str) -> (StatusCode, Bytes) {
    let ok = Bytes::from_static(b"ok");
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let (Some(kind), Some(arg)) = (parts.next(), parts.next()) else {
        return (StatusCode::OK, ok);
    };
    let Ok(number) = arg.parse::<u64>() else {
        return (StatusCode::OK, ok);
    };
    match kind {
        "status" => (
            u16::try_from(number)
                .ok()
                .and_then(|code| StatusCode::from_u16(code).ok())
                .unwrap_or(StatusCode::BAD_REQUEST),
            ok,
        ),
        "delay" => {
            tokio::time::sleep(Duration::from_millis(number)).await;
            (StatusCode::OK, ok)
        }
        "size" => (
            StatusCode::OK,
            Bytes::from(vec![b'x'; usize::try_from(number).unwrap_or(0)]),
        ),
        _ => (StatusCode::OK, ok),
    }
}
