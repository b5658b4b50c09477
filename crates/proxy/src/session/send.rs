//! Sending a request upstream: which host (the balancer, then another
//! after a failed attempt, within `retries`, `retry_on` and the budget),
//! which connection (a pooled one, or a new one when a pooled one turned
//! out stale), and how failures are answered (502, 503, 504).

use super::exchange::decide::{Retries, Then, Tried};
use super::{upstream_h1::Reset, upstream_h1::Stale, Failure, Next, SendFailed, Session};
use crate::config::Protocol;
use crate::ids::{HostId, RouteId, UpstreamId};
use crate::telemetry::UpstreamError;
use crate::upstream::pool::UpstreamConn;
use crate::wire::fields::Fields;
use http1::Head;

use std::{sync::Arc, time::Instant};

use bytes::Buf;
use tokio::io::{AsyncRead, AsyncWrite};

pub(super) use super::sender::Sender;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Sends the request upstream (retrying where safe) and streams the answer back.
    pub(super) async fn forward(&mut self, head: &Head, route: RouteId) -> Result<Next, Failure> {
        let plan = Arc::clone(&self.plan);
        let worker = Arc::clone(&self.worker);
        let upstream_index = plan.route(route).upstream;
        let upstream = &plan.upstream(upstream_index);
        if upstream.protocol != Protocol::Http1 {
            return self.forward_h2(head, route).await;
        }
        let sender = Sender::new(&plan, &worker, upstream_index, self.peer);
        // Picked while the client's head is at hand (hash keys, cookies);
        // a 503 is answered once the head is consumed.
        let (rbuf, fields) = (&self.conn.rbuf, &self.fields);
        let picked = sender.choose(|| super::upstream_h1::outgoing(rbuf, head, fields));
        self.build_request(head, upstream.host_header.as_ref())?;
        // The head is in `ubuf` now; the client's copy is not needed any more.
        self.conn.rbuf.advance(head.len);
        let replayable = self.buffer_body(head)?;
        let mut host = picked?;
        if sender.waits() {
            self.unless_client_gone(sender.hold(host)).await??;
        }
        let mut retries = Retries::new(upstream.retries, &head.method, replayable);
        loop {
            // A client that leaves while its request waits for a
            // connection (a full pool, `max_connecting`) is not served.
            let now = self.conn.last_read().into_std();
            let fresh_only = retries.fresh_only();
            let conn = match sender.pooled(host, fresh_only, now) {
                Some(conn) => Ok(conn),
                None => {
                    self.unless_client_gone(sender.opened(host, fresh_only))
                        .await?
                }
            };
            let mut conn = match conn {
                Ok(conn) => conn,
                Err(failure) => {
                    host = sender.after_failure(host, &mut retries, failure).await?;
                    continue;
                }
            };
            let sent_at = Instant::now();
            let outcome = self
                .send_and_read_head(head, &mut conn, replayable, sent_at)
                .await;
            let (tried, failure) = match outcome {
                Ok(response) => {
                    let answered = sender.answered(host, sent_at, response.status);
                    let then = sender.decide(Tried::Answered(response.status), &mut retries);
                    if then != Then::Answer {
                        if let Some(next) = sender.next_host(host, then, &retries).await {
                            // The answer is dropped with its connection.
                            worker.metrics().upstream_open(upstream_index, -1);
                            host = next;
                            continue;
                        }
                    }
                    sender.learn_cookies(
                        host,
                        Fields::H1 {
                            buf: &conn.buf,
                            fields: &self.response_fields,
                        },
                    );
                    let cookie = sender.cookie(host);
                    return self
                        .respond(head, route, conn, response, answered, cookie)
                        .await;
                }
                // A pooled connection the upstream had closed.
                Err(Stale) => (Tried::Stale, None),
                // Closed or reset before a byte of an answer (`retry_on: reset`).
                Err(Reset(failure)) => (Tried::Reset, Some(failure)),
                Err(SendFailed(failure)) => {
                    worker.metrics().upstream_open(upstream_index, -1);
                    return Err(failure);
                }
            };
            worker.metrics().upstream_open(upstream_index, -1);
            match sender.again(host, tried, &mut retries).await {
                Some(next) => host = next,
                None => {
                    return Err(failure.unwrap_or_else(|| {
                        sender.failure(
                            host,
                            UpstreamError::Broken,
                            "the upstream closed the connection before answering",
                            !replayable,
                        )
                    }))
                }
            }
        }
    }

    /// The retry and failure rules for one upstream, for one step of this
    /// request (it holds no host: see [`Sender::pick`]).
    pub(super) fn sender(&self, upstream: UpstreamId) -> Sender<'_> {
        Sender::new(&self.plan, &self.worker, upstream, self.peer)
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

    pub(super) fn connect_failure(
        &self,
        upstream: UpstreamId,
        host: HostId,
        err: crate::upstream::connect::ConnectError,
    ) -> Failure {
        self.sender(upstream).connect_failure(host, err)
    }

    pub(super) fn broken(&self, conn: &UpstreamConn, what: &str, body_unread: bool) -> Failure {
        self.sender(conn.upstream)
            .broken(conn.host, what, body_unread)
    }

    pub(super) fn timed_out(&self, conn: &UpstreamConn, timeout: std::time::Duration) -> Failure {
        self.sender(conn.upstream).timed_out(conn.host, timeout)
    }
}
