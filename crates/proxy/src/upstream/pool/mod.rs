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
    collections::VecDeque,
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
use tokio::{net::TcpStream, sync::oneshot};

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
    /// Idle HTTP/1.1 connections, and the requests waiting for one.
    pub(super) idle: Mutex<Idle>,
    /// Multiplexed HTTP/2 connections.
    pub(super) h2: Mutex<Vec<super::h2_pool::H2Conn>>,
    /// How many requests wait (`Idle::waiting`), read without the lock.
    waiting: AtomicU32,
}

/// A worker's idle connections to a host, and its requests waiting for
/// one to be given back.
#[derive(Debug, Default)]
pub(super) struct Idle {
    conns: Vec<UpstreamConn>,
    /// Oldest first: a connection given back goes to the first one it
    /// may serve (to an upstream with `proxy_protocol`, the first of its
    /// client), straight into its hands.
    waiting: VecDeque<Waiter>,
    /// The id of the next request to wait.
    next: u64,
}

/// A request waiting for a connection to be given back.
#[derive(Debug)]
struct Waiter {
    id: u64,
    /// Its client, which a keyed connection must have been opened for.
    client: Option<SocketAddr>,
    hand: oneshot::Sender<UpstreamConn>,
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
            let idle = conns.idle.lock().map(|mut idle| {
                // Waiting requests wait on for a slot to open one.
                idle.waiting.clear();
                conns.waiting.store(0, Ordering::Relaxed);
                std::mem::take(&mut idle.conns)
            });
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
    /// ([`Pool::wait`]): they are served first, in the order they came.
    /// A newcomer taking what was given back would let the clients
    /// served last be served again while the waiting ones starve (issue
    /// 52: at 9,936 clients, some had 16 answers in 2 s and others 1).
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
        // A connection keyed by client serves that client only: no one
        // else waits for it.
        let keyed = config.proxy_protocol.is_some();
        if !keyed && conns.waiting.load(Ordering::Relaxed) != 0 {
            return None;
        }
        let mut idle = conns.idle.lock().ok()?;
        take_idle(&mut idle, config, metrics, at, client, now)
    }

    /// An idle connection as [`Pool::take`] gives, or else a place in the
    /// line of requests waiting for one to be given back: first come,
    /// first served.
    pub(crate) fn wait<'a>(
        &'a self,
        config: &'a Upstream,
        metrics: &'a Shard,
        at: (UpstreamId, HostId),
        client: Option<SocketAddr>,
        now: Instant,
    ) -> Result<UpstreamConn, Waiting<'a>> {
        let conns = self.slot(config, at.1).worker(self.worker);
        let (hand, given);
        let id = match conns.idle.lock() {
            Ok(mut idle) => {
                if idle.waiting.is_empty() || config.proxy_protocol.is_some() {
                    if let Some(conn) = take_idle(&mut idle, config, metrics, at, client, now) {
                        return Ok(conn);
                    }
                }
                // The channel only for a request that does wait.
                (hand, given) = oneshot::channel();
                let id = idle.next;
                idle.next += 1;
                idle.waiting.push_back(Waiter { id, client, hand });
                conns
                    .waiting
                    .store(idle.waiting.len() as u32, Ordering::Relaxed);
                id
            }
            // Poisoned: never served from the pool; a slot opens one.
            Err(_) => {
                (_, given) = oneshot::channel();
                u64::MAX
            }
        };
        Err(Waiting {
            pool: self,
            config,
            metrics,
            at,
            id,
            given,
        })
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
        let conns = host.worker(self.worker);
        if let Ok(mut idle) = conns.idle.lock() {
            if host.retired() {
                drop(idle);
                metrics.upstream_open(upstream, -1);
                return;
            }
            conn.idle_since = now;
            // `max_idle: 0` keeps none for reuse, handed over or not.
            if max_idle > 0 && conns.waiting.load(Ordering::Relaxed) != 0 {
                let keyed = config.proxy_protocol.is_some();
                let kept = hand_over(&mut idle, conn, keyed);
                let left = idle.waiting.len() as u32;
                conns.waiting.store(left, Ordering::Relaxed);
                match kept {
                    None => return,
                    Some(kept) => conn = kept,
                }
            }
            let idle = &mut idle.conns;
            // Connections keyed by client are taken by their client only:
            // when they fill the pool, the oldest makes room.
            if idle.len() >= max_idle && max_idle > 0 && conn.proxied_for.is_some() {
                idle.remove(0);
                metrics.pool_idle(upstream, -1);
                metrics.upstream_open(upstream, -1);
            }
            if idle.len() < max_idle {
                // An idle connection keeps no buffer (see `http1::conn`).
                http1::conn::spare_read_buffer(&mut conn.buf);
                idle.push(conn);
                metrics.pool_idle(upstream, 1);
                return;
            }
        }
        metrics.upstream_open(upstream, -1);
    }
}

/// `conn` into the hands of the first waiting request it may serve
/// (None then); `conn` back when there is none.
fn hand_over(idle: &mut Idle, mut conn: UpstreamConn, keyed: bool) -> Option<UpstreamConn> {
    let mut at = 0;
    while at < idle.waiting.len() {
        let waiter = &idle.waiting[at];
        if keyed && waiter.client != conn.proxied_for {
            at += 1;
            continue;
        }
        let Some(waiter) = idle.waiting.remove(at) else {
            break;
        };
        // A request that stopped waiting without leaving the line (it
        // leaves on drop, so only a race with it) passes it on.
        match waiter.hand.send(conn) {
            Ok(()) => return None,
            Err(back) => conn = back,
        }
    }
    Some(conn)
}

/// The warmest usable connection in `idle` (for `client` when keyed).
fn take_idle(
    idle: &mut Idle,
    config: &Upstream,
    metrics: &Shard,
    (upstream, host): (UpstreamId, HostId),
    client: Option<SocketAddr>,
    now: Instant,
) -> Option<UpstreamConn> {
    let idle_timeout = config.idle_timeout;
    let keyed = config.proxy_protocol.is_some();
    let idle = &mut idle.conns;
    loop {
        let at = match keyed {
            false => idle.len().checked_sub(1)?,
            true => idle.iter().rposition(|conn| conn.proxied_for == client)?,
        };
        let conn = idle.remove(at);
        metrics.pool_idle(upstream, -1);
        if now.saturating_duration_since(conn.idle_since) < idle_timeout && quiet(conn.stream.tcp())
        {
            return Some(reused(conn, upstream, host));
        }
        metrics.upstream_open(upstream, -1);
    }
}

/// A pooled connection, for a request on `upstream` and `host`.
fn reused(mut conn: UpstreamConn, upstream: UpstreamId, host: HostId) -> UpstreamConn {
    conn.reused = true;
    // Pooled under another plan, where the ids may differ.
    conn.upstream = upstream;
    conn.host = host;
    conn.buf = http1::conn::read_buffer();
    conn
}

/// A request's place in the line for a connection to one host given
/// back to its worker's pool ([`Pool::wait`]). Dropped, it leaves the
/// line, and a connection handed to it meanwhile goes back to the pool
/// (to the next in line).
#[derive(Debug)]
pub(crate) struct Waiting<'a> {
    pool: &'a Pool,
    config: &'a Upstream,
    metrics: &'a Shard,
    at: (UpstreamId, HostId),
    id: u64,
    given: oneshot::Receiver<UpstreamConn>,
}

impl Waiting<'_> {
    /// The connection given back to this request; pending for ever when
    /// none can be (the host was retired).
    pub(crate) async fn given_back(&mut self) -> UpstreamConn {
        match (&mut self.given).await {
            Ok(conn) => reused(conn, self.at.0, self.at.1),
            Err(_) => std::future::pending().await,
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let conns = self
            .pool
            .slot(self.config, self.at.1)
            .worker(self.pool.worker);
        if let Ok(mut idle) = conns.idle.lock() {
            if let Some(at) = idle.waiting.iter().position(|w| w.id == self.id) {
                idle.waiting.remove(at);
                conns
                    .waiting
                    .store(idle.waiting.len() as u32, Ordering::Relaxed);
            }
        }
        self.given.close();
        if let Ok(conn) = self.given.try_recv() {
            self.pool
                .put(self.config, self.metrics, conn, Instant::now());
        }
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

#[cfg(test)]
mod tests;
