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
//! - `/cut/N`: 200 and N bytes of body, then, once the test calls
//!   [`H2Server::cut`], RST_STREAM INTERNAL_ERROR instead of the rest (a
//!   response broken off); `/cut-with-length/N` the same with
//!   `content-length: 2N`;
//! - anything else: 200 `ok`.
//!
//! Request bodies are read to the end (with flow control) before those
//! answers, and the request's trailers are kept ([`H2Server::request_trailers`]);
//! a request whose body breaks off (the client resets the stream) is not
//! answered.
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

mod answer;

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex,
    },
};

use answer::{answer, send};
use bytes::Bytes;
use h2::Reason;
use http::{HeaderMap, StatusCode};
use tls::tokio_rustls::{rustls::ServerConfig, TlsAcceptor};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    sync::{watch, Semaphore},
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
    /// A permit for each `/cut` answer the test let break off.
    cuts: Cuts,
    /// Streams being answered now.
    in_flight: AtomicUsize,
    request_trailers: Mutex<Option<HeaderMap>>,
    /// The `traceparent` of each request processed, in order.
    traceparents: Mutex<Vec<String>>,
    /// The `:path` (path and query) of each request processed, in order.
    targets: Mutex<Vec<String>>,
}

/// The permits [`H2Server::cut`] adds (none at first).
#[derive(Debug)]
struct Cuts(Semaphore);

impl Default for Cuts {
    fn default() -> Self {
        Self(Semaphore::new(0))
    }
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

    /// Lets one `/cut` answer break off now (its N bytes sent, it resets
    /// the stream); one waiting, or the next to come.
    pub fn cut(&self) {
        self.counters.cuts.0.add_permits(1);
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
