//! Sending a request upstream: which host (the balancer, then the next
//! healthy one after a failed connect, up to `retries`), which connection
//! (a pooled one, or a new one when a pooled one turned out stale), and
//! how failures are counted against hosts and answered (502, 503, 504).

use super::{upstream_h1::Stale, Failure, Next, SendFailed, Session, Worker};
use crate::config::Protocol;
use crate::ids::{HostId, RouteId, UpstreamId};
use crate::plan::Plan;
use crate::telemetry::UpstreamError;
use crate::upstream::connect;
use crate::upstream::connect::ConnectError;
use crate::upstream::pool::UpstreamConn;
use http1::Head;

use std::{net::SocketAddr, sync::Arc, time::Instant};

use bytes::Buf;
use http::{Method, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::warn;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Sends the request upstream (retrying where safe) and streams the answer back.
    pub(super) async fn forward(&mut self, head: &Head, route: RouteId) -> Result<Next, Failure> {
        let gateway = Arc::clone(&self.plan);
        let upstream_index = gateway.route(route).upstream;
        let upstream = &gateway.upstream(upstream_index);
        if upstream.protocol != Protocol::Http1 {
            return self.forward_h2(head, route).await;
        }
        self.build_request(head, upstream.host_header.as_ref())?;
        // The head is in `ubuf` now; the client's copy is not needed any more.
        self.rbuf.advance(head.len);
        let replayable = self.buffer_body(head)?;

        let mut attempts = 0;
        let mut host = upstream
            .balancer
            .pick(gateway.clock())
            .ok_or_else(|| no_healthy_host(&upstream.name))?;
        let mut fresh_only = false;
        loop {
            let mut conn = match self.connection(upstream_index, host, fresh_only).await {
                Ok(conn) => conn,
                Err(failure) => {
                    host = self.after_failure(upstream_index, host, &mut attempts, failure)?;
                    continue;
                }
            };
            let sent_at = Instant::now();
            let outcome = self
                .send_and_read_head(head, &mut conn, replayable, sent_at)
                .await;
            match outcome {
                Ok(response) => {
                    let answered = self.answered(upstream_index, host, sent_at);
                    return self.respond(head, route, conn, response, answered).await;
                }
                // A pooled connection the upstream had closed: try a new one.
                Err(Stale) if replay_after_stale(&head.method, replayable, fresh_only) => {
                    self.worker.metrics().upstream_open(upstream_index, -1);
                    fresh_only = true;
                }
                Err(Stale) => {
                    self.worker.metrics().upstream_open(upstream_index, -1);
                    return Err(self.upstream_failure(
                        upstream_index,
                        host,
                        UpstreamError::Broken,
                        "the upstream closed the connection before answering",
                        !replayable,
                    ));
                }
                Err(SendFailed(failure)) => {
                    self.worker.metrics().upstream_open(upstream_index, -1);
                    return Err(failure);
                }
            }
        }
    }

    /// The retry and failure rules for one upstream, for this request.
    pub(super) fn sender(&self, upstream: UpstreamId) -> Sender<'_> {
        Sender {
            plan: &self.plan,
            worker: &self.worker,
            upstream,
            peer: self.peer,
        }
    }

    /// Records a response head from `host` (a success, and its latency); when it came.
    pub(super) fn answered(&self, upstream: UpstreamId, host: HostId, sent_at: Instant) -> Instant {
        self.sender(upstream).answered(host, sent_at)
    }

    pub(super) fn after_failure(
        &self,
        upstream: UpstreamId,
        host: HostId,
        attempts: &mut u32,
        failure: Failure,
    ) -> Result<HostId, Failure> {
        self.sender(upstream).after_failure(host, attempts, failure)
    }

    pub(super) fn connect_failure(
        &self,
        upstream: UpstreamId,
        host: HostId,
        err: ConnectError,
    ) -> Failure {
        self.sender(upstream).connect_failure(host, err)
    }

    pub(super) fn upstream_failure(
        &self,
        upstream: UpstreamId,
        host: HostId,
        kind: UpstreamError,
        what: &str,
        body_unread: bool,
    ) -> Failure {
        self.sender(upstream).failure(host, kind, what, body_unread)
    }

    pub(super) fn broken(&self, conn: &UpstreamConn, what: &str, body_unread: bool) -> Failure {
        self.sender(conn.upstream)
            .broken(conn.host, what, body_unread)
    }

    /// A pooled connection to `host`, or a new one.
    pub(super) async fn connection(
        &mut self,
        upstream: UpstreamId,
        host: HostId,
        fresh_only: bool,
    ) -> Result<UpstreamConn, Failure> {
        // The time the request arrived is close enough for idle ages.
        let now = self.last_read.into_std();
        self.sender(upstream)
            .connection(host, fresh_only, now)
            .await
    }
}

/// One request's view of an upstream: picking hosts, counting failures
/// against them, and answering for them (the same for every client
/// protocol).
#[derive(Debug)]
pub(super) struct Sender<'a> {
    pub plan: &'a Plan,
    pub worker: &'a Worker,
    pub upstream: UpstreamId,
    /// The client, for the log.
    pub peer: SocketAddr,
}

impl Sender<'_> {
    /// The host the balancer picks, or 503.
    pub(super) fn pick(&self) -> Result<HostId, Failure> {
        let config = self.plan.upstream(self.upstream);
        config
            .balancer
            .pick(self.plan.clock())
            .ok_or_else(|| no_healthy_host(&config.name))
    }

    /// Records a response head from `host` (a success, and its latency); when it came.
    pub(super) fn answered(&self, host: HostId, sent_at: Instant) -> Instant {
        let answered = Instant::now();
        self.plan.upstream(self.upstream).balancer.success(host);
        self.worker
            .metrics()
            .upstream_latency(self.upstream, answered - sent_at);
        answered
    }

    /// After a failed connect to `host`: counts it against the host and
    /// picks the next one to try, or gives up with `failure`.
    pub(super) fn after_failure(
        &self,
        host: HostId,
        attempts: &mut u32,
        failure: Failure,
    ) -> Result<HostId, Failure> {
        let config = self.plan.upstream(self.upstream);
        *attempts += 1;
        let now = self.plan.clock();
        if config.balancer.failure(host, now) {
            warn!(upstream = %config.name, host = %config.host_name(host), backoff = ?config.balancer.backoff(), "host ejected after consecutive failures");
        }
        if *attempts > config.retries {
            return Err(failure);
        }
        config
            .balancer
            .pick_after(host, now)
            .ok_or_else(|| no_healthy_host(&config.name))
    }

    /// 502 for a connection that could not be opened, 504 when it timed out.
    pub(super) fn connect_failure(&self, host: HostId, err: ConnectError) -> Failure {
        let failure = self.failure(host, err.kind, &err.what, false);
        match err.kind {
            UpstreamError::Timeout => Failure {
                status: StatusCode::GATEWAY_TIMEOUT,
                ..failure
            },
            _ => failure,
        }
    }

    /// Counts and logs a failed exchange; the answer is 502.
    pub(super) fn failure(
        &self,
        host: HostId,
        kind: UpstreamError,
        what: &str,
        body_unread: bool,
    ) -> Failure {
        let config = self.plan.upstream(self.upstream);
        self.worker.metrics().upstream_error(self.upstream, kind);
        warn!(upstream = %config.name, host = %config.host_name(host), peer = %self.peer, "{what}");
        Failure {
            body_unread,
            ..Failure::new(
                StatusCode::BAD_GATEWAY,
                format!("upstream `{}`: {what}", config.name),
            )
        }
    }

    /// A failed exchange that also counts against the host's health.
    pub(super) fn broken(&self, host: HostId, what: &str, body_unread: bool) -> Failure {
        self.plan
            .upstream(self.upstream)
            .balancer
            .failure(host, self.plan.clock());
        self.failure(host, UpstreamError::Broken, what, body_unread)
    }

    /// 504 after `timeout` without a response head; counts against the host.
    pub(super) fn timed_out(&self, host: HostId, timeout: std::time::Duration) -> Failure {
        let mut failure = self.failure(
            host,
            UpstreamError::Timeout,
            &format!("no response within {timeout:?}"),
            false,
        );
        failure.status = StatusCode::GATEWAY_TIMEOUT;
        self.plan
            .upstream(self.upstream)
            .balancer
            .failure(host, self.plan.clock());
        failure
    }

    /// A pooled HTTP/1.1 connection to `host` (unless `fresh_only`), or a
    /// new one; `now` ages the pooled ones.
    pub(super) async fn connection(
        &self,
        host: HostId,
        fresh_only: bool,
        now: Instant,
    ) -> Result<UpstreamConn, Failure> {
        let config = self.plan.upstream(self.upstream);
        let metrics = self.worker.metrics();
        if !fresh_only {
            if let Some(conn) = self
                .worker
                .pool
                .take(config, metrics, self.upstream, host, now)
            {
                return Ok(conn);
            }
        }
        // Boxed: the cold path's TLS future would make every request's large.
        match Box::pin(connect::open(config, host, None)).await {
            Ok(stream) => {
                metrics.upstream_open(self.upstream, 1);
                Ok(UpstreamConn::new(stream, self.upstream, host))
            }
            Err(err) => Err(self.connect_failure(host, err)),
        }
    }
}

/// Whether a request whose pooled connection turned out closed before it
/// answered may go again on a new connection: only an idempotent one
/// whose body is all in hand, and only once.
pub(super) fn replay_after_stale(method: &Method, replayable: bool, fresh_only: bool) -> bool {
    replayable && is_idempotent(method) && !fresh_only
}

/// Whether a stream the upstream refused (REFUSED_STREAM, GOAWAY) may be
/// sent again: it was not processed, so any request may, as long as its
/// body can be sent again and retries are left.
pub(super) fn resend_after_refused(attempts: u32, retries: u32, body_in_hand: bool) -> bool {
    body_in_hand && attempts < retries
}

pub(super) fn no_healthy_host(upstream: &str) -> Failure {
    Failure::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("upstream `{upstream}` has no healthy host"),
    )
}

pub(super) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE | Method::TRACE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_idempotent_requests_with_their_body_in_hand_replay_once() {
        assert!(replay_after_stale(&Method::GET, true, false));
        assert!(replay_after_stale(&Method::PUT, true, false));
        assert!(!replay_after_stale(&Method::POST, true, false));
        assert!(
            !replay_after_stale(&Method::GET, false, false),
            "body streamed"
        );
        assert!(
            !replay_after_stale(&Method::GET, true, true),
            "already replayed"
        );
    }

    #[test]
    fn refused_streams_are_resent_within_the_retries() {
        assert!(resend_after_refused(0, 2, true));
        assert!(resend_after_refused(1, 2, true));
        assert!(!resend_after_refused(2, 2, true));
        assert!(!resend_after_refused(0, 2, false), "the body is gone");
        assert!(!resend_after_refused(0, 0, true), "no retries");
    }
}
