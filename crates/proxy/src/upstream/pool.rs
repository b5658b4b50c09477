//! Keep-alive connections to upstream hosts, one pool per worker (so the
//! lock below is never contended: only its worker's tasks take it, on one
//! thread). The most recently used connection is reused first, so idle
//! ones age out and the warm ones stay warm.
//!
//! A host's pools hang off the host in its [`Upstream`] ([`HostConns`]),
//! not off the worker: a reload that keeps the host hands the same
//! `HostConns` to the new plan, so requests on either plan share one
//! pool, and a host a reload removes is retired (its idle connections
//! closed, the ones in use closed when their request ends).

use crate::ids::{HostId, UpstreamId};
use std::{
    future::Future,
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Mutex,
    },
    task::{Context, Poll, Waker},
    time::Instant,
};

use bytes::BytesMut;
use tokio::{
    net::TcpStream,
    sync::{futures::Notified, Notify},
};

use super::{connect::UpstreamStream, Upstream};
use crate::telemetry::Shard;

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
    /// The client its PROXY protocol header named: it serves no other.
    pub proxied_for: Option<SocketAddr>,
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
            proxied_for: None,
            idle_since: Instant::now(),
        }
    }
}

/// One host's connections in one worker, on cache lines of their own so
/// that workers taking connections to the same host share none.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct WorkerConns {
    /// Idle HTTP/1.1 connections.
    pub(super) idle: Mutex<Vec<UpstreamConn>>,
    /// Multiplexed HTTP/2 connections.
    pub(super) h2: Mutex<Vec<super::h2_pool::H2Conn>>,
    /// Requests of this worker waiting for an idle HTTP/1.1 connection
    /// ([`Awaiting`]), and their wake-up when one is given back.
    waiting: AtomicU32,
    given_back: Notify,
}

/// The connections of one host, one set per worker; shared by every plan
/// that keeps the host.
#[derive(Debug)]
pub(crate) struct HostConns {
    workers: Box<[WorkerConns]>,
    /// The host left the configuration: nothing new is pooled.
    retired: AtomicBool,
}

impl HostConns {
    pub(crate) fn new(workers: usize) -> Self {
        Self {
            workers: (0..workers.max(1))
                .map(|_| WorkerConns::default())
                .collect(),
            retired: AtomicBool::new(false),
        }
    }

    /// `worker`'s connections (`worker` is below the count it was made
    /// for; the first worker's otherwise, with no division on the hot path).
    pub(super) fn worker(&self, worker: usize) -> &WorkerConns {
        self.workers.get(worker).unwrap_or(&self.workers[0])
    }

    pub(super) fn retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// Takes the host out of service: no connection is pooled from now on,
    /// and the idle ones are closed (HTTP/2 ones when their last stream
    /// ends). `upstream` counts them in `shard(worker)`.
    pub(crate) fn retire<'a>(&self, upstream: UpstreamId, shard: impl Fn(usize) -> &'a Shard) {
        self.retired.store(true, Ordering::Relaxed);
        for (worker, conns) in self.workers.iter().enumerate() {
            let idle = conns.idle.lock().map(|mut idle| std::mem::take(&mut *idle));
            for _ in idle.unwrap_or_default() {
                shard(worker).pool_idle(upstream, -1);
                shard(worker).upstream_open(upstream, -1);
            }
            if let Ok(mut h2) = conns.h2.lock() {
                h2.clear();
            }
        }
    }
}

/// One worker's handle on the pools of every host: the pools themselves
/// are in the plan's upstreams ([`HostConns`]).
#[derive(Debug)]
pub(crate) struct Pool {
    worker: usize,
}

impl Pool {
    pub(crate) fn new(worker: usize) -> Self {
        Self { worker }
    }

    fn slot<'a>(&self, config: &'a Upstream, host: HostId) -> &'a HostConns {
        &config.conns[host.index()]
    }

    /// The warmest idle connection to that host that is still usable; to
    /// an upstream with `proxy_protocol`, one opened for `client` only.
    /// None while requests of this worker wait for one to be given back
    /// ([`Pool::awaiting`]): they are served first, in the order they came
    /// (a newcomer taking what was given back would let the same clients
    /// be served again and again while the waiting ones starve).
    #[inline]
    pub(crate) fn take(
        &self,
        config: &Upstream,
        metrics: &Shard,
        at: (UpstreamId, HostId),
        client: Option<SocketAddr>,
        now: Instant,
    ) -> Option<UpstreamConn> {
        let conns = self.slot(config, at.1).worker(self.worker);
        if conns.waiting.load(Ordering::Relaxed) != 0 {
            return None;
        }
        self.take_idle(config, metrics, at, client, now)
    }

    /// [`Pool::take`] for a request that waits its turn ([`Pool::awaiting`]).
    pub(crate) fn take_waited(
        &self,
        config: &Upstream,
        metrics: &Shard,
        at: (UpstreamId, HostId),
        client: Option<SocketAddr>,
        now: Instant,
    ) -> Option<UpstreamConn> {
        self.take_idle(config, metrics, at, client, now)
    }

    fn take_idle(
        &self,
        config: &Upstream,
        metrics: &Shard,
        (upstream, host): (UpstreamId, HostId),
        client: Option<SocketAddr>,
        now: Instant,
    ) -> Option<UpstreamConn> {
        let idle_timeout = config.idle_timeout;
        let mut idle = self
            .slot(config, host)
            .worker(self.worker)
            .idle
            .lock()
            .ok()?;
        let keyed = config.proxy_protocol.is_some();
        loop {
            let at = match keyed {
                false => idle.len().checked_sub(1)?,
                true => idle.iter().rposition(|conn| conn.proxied_for == client)?,
            };
            let mut conn = idle.remove(at);
            metrics.pool_idle(upstream, -1);
            if now.saturating_duration_since(conn.idle_since) < idle_timeout
                && quiet(conn.stream.tcp())
            {
                conn.reused = true;
                // Pooled under another plan, where the ids may differ.
                conn.upstream = upstream;
                conn.host = host;
                conn.buf = http1::conn::read_buffer();
                return Some(conn);
            }
            metrics.upstream_open(upstream, -1);
        }
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
        let host = self.slot(config, conn.host);
        if let Ok(mut idle) = host.worker(self.worker).idle.lock() {
            // Connections keyed by client are taken by their client only:
            // when they fill the pool, the oldest makes room.
            if idle.len() >= max_idle && max_idle > 0 && conn.proxied_for.is_some() {
                idle.remove(0);
                metrics.pool_idle(upstream, -1);
                metrics.upstream_open(upstream, -1);
            }
            if idle.len() < max_idle && !host.retired() {
                // An idle connection keeps no buffer (see `http1::conn`).
                http1::conn::spare_read_buffer(&mut conn.buf);
                conn.idle_since = now;
                idle.push(conn);
                metrics.pool_idle(upstream, 1);
                let conns = host.worker(self.worker);
                if conns.waiting.load(Ordering::Relaxed) != 0 {
                    conns.given_back.notify_one();
                }
                return;
            }
        }
        metrics.upstream_open(upstream, -1);
    }
}

/// A request waiting for a connection to one host to be given back to
/// its worker's pool (counted while it waits, so that giving one back
/// costs a notification only when someone waits).
#[derive(Debug)]
pub(crate) struct Awaiting<'a> {
    conns: &'a WorkerConns,
}

impl Pool {
    /// Counts the caller in as waiting for a connection to `host` to come
    /// back; look in the pool after this, then wait on
    /// [`Awaiting::given_back`], so that none is missed.
    pub(crate) fn awaiting<'a>(&self, config: &'a Upstream, host: HostId) -> Awaiting<'a> {
        let conns = self.slot(config, host).worker(self.worker);
        conns.waiting.fetch_add(1, Ordering::Relaxed);
        Awaiting { conns }
    }
}

impl Awaiting<'_> {
    /// Completes when a connection may have come back (look again: another
    /// request may take it first).
    pub(crate) fn given_back(&self) -> Notified<'_> {
        self.conns.given_back.notified()
    }
}

impl Drop for Awaiting<'_> {
    fn drop(&mut self) {
        self.conns.waiting.fetch_sub(1, Ordering::Relaxed);
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
