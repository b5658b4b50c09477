//! The HTTP/1.1 client side: one connection's loop (read a head, hand it
//! to the phases, keep the connection or close it), the buffers and
//! timers it keeps, and writing batched answers back. Pipelined answers
//! leave in one write.

use super::admit::{Admission, Decided};
use super::{
    admit, ClientOrigin, Failure, Next, ReadEnd, Worker, READ_RESERVE, SHRINK_ABOVE, WRITE_TIMEOUT,
};
use crate::ids::RouteId;
use crate::middleware::{Chain, Exchange, Outcome};
use crate::plan::Snapshot;
use crate::wire::fields::Fields;
use crate::wire::normalize::Refusal;
use http1::chunked::body_too_large;
use http1::io::write_bounded;
use http1::{ChunkedDecoder, Field, Framing as RequestFraming, Head};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use tokio::sync::watch;
use tokio::time::{sleep_until, timeout, Sleep};

use std::{sync::Arc, time::Instant};

use bytes::BytesMut;
use http::{header, StatusCode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tracing::debug;

/// The HTTP/1.1 client side of the proxy, over any byte stream: TCP, TLS,
/// or (for HTTP/2 clients, see `h2_server`) an in-memory pipe per stream.
pub(crate) struct Session<S> {
    pub(super) client: S,
    pub(super) peer: SocketAddr,
    /// Whether the client reached us over TLS (`X-Forwarded-Proto`).
    pub(super) secure: bool,
    pub(super) worker: Arc<Worker>,
    /// The plan of the current request (or of the next, between requests).
    pub(super) plan: Arc<Snapshot>,
    pub(super) rbuf: BytesMut,
    pub(super) wbuf: Vec<u8>,
    /// Bytes for the upstream (head and, when it fits, the body).
    pub(super) ubuf: Vec<u8>,
    pub(super) fields: Vec<Field>,
    pub(super) response_fields: Vec<Field>,
    pub(super) chunked: ChunkedDecoder,
    /// Bytes of a Content-Length request body not yet read from the client.
    pub(super) body_left: usize,
    pub(super) shutdown: watch::Receiver<bool>,
    pub(super) shutdown_signal: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// Fires no later than the current read deadline; moved lazily,
    /// because re-arming a timer per read costs more than the read.
    pub(super) timer: Pin<Box<Sleep>>,
    pub(super) last_read: tokio::time::Instant,
    pub(super) request_started: Option<tokio::time::Instant>,
    /// When the oldest unwritten answer in `wbuf` was finished.
    pub(super) pending_since: Option<Instant>,
    /// The middleware state of the current request.
    pub(super) exchange: Exchange,
    /// The chain that ran on the current request, until its done phase.
    pub(super) chain: Option<Arc<Chain>>,
    pub(super) outcome: Outcome,
    /// The request body may be this large (a route's `body_limit` lowers it).
    pub(super) max_body: usize,
    /// The current request's normalised target, Host and upgrade offer.
    pub(super) decided: Decided,
    /// The upstream answered before the request body ended: the rest of
    /// the body was not sent, and the connection closes after the answer.
    pub(super) body_abandoned: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// A session on `client`, whose first bytes (read while telling HTTP/1.1
    /// from HTTP/2) are `received`.
    pub(crate) fn new(
        client: S,
        received: BytesMut,
        origin: ClientOrigin,
        worker: Arc<Worker>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        let now = tokio::time::Instant::now();
        let mut signal = shutdown.clone();
        let plan = worker.plans.current();
        let idle = plan.idle_timeout;
        Self {
            client,
            peer: origin.peer,
            secure: origin.secure,
            worker,
            plan,
            rbuf: received,
            wbuf: Vec::with_capacity(READ_RESERVE),
            ubuf: Vec::with_capacity(1024),
            fields: Vec::with_capacity(32),
            response_fields: Vec::with_capacity(32),
            chunked: ChunkedDecoder::default(),
            body_left: 0,
            shutdown,
            shutdown_signal: Box::pin(async move {
                let _ = signal.changed().await;
            }),
            timer: Box::pin(sleep_until(now + idle)),
            last_read: now,
            request_started: None,
            pending_since: None,
            exchange: Exchange::default(),
            chain: None,
            outcome: Outcome {
                status: StatusCode::OK,
                upstream: None,
                body_bytes: 0,
            },
            max_body: 0,
            decided: Decided::default(),
            body_abandoned: false,
        }
    }

    pub(crate) async fn run(mut self) {
        self.serve().await;
    }

    pub(super) async fn serve(&mut self) {
        loop {
            self.fields.clear();
            // A request takes the plan current when its head is parsed.
            self.worker.plans.refresh(&mut self.plan);
            let limits = self.plan.limits;
            let head = match http1::parse_head_into(&self.rbuf, &limits, &mut self.fields) {
                Ok(Some(head)) => head,
                Ok(None) => match self.read_more().await {
                    Ok(()) => continue,
                    Err(end) => return self.end(end).await,
                },
                Err(rejection) => {
                    if rejection.status == StatusCode::BAD_REQUEST {
                        self.worker.metrics().refused(Refusal::Malformed);
                    }
                    let failure = Failure::new(rejection.status, rejection.detail);
                    debug!(peer = %self.peer, status = %failure.status, detail = %failure.detail, "rejected request");
                    return self.answer_failure(None, failure, false, true).await;
                }
            };
            self.request_started = None;
            let next = self.exchange(&head).await;
            if let Some(chain) = self.chain.take() {
                chain.done(&mut self.exchange, &self.outcome);
            }
            self.release_large_buffers();
            match next {
                Next::KeepAlive if !*self.shutdown.borrow() => {}
                Next::KeepAlive | Next::Close => {
                    let linger = !self.rbuf.is_empty();
                    return self.close(linger).await;
                }
                Next::Abort => {
                    let _ = self.flush().await;
                    return;
                }
            }
        }
    }

    /// Routes one request, forwards it and its answer.
    pub(super) async fn exchange(&mut self, head: &Head) -> Next {
        self.body_abandoned = false;
        let gateway = Arc::clone(&self.plan);
        // Request normalisation (issue 15): routing, the chain and the
        // upstream all see the one normal spelling of the target and Host.
        let fields = Fields::H1 {
            buf: &self.rbuf,
            fields: &self.fields,
        };
        let admission = match admit::raw_h1(&self.rbuf, head, self.secure) {
            Ok(raw) => admit::admit(&gateway, &raw, head.upgrade.then_some(fields)),
            Err(refusal) => Admission::Refused(refusal),
        };
        let route = match admission {
            Admission::Route { route, decided } => {
                if decided.upgrade.removed > 0 {
                    self.worker.metrics().upgrade_removed();
                }
                self.decided = decided;
                route
            }
            Admission::Refused(refusal) => {
                self.worker.metrics().refused(refusal);
                debug!(peer = %self.peer, reason = refusal.label(), "refused request");
                let failure = Failure::new(StatusCode::BAD_REQUEST, refusal.detail());
                return self.fail(head, None, failure).await;
            }
            // `OPTIONS *` asks about the server, which the proxy is.
            Admission::Asterisk => {
                return self.answer_unrouted(head, StatusCode::NO_CONTENT, None, &[])
            }
            Admission::NotFound(detail) => {
                let failure = Failure::new(StatusCode::NOT_FOUND, detail);
                return self.fail(head, None, failure).await;
            }
            Admission::MethodNotAllowed(allow) => {
                let detail = format!(
                    "method {} is not allowed here; allowed: {allow}",
                    head.method
                );
                let status = StatusCode::METHOD_NOT_ALLOWED;
                let allow = [(header::ALLOW.as_str(), allow.as_str())];
                return self.answer_unrouted(head, status, Some(detail), &allow);
            }
        };
        self.max_body = gateway.limits.max_body;
        let chain = &gateway.route(route).chain;
        if !chain.is_empty() {
            if let Some(next) = self.run_chain(head, route, Arc::clone(chain)).await {
                return next;
            }
        }
        if let RequestFraming::Length(len) = head.framing {
            if len > self.max_body {
                let rejection = body_too_large(&self.body_limits());
                let failure = Failure {
                    body_unread: true,
                    ..Failure::new(rejection.status, rejection.detail)
                };
                return self.fail(head, Some(route), failure).await;
            }
        }
        match self.forward(head, route).await {
            Ok(next) => next,
            Err(failure) => self.fail(head, Some(route), failure).await,
        }
    }

    /// Flushes pending answers, then reads at least one byte of a request head.
    pub(super) async fn read_more(&mut self) -> Result<(), ReadEnd> {
        if !self.flush().await {
            return Err(ReadEnd::Closed);
        }
        let idle = self.rbuf.is_empty();
        if !idle && self.request_started.is_none() {
            // Part of a pipelined head: its time starts now, not when it arrived.
            self.request_started = Some(tokio::time::Instant::now());
        }
        if idle && *self.shutdown.borrow() {
            return Err(ReadEnd::Shutdown);
        }
        let gateway = &self.plan;
        let deadline = match self.request_started {
            Some(started) => started + gateway.header_read_timeout,
            None => self.last_read + gateway.idle_timeout,
        };
        self.arm_timer(deadline);
        self.rbuf.reserve(READ_RESERVE);
        loop {
            tokio::select! {
                biased;
                read = self.client.read_buf(&mut self.rbuf) => return match read {
                    Ok(0) | Err(_) => Err(ReadEnd::Closed),
                    Ok(_) => {
                        self.last_read = tokio::time::Instant::now();
                        if self.request_started.is_none() {
                            self.request_started = Some(self.last_read);
                        }
                        Ok(())
                    }
                },
                () = self.shutdown_signal.as_mut(), if idle => return Err(ReadEnd::Shutdown),
                () = self.timer.as_mut() => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(ReadEnd::TimedOut);
                    }
                    self.timer.as_mut().reset(deadline);
                }
            }
        }
    }

    pub(super) async fn end(&mut self, end: ReadEnd) {
        match end {
            ReadEnd::Closed => {}
            ReadEnd::Shutdown => self.close(false).await,
            ReadEnd::TimedOut if self.rbuf.is_empty() => self.close(false).await,
            ReadEnd::TimedOut => {
                let detail = format!(
                    "request head not received within {:?}",
                    self.plan.header_read_timeout
                );
                let failure = Failure::new(StatusCode::REQUEST_TIMEOUT, detail);
                self.answer_failure(None, failure, false, false).await;
            }
        }
    }

    pub(super) async fn flush(&mut self) -> bool {
        self.pending_since = None;
        if self.wbuf.is_empty() {
            return true;
        }
        let written = write_bounded(&mut self.client, &self.wbuf, WRITE_TIMEOUT).await;
        self.wbuf.clear();
        written
    }

    pub(super) fn release_large_buffers(&mut self) {
        if self.rbuf.is_empty() && self.rbuf.capacity() > SHRINK_ABOVE {
            self.rbuf = BytesMut::with_capacity(READ_RESERVE);
        }
        if self.wbuf.is_empty() && self.wbuf.capacity() > SHRINK_ABOVE {
            self.wbuf = Vec::with_capacity(READ_RESERVE);
        }
        if self.ubuf.capacity() > SHRINK_ABOVE {
            self.ubuf = Vec::with_capacity(1024);
        }
    }

    /// Flushes and half-closes. With `linger`, drains unread input for a
    /// moment, so that the client reads the last answer instead of a reset.
    pub(super) async fn close(&mut self, linger: bool) {
        if !self.flush().await || self.client.shutdown().await.is_err() || !linger {
            return;
        }
        http1::io::linger(&mut self.client).await;
    }

    /// Makes the session timer fire no later than `deadline`. A later
    /// deadline leaves it where it is (re-arming per request costs more
    /// than the request's reads); whoever it wakes early checks the time.
    pub(super) fn arm_timer(&mut self, deadline: tokio::time::Instant) {
        if deadline < self.timer.deadline() || self.timer.is_elapsed() {
            self.timer.as_mut().reset(deadline);
        }
    }

    /// Reads more of a request body from the client.
    /// 408 when the client stalls past `idle_timeout`, 400 when it goes away.
    pub(super) async fn read_body_part(&mut self) -> Result<(), Failure> {
        let closed = || Failure {
            body_unread: true,
            ..Failure::new(StatusCode::BAD_REQUEST, "client closed mid-body")
        };
        if !self.flush().await {
            return Err(closed());
        }
        let idle = self.plan.idle_timeout;
        self.rbuf.reserve(READ_RESERVE);
        match timeout(idle, self.client.read_buf(&mut self.rbuf)).await {
            Ok(Ok(0) | Err(_)) => Err(closed()),
            Ok(Ok(_)) => Ok(()),
            Err(_) => Err(Failure {
                body_unread: true,
                ..Failure::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "request body not received in time",
                )
            }),
        }
    }

    /// Limits for the current request's body.
    pub(super) fn body_limits(&self) -> http1::Limits {
        http1::Limits {
            max_head: self.plan.limits.max_head,
            max_body: self.max_body,
        }
    }

    pub(super) fn count(&self, route: Option<RouteId>, status: StatusCode) {
        let routes = self.plan.route_count();
        self.worker
            .metrics()
            .request(route, status.as_u16(), routes);
    }
}
