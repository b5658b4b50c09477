//! Sending a request upstream: which host (the balancer, then another
//! after a failed attempt, within `retries`, `retry_on` and the budget),
//! which connection (a pooled one, or a new one when a pooled one turned
//! out stale), and how failures are answered (502, 503, 504).

use super::exchange::{self, decide::Retries, Answered, Failed, Wire};
use super::{Failure, Next, Session};
use crate::config::Protocol;
use crate::ids::{HostId, RouteId, UpstreamId};
use crate::telemetry::UpstreamError;
use crate::upstream::pool::UpstreamConn;
use crate::wire::fields::Fields;
use http1::{Head, ResponseHead};

use std::{sync::Arc, time::Instant};

use bytes::Buf;
use http::StatusCode;
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
        let host = picked?;
        if sender.waits() {
            self.unless_client_gone(sender.hold(host)).await??;
        }
        let mut retries = Retries::new(upstream.retries, &head.method, replayable);
        let mut wire = H1Wire {
            session: self,
            head,
            replayable,
        };
        let answered = exchange::run(&mut wire, &sender, host, &mut retries).await?;
        let Answered {
            host,
            answer: (conn, response),
            at,
        } = answered;
        sender.learn_cookies(
            host,
            Fields::H1 {
                buf: &conn.buf,
                fields: &self.response_fields,
            },
        );
        let cookie = sender.cookie(host);
        self.respond(head, route, conn, response, at, cookie).await
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

    pub(super) fn broken(&self, conn: &UpstreamConn, what: &str, body_unread: bool) -> Failure {
        self.sender(conn.upstream)
            .broken(conn.host, what, body_unread)
    }

    pub(super) fn timed_out(&self, conn: &UpstreamConn, timeout: std::time::Duration) -> Failure {
        self.sender(conn.upstream).timed_out(conn.host, timeout)
    }
}

/// An HTTP/1.1 client's request to an HTTP/1.1 upstream, one attempt at
/// a time: the head (and the body in hand) in one write from `ubuf`, the
/// rest of the body streamed from the client while the upstream is
/// watched (`body_h1`), the head read in place (`upstream_h1`).
struct H1Wire<'s, S> {
    session: &'s mut Session<S>,
    head: &'s Head,
    /// The whole body is in `ubuf`.
    replayable: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Wire for H1Wire<'_, S> {
    type Conn = UpstreamConn;
    type Answer = (UpstreamConn, ResponseHead);

    async fn connect(
        &mut self,
        sender: &Sender<'_>,
        host: HostId,
        fresh_only: bool,
    ) -> Result<Result<UpstreamConn, Failure>, Failure> {
        let now = self.session.conn.last_read().into_std();
        if let Some(conn) = sender.pooled(host, fresh_only, now) {
            return Ok(Ok(conn));
        }
        // A client that leaves while its request waits for a connection
        // (a full pool, `max_connecting`) is not served.
        let opened = sender.opened(host, fresh_only);
        self.session.unless_client_gone(opened).await
    }

    async fn send(
        &mut self,
        sender: &Sender<'_>,
        _host: HostId,
        mut conn: UpstreamConn,
        sent_at: Instant,
    ) -> Result<Self::Answer, Failed> {
        let sent = self
            .session
            .send_and_read_head(self.head, &mut conn, self.replayable, sent_at)
            .await;
        match sent {
            Ok(response) => Ok((conn, response)),
            Err(failed) => {
                sender.worker.metrics().upstream_open(conn.upstream, -1);
                Err(failed)
            }
        }
    }

    fn status(answer: &Self::Answer) -> StatusCode {
        answer.1.status
    }

    fn discard(&mut self, (conn, _): Self::Answer) {
        self.session
            .worker
            .metrics()
            .upstream_open(conn.upstream, -1);
    }
}
