//! HTTP/2 to upstream hosts (`protocol: h2c | h2`): each worker keeps a
//! few multiplexed connections per host. A request takes a stream on the
//! first connection with one free under the peer's
//! SETTINGS_MAX_CONCURRENT_STREAMS, and another connection is opened when
//! all are full. A connection the upstream closed (GOAWAY, error) leaves
//! the pool as soon as its driver task ends.

use crate::ids::{HostId, UpstreamId};
use std::{
    future::poll_fn,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed},
        Arc, Mutex,
    },
    task::Poll,
    time::Duration,
};

use bytes::Bytes;
use h2::{client::SendRequest, SendStream};
use tracing::debug;

use super::{
    connect::{self, ConnectError},
    Upstream,
};
use crate::telemetry::{Metrics, UpstreamError};

/// Receive windows we offer upstreams: large, so that one response body
/// is not held to 64 KiB per round trip.
const STREAM_WINDOW: u32 = 1024 * 1024;
const CONNECTION_WINDOW: u32 = 8 * 1024 * 1024;

/// One multiplexed connection.
#[derive(Debug)]
pub(crate) struct H2Conn {
    sender: SendRequest<Bytes>,
    /// Streams of ours open on it.
    streams: Arc<AtomicUsize>,
    /// Set by the driver task when the connection ended.
    closed: Arc<AtomicBool>,
}

/// A stream slot on a connection, given back when dropped.
#[derive(Debug)]
pub(crate) struct StreamLease {
    streams: Arc<AtomicUsize>,
    closed: Arc<AtomicBool>,
}

impl StreamLease {
    /// Takes the connection out of the pool: it refused a stream or said
    /// GOAWAY, so no new request should try it (its open streams finish).
    pub(crate) fn retire(&self) {
        self.closed.store(true, Relaxed);
    }
}

impl Drop for StreamLease {
    fn drop(&mut self) {
        self.streams.fetch_sub(1, Relaxed);
    }
}

/// One worker's handle on the HTTP/2 connections of every host (they
/// are kept with the host, like the HTTP/1.1 pool: `pool::HostConns`).
#[derive(Debug)]
pub(crate) struct H2Pool {
    worker: usize,
}

impl H2Pool {
    pub(crate) fn new(worker: usize) -> Self {
        Self { worker }
    }

    fn slot<'a>(&self, config: &'a Upstream, host: HostId) -> &'a Mutex<Vec<H2Conn>> {
        &config.conns[host.index()].worker(self.worker).h2
    }

    /// A stream on a live connection with room for one more.
    pub(crate) fn take(
        &self,
        config: &Upstream,
        host: HostId,
    ) -> Option<(SendRequest<Bytes>, StreamLease)> {
        let mut conns = self.slot(config, host).lock().ok()?;
        conns.retain(|conn| !conn.closed.load(Relaxed));
        let conn = conns
            .iter()
            .find(|conn| conn.streams.load(Relaxed) < conn.sender.current_max_send_streams())?;
        Some(lease(conn))
    }

    fn add(
        &self,
        config: &Upstream,
        host: HostId,
        conn: H2Conn,
    ) -> (SendRequest<Bytes>, StreamLease) {
        let taken = lease(&conn);
        if config.conns[host.index()].retired() {
            return taken;
        }
        if let Ok(mut conns) = self.slot(config, host).lock() {
            conns.push(conn);
        }
        taken
    }
}

fn lease(conn: &H2Conn) -> (SendRequest<Bytes>, StreamLease) {
    conn.streams.fetch_add(1, Relaxed);
    let lease = StreamLease {
        streams: Arc::clone(&conn.streams),
        closed: Arc::clone(&conn.closed),
    };
    (conn.sender.clone(), lease)
}

/// Where a new connection is counted: the metrics and the worker's shard.
#[derive(Debug, Clone)]
pub(crate) struct Counted {
    pub metrics: Arc<Metrics>,
    pub shard: usize,
}

/// A stream to `host` of `config` (upstream number `upstream`): on a
/// pooled connection, or on a new one whose peer may send header lists
/// up to `max_header_list` bytes.
pub(crate) async fn stream(
    pool: &H2Pool,
    config: &Upstream,
    upstream: UpstreamId,
    host: HostId,
    max_header_list: u32,
    counted: &Counted,
) -> Result<(SendRequest<Bytes>, StreamLease), ConnectError> {
    if let Some(found) = pool.take(config, host) {
        return Ok(found);
    }
    // Boxed: opening a connection (TCP, TLS, the HTTP/2 handshake) is the
    // cold path, and its large future would otherwise make every stream's
    // future large.
    Box::pin(open(pool, config, upstream, host, max_header_list, counted)).await
}

/// A new multiplexed connection to `host`, pooled, with a stream taken.
async fn open(
    pool: &H2Pool,
    config: &Upstream,
    upstream: UpstreamId,
    host: HostId,
    max_header_list: u32,
    counted: &Counted,
) -> Result<(SendRequest<Bytes>, StreamLease), ConnectError> {
    let alpn = config.tls.is_some().then_some(tls::ALPN_H2);
    // No PROXY protocol header: an HTTP/2 connection carries many
    // clients' streams (config/proxy_protocol.rs refuses the pair).
    let io = connect::open(config, host, alpn, None).await?;
    let handshake = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(max_header_list)
        .handshake::<_, Bytes>(io);
    let (sender, connection) = tokio::time::timeout(config.timeouts.connect, handshake)
        .await
        .map_err(|_| ConnectError {
            kind: UpstreamError::Timeout,
            what: format!("no HTTP/2 handshake within {:?}", config.timeouts.connect),
        })?
        .map_err(|err| ConnectError {
            kind: UpstreamError::Connect,
            what: format!("HTTP/2 handshake failed: {err}"),
        })?;
    let closed = Arc::new(AtomicBool::new(false));
    counted
        .metrics
        .shard(counted.shard)
        .upstream_open(upstream, 1);
    let driver = {
        let closed = Arc::clone(&closed);
        let counted = counted.clone();
        let name = config.host_names[host.index()].clone();
        async move {
            if let Err(err) = drive(connection).await {
                debug!(host = %name, %err, "HTTP/2 upstream connection ended");
            }
            closed.store(true, Relaxed);
            counted
                .metrics
                .shard(counted.shard)
                .upstream_open(upstream, -1);
        }
    };
    tokio::spawn(driver);
    let conn = H2Conn {
        sender,
        streams: Arc::new(AtomicUsize::new(0)),
        closed,
    };
    Ok(pool.add(config, host, conn))
}

/// How often an upstream HTTP/2 connection without streams gives back the
/// memory its busiest moment left it (as a client connection does after
/// a second without streams).
const RELEASE_EVERY: Duration = Duration::from_secs(1);

/// Runs an upstream HTTP/2 connection until it ends. Once a second, if it
/// has no stream, it gives back its stream slots and empty buffers
/// (vendor/h2/SLUICE.md): a pooled connection that waits costs little, and
/// a busy one is not made to give memory back between its bursts.
async fn drive<T>(mut connection: h2::client::Connection<T, Bytes>) -> Result<(), h2::Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let start = tokio::time::Instant::now() + RELEASE_EVERY;
    let mut release = tokio::time::interval_at(start, RELEASE_EVERY);
    release.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            ended = &mut connection => return ended,
            _ = release.tick() => {
                connection.release_idle_memory();
            }
        }
    }
}

/// Why sending data on a stream stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamBroken {
    /// The stream was reset or its connection closed.
    Closed,
    /// The peer granted no window for `within` (a client that stopped reading).
    TimedOut,
}

/// Sends `data` as the peer's flow-control window allows, never buffering
/// more than the window (so a large body costs no memory here). With
/// `within`, a peer that grants no window for that long fails the send
/// (the timer is armed only when a send has to wait).
pub(crate) async fn send_data(
    send: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
    within: Option<Duration>,
) -> Result<(), StreamBroken> {
    let mut ended = false;
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        // A timer only when the window is not there at once.
        let granted = match poll_fn(|cx| Poll::Ready(send.poll_capacity(cx))).await {
            Poll::Ready(granted) => granted,
            Poll::Pending => capacity(send, within).await?,
        };
        let granted = match granted {
            Some(Ok(granted)) => granted,
            Some(Err(_)) | None => return Err(StreamBroken::Closed),
        };
        if granted == 0 {
            continue;
        }
        let chunk = data.split_to(granted.min(data.len()));
        ended = end && data.is_empty();
        send.send_data(chunk, ended)
            .map_err(|_| StreamBroken::Closed)?;
    }
    if end && !ended {
        // No data was left to carry the end flag.
        send.send_data(Bytes::new(), true)
            .map_err(|_| StreamBroken::Closed)?;
    }
    Ok(())
}

/// The window the peer grants next, waiting at most `within` for it.
async fn capacity(
    send: &mut SendStream<Bytes>,
    within: Option<Duration>,
) -> Result<Option<Result<usize, h2::Error>>, StreamBroken> {
    let granted = poll_fn(|cx| send.poll_capacity(cx));
    match within {
        None => Ok(granted.await),
        // On the heap: the timer would make every caller's future larger
        // (and each stream's future is moved when it is boxed).
        Some(within) => Box::pin(tokio::time::timeout(within, granted))
            .await
            .map_err(|_| StreamBroken::TimedOut),
    }
}

/// A response head from an HTTP/2 upstream: an interim (1xx) one, or the
/// final one with its body.
pub(crate) enum UpstreamHead {
    Interim(http::Response<()>),
    Final(http::Response<h2::RecvStream>),
}

/// The next head of a stream's answer: its interim answers first, in
/// order, then the final one (polling the response alone would skip the
/// interim ones). `101` is not an HTTP/2 answer (RFC 9113 8.6): an error.
pub(crate) fn poll_head(
    response: &mut h2::client::ResponseFuture,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<Result<UpstreamHead, h2::Error>> {
    use std::{future::Future, pin::Pin};
    match response.poll_informational(cx) {
        Poll::Ready(Some(Ok(interim)))
            if interim.status() == http::StatusCode::SWITCHING_PROTOCOLS =>
        {
            Poll::Ready(Err(h2::Error::from(h2::Reason::PROTOCOL_ERROR)))
        }
        Poll::Ready(Some(Ok(interim))) => Poll::Ready(Ok(UpstreamHead::Interim(interim))),
        Poll::Ready(Some(Err(err))) => Poll::Ready(Err(err)),
        Poll::Ready(None) | Poll::Pending => Pin::new(response)
            .poll(cx)
            .map(|answered| answered.map(UpstreamHead::Final)),
    }
}
