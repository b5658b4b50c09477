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
    let io = connect::open(config, host, alpn).await?;
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
            if let Err(err) = connection.await {
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

/// Why sending data on a stream stopped.
#[derive(Debug)]
pub(crate) struct StreamBroken;

/// Sends `data` as the peer's flow-control window allows, never buffering
/// more than the window (so a large body costs no memory here).
pub(crate) async fn send_data(
    send: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
) -> Result<(), StreamBroken> {
    let mut ended = false;
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let granted = match poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(Ok(granted)) => granted,
            Some(Err(_)) | None => return Err(StreamBroken),
        };
        if granted == 0 {
            continue;
        }
        let chunk = data.split_to(granted.min(data.len()));
        ended = end && data.is_empty();
        send.send_data(chunk, ended).map_err(|_| StreamBroken)?;
    }
    if end && !ended {
        // No data was left to carry the end flag.
        send.send_data(Bytes::new(), true)
            .map_err(|_| StreamBroken)?;
    }
    Ok(())
}
