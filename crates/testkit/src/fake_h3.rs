//! A small HTTP/3 server (quinn and h3) for testing HTTP/3 clients, on a
//! UDP port of 127.0.0.1 with a certificate of the test CA
//! ([`TestCerts`]). It counts requests, request-body bytes and the most
//! streams it had in flight at once on one connection, and answers by
//! path, as [`crate::H2Server`] does:
//!
//! - `/status/NNN`: status NNN, body `ok`;
//! - `/delay/MS`: 200 `ok` after MS milliseconds;
//! - `/size/N`: 200 with a body of N bytes;
//! - anything else: 200 `ok`.
//!
//! Request bodies are read to the end before the answer.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use bytes::{Buf, Bytes};
use h3::server::RequestStream;
use http::{Response, StatusCode};
use quinn::crypto::rustls::QuicServerConfig;
use tokio::sync::watch;

use crate::TestCerts;

/// ALPN of HTTP/3.
pub const ALPN_H3: &[u8] = b"h3";

/// How an [`H3Server`] runs.
#[derive(Debug, Clone)]
pub struct H3Options {
    /// Request streams a client may have open at once on a connection
    /// (QUIC's MAX_STREAMS).
    pub max_streams: u32,
    /// The ALPN protocols offered; without `h3` clients are refused in
    /// the handshake (a server that does not speak HTTP/3).
    pub alpn: Vec<Vec<u8>>,
}

impl Default for H3Options {
    fn default() -> Self {
        Self {
            max_streams: 100,
            alpn: vec![ALPN_H3.to_vec()],
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    body_bytes: AtomicU64,
    max_streams: AtomicUsize,
    connections: AtomicU64,
}

/// A running HTTP/3 test server on 127.0.0.1; stops when dropped.
#[derive(Debug)]
pub struct H3Server {
    addr: SocketAddr,
    counters: Arc<Counters>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl H3Server {
    pub fn start(certs: &TestCerts) -> Self {
        Self::start_with(certs, H3Options::default())
    }

    pub fn start_with(certs: &TestCerts, options: H3Options) -> Self {
        let alpn: Vec<&[u8]> = options.alpn.iter().map(Vec::as_slice).collect();
        let tls = certs.server_config(&alpn);
        let crypto = QuicServerConfig::try_from(Arc::new(tls)).expect("a QUIC TLS configuration");
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let mut transport = quinn::TransportConfig::default();
        transport.max_concurrent_bidi_streams(options.max_streams.into());
        config.transport_config(Arc::new(transport));
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind the h3 server");
        let addr = socket.local_addr().expect("h3 server address");
        let counters = Arc::new(Counters::default());
        let (stop, stop_rx) = watch::channel(false);
        let shared = Arc::clone(&counters);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("h3 server runtime");
            runtime.block_on(async move {
                let endpoint = quinn::Endpoint::new(
                    quinn::EndpointConfig::default(),
                    Some(config),
                    socket,
                    Arc::new(quinn::TokioRuntime),
                )
                .expect("the h3 server endpoint");
                accept_loop(&endpoint, shared, stop_rx).await;
                endpoint.close(0u32.into(), b"");
            });
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

    /// `https://localhost:PORT` followed by `path` (the test certificate's name).
    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.addr.port())
    }

    /// Requests answered or being answered so far.
    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::SeqCst)
    }

    /// Request-body bytes received so far.
    pub fn body_bytes(&self) -> u64 {
        self.counters.body_bytes.load(Ordering::SeqCst)
    }

    /// The most requests in flight at once on any one connection.
    pub fn max_streams(&self) -> usize {
        self.counters.max_streams.load(Ordering::SeqCst)
    }

    /// QUIC connections accepted so far (handshake complete).
    pub fn connections(&self) -> u64 {
        self.counters.connections.load(Ordering::SeqCst)
    }
}

impl Drop for H3Server {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    endpoint: &quinn::Endpoint,
    counters: Arc<Counters>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { return };
                let counters = Arc::clone(&counters);
                tokio::spawn(async move {
                    let Ok(connection) = incoming.await else { return };
                    counters.connections.fetch_add(1, Ordering::SeqCst);
                    serve(connection, counters).await;
                });
            }
        }
    }
}

/// Serves one connection's requests, each in its own task.
async fn serve(connection: quinn::Connection, counters: Arc<Counters>) {
    let Ok(mut h3) = h3::server::builder()
        .build::<_, Bytes>(h3_quinn::Connection::new(connection))
        .await
    else {
        return;
    };
    let in_flight = Arc::new(AtomicUsize::new(0));
    while let Ok(Some(resolver)) = h3.accept().await {
        let counters = Arc::clone(&counters);
        let in_flight = Arc::clone(&in_flight);
        tokio::spawn(async move {
            let Ok((request, stream)) = resolver.resolve_request().await else {
                return;
            };
            counters.requests.fetch_add(1, Ordering::SeqCst);
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            counters.max_streams.fetch_max(now, Ordering::SeqCst);
            let _ = answer(request.uri().path(), stream, &counters).await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

async fn answer<S: h3::quic::BidiStream<Bytes>>(
    path: &str,
    mut stream: RequestStream<S, Bytes>,
    counters: &Counters,
) -> Result<(), h3::error::StreamError> {
    while let Some(chunk) = stream.recv_data().await? {
        counters
            .body_bytes
            .fetch_add(chunk.remaining() as u64, Ordering::SeqCst);
    }
    let mut status = StatusCode::OK;
    let mut body = Bytes::from_static(b"ok");
    if let Some(code) = path.strip_prefix("/status/") {
        status = code
            .parse()
            .ok()
            .and_then(|code| StatusCode::from_u16(code).ok())
            .unwrap_or(StatusCode::BAD_REQUEST);
    } else if let Some(ms) = path.strip_prefix("/delay/") {
        tokio::time::sleep(Duration::from_millis(ms.parse().unwrap_or(0))).await;
    } else if let Some(size) = path.strip_prefix("/size/") {
        body = Bytes::from(vec![b'x'; size.parse().unwrap_or(0)]);
    }
    let response = Response::builder()
        .status(status)
        .header("content-length", body.len())
        .body(())
        .expect("a status and a length make a valid response");
    stream.send_response(response).await?;
    if !body.is_empty() {
        stream.send_data(body).await?;
    }
    stream.finish().await
}
