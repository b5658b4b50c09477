//! Keep-alive connections to upstream hosts, one pool per worker (so the
//! lock below is never contended: only its worker's tasks take it, on one
//! thread). The most recently used connection is reused first, so idle
//! ones age out and the warm ones stay warm.

use crate::ids::{HostId, UpstreamId};
use std::{
    future::Future,
    io,
    pin::Pin,
    sync::Mutex,
    task::{Context, Poll, Waker},
    time::Instant,
};

use bytes::BytesMut;
use tls::tokio_rustls::client::TlsStream;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
};

use super::Upstream;
use crate::telemetry::Shard;

/// The bytes of an HTTP/1.1 upstream connection: plain TCP or TLS.
#[derive(Debug)]
pub(crate) enum UpstreamStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl UpstreamStream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(tcp) => tcp,
            Self::Tls(tls) => tls.get_ref().0,
        }
    }
}

impl AsyncRead for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Self::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpstreamStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Self::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Self::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Self::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A connection to one upstream host.
#[derive(Debug)]
pub(crate) struct UpstreamConn {
    pub stream: UpstreamStream,
    /// Bytes read from the upstream and not yet used.
    pub buf: BytesMut,
    pub upstream: UpstreamId,
    pub host: HostId,
    /// Taken from the pool: the upstream may have closed it meanwhile.
    pub reused: bool,
    idle_since: Instant,
}

impl UpstreamConn {
    pub(crate) fn new(stream: UpstreamStream, upstream: UpstreamId, host: HostId) -> Self {
        Self {
            stream,
            buf: BytesMut::new(),
            upstream,
            host,
            reused: false,
            idle_since: Instant::now(),
        }
    }
}

/// One `T` per host of every upstream, `[upstream][host]` flattened.
#[derive(Debug)]
pub(crate) struct PerHost<T> {
    slots: Vec<T>,
    /// Start of each upstream's hosts in `slots`.
    offsets: Vec<usize>,
}

impl<T: Default> PerHost<T> {
    pub(crate) fn new(upstreams: &[Upstream]) -> Self {
        let mut offsets = Vec::new();
        let mut slots = 0;
        for upstream in upstreams {
            offsets.push(slots);
            slots += upstream.hosts.len();
        }
        Self {
            slots: (0..slots).map(|_| T::default()).collect(),
            offsets,
        }
    }

    pub(crate) fn get(&self, upstream: UpstreamId, host: HostId) -> &T {
        &self.slots[self.offsets[upstream.index()] + host.index()]
    }
}

/// Idle connections of one worker, by upstream and host.
#[derive(Debug)]
pub(crate) struct Pool {
    idle: PerHost<Mutex<Vec<UpstreamConn>>>,
}

impl Pool {
    pub(crate) fn new(upstreams: &[Upstream]) -> Self {
        Self {
            idle: PerHost::new(upstreams),
        }
    }

    fn slot(&self, upstream: UpstreamId, host: HostId) -> &Mutex<Vec<UpstreamConn>> {
        self.idle.get(upstream, host)
    }

    /// The warmest idle connection to that host that is still usable.
    pub(crate) fn take(
        &self,
        config: &Upstream,
        metrics: &Shard,
        upstream: UpstreamId,
        host: HostId,
        now: Instant,
    ) -> Option<UpstreamConn> {
        let idle_timeout = config.idle_timeout;
        let mut idle = self.slot(upstream, host).lock().ok()?;
        while let Some(mut conn) = idle.pop() {
            metrics.pool_idle(upstream, -1);
            if now.saturating_duration_since(conn.idle_since) < idle_timeout
                && quiet(conn.stream.tcp())
            {
                conn.reused = true;
                return Some(conn);
            }
            metrics.upstream_open(upstream, -1);
        }
        None
    }

    /// Keeps `conn`, idle since `now`, for reuse unless the pool for its host is full.
    pub(crate) fn put(
        &self,
        config: &Upstream,
        metrics: &Shard,
        mut conn: UpstreamConn,
        now: Instant,
    ) {
        let upstream = conn.upstream;
        let max_idle = config.max_idle;
        if let Ok(mut idle) = self.slot(upstream, conn.host).lock() {
            if idle.len() < max_idle {
                conn.idle_since = now;
                idle.push(conn);
                metrics.pool_idle(upstream, 1);
                return;
            }
        }
        metrics.upstream_open(upstream, -1);
    }
}

/// An idle connection must have nothing to read: readable means the
/// upstream closed it (or broke the protocol). Asked of the reactor's
/// readiness state, so it costs no system call.
fn quiet(stream: &TcpStream) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    let mut ready = std::pin::pin!(stream.readable());
    matches!(ready.as_mut().poll(&mut cx), Poll::Pending)
}
