//! Sending a request upstream: which host (the balancer, then the next
//! healthy one after a failed connect, up to `retries`), which connection
//! (a pooled one, or a new one when a pooled one turned out stale), and
//! how failures are counted against hosts and answered (502, 503, 504).

use super::{upstream_h1::Stale, Failure, Next, SendFailed, Session};
use crate::config::Protocol;
use crate::ids::{HostId, RouteId, UpstreamId};
use crate::telemetry::UpstreamError;
use crate::upstream::connect;
use crate::upstream::connect::ConnectError;
use crate::upstream::pool::UpstreamConn;
use http1::Head;

use std::{sync::Arc, time::Instant};

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
                Err(Stale) if replayable && is_idempotent(&head.method) && !fresh_only => {
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

    /// Records a response head from `host` (a success, and its latency); when it came.
    pub(super) fn answered(&self, upstream: UpstreamId, host: HostId, sent_at: Instant) -> Instant {
        let answered = Instant::now();
        self.plan.upstream(upstream).balancer.success(host);
        self.worker
            .metrics()
            .upstream_latency(upstream, answered - sent_at);
        answered
    }

    /// After a failed connect to `host`: counts it against the host and
    /// picks the next one to try, or gives up with `failure`.
    pub(super) fn after_failure(
        &self,
        upstream: UpstreamId,
        host: HostId,
        attempts: &mut u32,
        failure: Failure,
    ) -> Result<HostId, Failure> {
        let gateway = &self.plan;
        let config = &gateway.upstream(upstream);
        *attempts += 1;
        let now = gateway.clock();
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
    pub(super) fn connect_failure(
        &self,
        upstream: UpstreamId,
        host: HostId,
        err: ConnectError,
    ) -> Failure {
        let failure = self.upstream_failure(upstream, host, err.kind, &err.what, false);
        match err.kind {
            UpstreamError::Timeout => Failure {
                status: StatusCode::GATEWAY_TIMEOUT,
                ..failure
            },
            _ => failure,
        }
    }

    /// Counts and logs a failed exchange; the answer is 502.
    pub(super) fn upstream_failure(
        &self,
        upstream: UpstreamId,
        host: HostId,
        kind: UpstreamError,
        what: &str,
        body_unread: bool,
    ) -> Failure {
        let config = &self.plan.upstream(upstream);
        self.worker.metrics().upstream_error(upstream, kind);
        warn!(upstream = %config.name, host = %config.host_name(host), peer = %self.peer, "{what}");
        Failure {
            body_unread,
            ..Failure::new(
                StatusCode::BAD_GATEWAY,
                format!("upstream `{}`: {what}", config.name),
            )
        }
    }

    pub(super) fn broken(&self, conn: &UpstreamConn, what: &str, body_unread: bool) -> Failure {
        let gateway = &self.plan;
        gateway
            .upstream(conn.upstream)
            .balancer
            .failure(conn.host, gateway.clock());
        self.upstream_failure(
            conn.upstream,
            conn.host,
            UpstreamError::Broken,
            what,
            body_unread,
        )
    }

    /// A pooled connection to `host`, or a new one.
    pub(super) async fn connection(
        &mut self,
        upstream: UpstreamId,
        host: HostId,
        fresh_only: bool,
    ) -> Result<UpstreamConn, Failure> {
        let worker = Arc::clone(&self.worker);
        if !fresh_only {
            // The time the request arrived is close enough for idle ages.
            let now = self.last_read.into_std();
            if let Some(conn) = worker.pool.take(
                self.plan.upstream(upstream),
                worker.metrics(),
                upstream,
                host,
                now,
            ) {
                return Ok(conn);
            }
        }
        let config = &self.plan.upstream(upstream);
        match connect::open(config, host, None).await {
            Ok(stream) => {
                worker.metrics().upstream_open(upstream, 1);
                Ok(UpstreamConn::new(stream, upstream, host))
            }
            Err(err) => Err(self.connect_failure(upstream, host, err)),
        }
    }
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
