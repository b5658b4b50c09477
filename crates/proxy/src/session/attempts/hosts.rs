//! One request's view of an upstream's hosts, the same for every client
//! and upstream protocol: picking a host (and holding its in-flight count and
//! connection slot until the request is done), counting answers and
//! failures against hosts, the retry rules, and answering for them
//! (502, 503, 504).

use super::decide::{retry_host, Retries, Then, Tried};
use crate::ids::{HostId, UpstreamId};
use crate::plan::{Plan, RoutePolicy};
use crate::session::{Failure, Worker};
use crate::telemetry::UpstreamError;
use crate::upstream::balance::NoSlot;
use crate::upstream::connect::ConnectError;
use crate::upstream::h2_pool::{self, StreamLease};
use crate::upstream::pool::UpstreamConn;
use crate::upstream::queue::{self, NoConnection};
use crate::upstream::retry::connect_retry_host;
use crate::wire::head::Outgoing;

use std::{
    net::SocketAddr,
    sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed},
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use h2::client::SendRequest;
use http::StatusCode;
use tracing::warn;

/// A stream to open on a multiplexed HTTP/2 connection: the connection's
/// handle (taken by the attempt that opens it) and the stream's slot.
pub(crate) type H2Stream = (Option<SendRequest<Bytes>>, StreamLease);

/// No host held.
const NONE: usize = usize::MAX;

#[derive(Debug)]
pub(crate) struct Hosts<'a> {
    pub plan: &'a Plan,
    pub worker: &'a Worker,
    pub upstream: UpstreamId,
    /// The client, for the log and `hash: { key: client_ip }`.
    pub peer: SocketAddr,
    /// The address the client connected to, for an upstream's PROXY
    /// protocol header (`ClientOrigin::proxied`).
    pub local: Option<SocketAddr>,
    /// The request's SERVER span, when it is traced: each attempt gets a
    /// CLIENT span under it (`attempts::traced`).
    pub trace: Option<Box<super::traced::Traced>>,
    /// The route's own timeouts and retries, over the upstream's.
    pub route: Option<&'a RoutePolicy>,
    /// The host whose in-flight count and slot this request holds.
    held: AtomicUsize,
    /// The answer must carry the sticky cookie of the host it came from.
    pub(super) set_cookie: AtomicBool,
    /// The last connect failed while its host answered other requests.
    busy: AtomicBool,
}

impl Drop for Hosts<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

impl<'a> Hosts<'a> {
    pub(crate) fn new(
        plan: &'a Plan,
        worker: &'a Worker,
        upstream: UpstreamId,
        peer: SocketAddr,
    ) -> Self {
        Self {
            plan,
            worker,
            upstream,
            peer,
            local: None,
            trace: None,
            route: None,
            held: AtomicUsize::new(NONE),
            set_cookie: AtomicBool::new(false),
            busy: AtomicBool::new(false),
        }
    }

    pub(super) fn config(&self) -> &'a crate::upstream::Upstream {
        self.plan.upstream(self.upstream)
    }

    /// The host the balancer picks for `request` (held until this hosts
    /// is dropped), or 503.
    pub(crate) async fn pick(&self, request: &Outgoing<'_>) -> Result<HostId, Failure> {
        self.pick_lazily(|| *request).await
    }

    /// [`Hosts::pick`] with the request made only if the balancer reads
    /// it (hash keys, cookies).
    pub(crate) async fn pick_lazily<'r>(
        &self,
        request: impl FnOnce() -> Outgoing<'r>,
    ) -> Result<HostId, Failure> {
        let host = self.choose(request)?;
        if self.waits() {
            self.hold(host).await?;
        }
        Ok(host)
    }

    /// The balancer's host, counted in flight when the policy reads that;
    /// when [`Hosts::waits`], [`Hosts::hold`] must take its slot next.
    /// Not async: the common pick (round robin, no limits) costs no
    /// future.
    pub(crate) fn choose<'r>(
        &self,
        request: impl FnOnce() -> Outgoing<'r>,
    ) -> Result<HostId, Failure> {
        let config = self.config();
        let now = self.plan.clock();
        config.retry.request(now);
        let pick = config
            .balancer
            .pick(|| (request(), self.peer.ip()), now)
            .ok_or_else(no_healthy_host)?;
        if pick.set_cookie {
            self.set_cookie.store(true, Relaxed);
        }
        if !self.waits() && config.balancer.tracks_in_flight() {
            config.balancer.begin(pick.host);
            self.held.store(pick.host.index(), Relaxed);
        }
        Ok(pick.host)
    }

    /// Whether a host's connection limit may make the request wait.
    pub(crate) fn waits(&self) -> bool {
        self.config().balancer.limits().is_some()
    }

    /// Counts the request in on `host` (in-flight, a connection slot),
    /// after counting it out of the host it held.
    pub(crate) async fn hold(&self, host: HostId) -> Result<(), Failure> {
        self.release();
        let balancer = &self.config().balancer;
        if let Some(limits) = balancer.limits() {
            let wait = self.config().timeouts.queue;
            if let Err(no) = limits.acquire(host, wait).await {
                let why = match no {
                    NoSlot::Full => "at max_connections and max_pending".to_string(),
                    NoSlot::TimedOut => format!("no slot (max_connections) within {wait:?}"),
                };
                return Err(self.unavailable(host, &why));
            }
        } else if !balancer.tracks_in_flight() {
            return Ok(());
        }
        if balancer.tracks_in_flight() {
            balancer.begin(host);
        }
        self.held.store(host.index(), Relaxed);
        Ok(())
    }

    fn release(&self) {
        // A plain load first: most requests hold nothing (round robin
        // without limits), and a swap is a locked instruction.
        if self.held.load(Relaxed) == NONE {
            return;
        }
        let held = self.held.swap(NONE, Relaxed);
        if held == NONE {
            return;
        }
        let balancer = &self.config().balancer;
        let host = HostId::new(held);
        if balancer.tracks_in_flight() {
            balancer.end(host);
        }
        if let Some(limits) = balancer.limits() {
            limits.release(host);
        }
    }

    /// Records a response head from `host` with `status`: a 5xx counts
    /// against the host's health, anything else is a success and its
    /// latency is learned. Returns when it came.
    pub(crate) fn answered(&self, host: HostId, sent_at: Instant, status: StatusCode) -> Instant {
        let answered = Instant::now();
        let elapsed = answered - sent_at;
        let config = self.config();
        if status.is_server_error() {
            self.count_failure(host);
        } else {
            config.balancer.success(host, elapsed, || self.plan.clock());
        }
        let metrics = self.worker.metrics();
        metrics.upstream_latency(self.upstream, elapsed);
        config.balancer.answered(host, self.worker.index);
        answered
    }

    /// What follows an attempt that came to `tried`, as `retries`
    /// decides (`attempts::decide`); not async, so that an answer that
    /// stands costs no future.
    #[inline]
    pub(crate) fn decide(&self, tried: Tried, retries: &mut Retries) -> Then {
        retries.decide(tried, self.retry_policy(), || self.plan.clock(), || false)
    }

    /// The host of the attempt `then` decided after one on `host`: the
    /// same host for a replay or a resend; for a retry, after a jittered
    /// backoff, the next host in, else the same one while it is in.
    /// `None`: there is none, and the outcome stands.
    pub(crate) async fn next_host(
        &self,
        host: HostId,
        then: Then,
        retries: &Retries,
    ) -> Option<HostId> {
        let config = self.config();
        match then {
            Then::Answer => None,
            Then::Replay | Then::Resend => Some(host),
            Then::Retry(attempt) => {
                let next = || {
                    let now = self.plan.clock();
                    retry_host(host, attempt, config.balancer.pick_after(host, now), || {
                        config.balancer.healthy(now)
                    })
                };
                self.retry_to(next, retries).await
            }
        }
    }

    /// [`Hosts::decide`] then [`Hosts::next_host`].
    pub(crate) async fn again(
        &self,
        host: HostId,
        tried: Tried,
        retries: &mut Retries,
    ) -> Option<HostId> {
        let then = self.decide(tried, retries);
        self.next_host(host, then, retries).await
    }

    /// A retry just decided: after its backoff, to the host `next` names
    /// then, holding it.
    async fn retry_to(
        &self,
        next: impl FnOnce() -> Option<HostId>,
        retries: &Retries,
    ) -> Option<HostId> {
        tokio::time::sleep(retries.backoff(self.retry_policy())).await;
        let next = next()?;
        self.hold(next).await.ok()?;
        Some(next)
    }

    /// After a failed connect to `host`: counts it against the host and
    /// picks the next one to try (the same one after a timeout, when it is
    /// the only one in), or gives up with `failure`.
    pub(crate) async fn after_failure(
        &self,
        host: HostId,
        retries: &mut Retries,
        failure: Failure,
    ) -> Result<HostId, Failure> {
        let config = self.config();
        // A 503: no connection within `timeouts.queue`. The host is busy,
        // not at fault, and another attempt would queue again.
        if failure.status == StatusCode::SERVICE_UNAVAILABLE {
            return Err(failure);
        }
        // A 502 is a refused or failed connection; a 504 a connect timeout.
        let timed_out = failure.status == StatusCode::GATEWAY_TIMEOUT;
        if timed_out && self.busy.load(Relaxed) {
            // It answered other requests meanwhile: saturated (a full
            // accept queue drops SYNs), not gone. No step toward ejection.
            config.balancer.failed(host, self.worker.index);
        } else {
            self.count(host, !timed_out);
        }
        let next = || {
            let now = self.plan.clock();
            let next = config.balancer.pick_after(host, now);
            connect_retry_host(host, timed_out, next, || config.balancer.is_in(host, now))
        };
        let now = || self.plan.clock();
        match retries.decide(Tried::NoConnection, self.retry_policy(), now, || {
            next().is_some()
        }) {
            Then::Retry(_) => self.retry_to(next, retries).await.ok_or(failure),
            _ => Err(failure),
        }
    }

    /// Counts a soft failure against `host`'s health (and in its metrics).
    pub(crate) fn count_failure(&self, host: HostId) {
        self.count(host, false);
    }

    /// `hard`: a refused connection, which ejects even past the cap.
    fn count(&self, host: HostId, hard: bool) {
        let now = self.plan.clock();
        let config = self.config();
        config.balancer.failed(host, self.worker.index);
        if config.balancer.failure(host, hard, now) {
            warn!(upstream = %config.name, host = %config.host_name(host), backoff = ?config.balancer.backoff(), "host ejected after consecutive failures");
        }
    }

    /// 502 for a connection that could not be opened, 504 when it timed out.
    pub(crate) fn connect_failure(&self, host: HostId, err: ConnectError) -> Failure {
        let failure = self.failure(host, err.kind, &err.what, false);
        match err.kind {
            UpstreamError::Timeout => Failure {
                status: StatusCode::GATEWAY_TIMEOUT,
                ..failure
            },
            _ => failure,
        }
    }

    /// Counts and logs a failed exchange; the answer is 502. What went
    /// wrong (`what`: names, addresses, errnos, a certificate's names) goes
    /// to the log only: the client learns the kind of failure, never an
    /// internal name (the correlation id, if the route sets one, ties the
    /// two together).
    pub(crate) fn failure(
        &self,
        host: HostId,
        kind: UpstreamError,
        what: &str,
        body_unread: bool,
    ) -> Failure {
        let config = self.config();
        self.worker.metrics().upstream_error(self.upstream, kind);
        warn!(upstream = %config.name, host = %config.host_name(host), peer = %self.peer, "{what}");
        let detail = match kind {
            UpstreamError::Connect => "the upstream could not be reached",
            UpstreamError::Broken => "the upstream failed to answer",
            UpstreamError::Timeout => "no response within the upstream's timeout",
        };
        Failure {
            body_unread,
            ..Failure::new(StatusCode::BAD_GATEWAY, detail)
        }
    }

    /// A failed exchange that also counts against the host's health.
    pub(crate) fn broken(&self, host: HostId, what: &str, body_unread: bool) -> Failure {
        self.count_failure(host);
        self.failure(host, UpstreamError::Broken, what, body_unread)
    }

    /// 504 after `timeout` without a response head; counts against the host.
    pub(crate) fn timed_out(&self, host: HostId, timeout: Duration) -> Failure {
        let mut failure = self.failure(
            host,
            UpstreamError::Timeout,
            &format!("no response within {timeout:?}"),
            false,
        );
        failure.status = StatusCode::GATEWAY_TIMEOUT;
        self.count_failure(host);
        failure
    }

    /// 503 for a request that found no connection to `host` free (`why`
    /// goes to the log only, as every internal detail).
    fn unavailable(&self, host: HostId, why: &str) -> Failure {
        let config = self.config();
        warn!(upstream = %config.name, host = %config.host_name(host), peer = %self.peer, "no connection: {why}");
        Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "every connection to the upstream is in use",
        )
    }

    /// A stream on a pooled multiplexed HTTP/2 connection to `host` with
    /// room for one, if any: not async, so that the common case costs no
    /// future.
    #[inline]
    pub(crate) fn pooled_stream(&self, host: HostId) -> Option<H2Stream> {
        let (send, lease) = self.worker.h2_pool.take(self.config(), host)?;
        Some((Some(send), lease))
    }

    /// A stream on a multiplexed HTTP/2 connection to `host` (pooled, or
    /// a new one; its failure counted as a connect failure).
    pub(crate) async fn stream(&self, host: HostId) -> Result<H2Stream, Failure> {
        let worker = self.worker;
        let counted = h2_pool::Counted {
            metrics: Arc::clone(&worker.metrics),
            shard: worker.index,
        };
        let max_header_list = u32::try_from(self.plan.limits.max_head).unwrap_or(u32::MAX);
        let (pool, config) = (&worker.h2_pool, self.config());
        let taken = h2_pool::stream(pool, config, self.upstream, host, max_header_list, &counted);
        let (send, lease) = taken.await.map_err(|err| self.connect_failure(host, err))?;
        Ok((Some(send), lease))
    }

    /// A pooled HTTP/1.1 connection to `host` (unless `fresh_only`), or a
    /// new one (`upstream::queue`); `now` ages the pooled ones.
    pub(crate) async fn connection(
        &self,
        host: HostId,
        fresh_only: bool,
        now: Instant,
    ) -> Result<UpstreamConn, Failure> {
        if let Some(conn) = self.pooled(host, fresh_only, now) {
            return Ok(conn);
        }
        self.opened(host, fresh_only).await
    }

    /// An idle pooled HTTP/1.1 connection to `host` (unless `fresh_only`).
    #[inline]
    pub(crate) fn pooled(
        &self,
        host: HostId,
        fresh_only: bool,
        now: Instant,
    ) -> Option<UpstreamConn> {
        if fresh_only {
            return None;
        }
        let (config, metrics) = (self.config(), self.worker.metrics());
        let client = self.client().map(|(client, _)| client);
        self.worker
            .pool
            .take(config, metrics, (self.upstream, host), client, now)
    }

    /// A new HTTP/1.1 connection to `host`, or one another request gives
    /// back while this one waits its turn to open one (`max_connecting`).
    pub(crate) async fn opened(
        &self,
        host: HostId,
        fresh_only: bool,
    ) -> Result<UpstreamConn, Failure> {
        let config = self.config();
        let metrics = self.worker.metrics();
        // Boxed: the cold path's futures (TLS, the queue) would make every request's large.
        let pool = &self.worker.pool;
        let (at, client) = ((self.upstream, host), self.client());
        let queued = queue::connection(config, (pool, metrics), at, client, fresh_only);
        Box::pin(queued).await.map_err(|no| match no {
            NoConnection::Connect { err, busy } => {
                self.busy.store(busy, Relaxed);
                self.connect_failure(host, err)
            }
            NoConnection::Queue => {
                let wait = config.timeouts.queue;
                let why = format!("none free within {wait:?} (timeouts.queue, max_connecting)");
                self.unavailable(host, &why)
            }
        })
    }
}

pub(crate) fn no_healthy_host() -> Failure {
    Failure::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "the upstream has no healthy host",
    )
}
