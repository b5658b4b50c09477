//! One client connection, as a short list of phases per request (see
//! docs/LIFECYCLE-proxy.md): read and check the head, route, pick an
//! upstream host and connection, send the request (streaming its body),
//! read the response head, stream the response body, then keep or close
//! each side. Answers to pipelined requests are batched into one write.

use std::{
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::{Buf, BytesMut};
use http::{header, Method, StatusCode};
use http1::{
    chunked::{body_too_large, encode_chunk, LAST_CHUNK},
    io::write_bounded,
    BodyFraming, ChunkedDecoder, Field, Framing as RequestFraming, Head, Persistence, Problem,
    ResponseHead,
};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    sync::watch,
    time::{sleep_until, timeout, Sleep},
};
use tracing::{debug, warn};

mod admit;
mod upstream_h2;
mod worker;

pub(crate) use worker::Worker;

use crate::{
    config::Protocol,
    ids::{HostId, RouteId, UpstreamId},
    middleware::{Answer, Chain, Exchange, Outcome, RequestView, ResponseView},
    plan::Snapshot,
    telemetry::UpstreamError,
    upstream::connect::{self, ConnectError},
    upstream::pool::UpstreamConn,
    wire::edits::HeaderEdits,
    wire::head::{self, Framing, Offered, RequestContext},
    wire::normalize::Refusal,
};
use admit::{Admission, Decided};

const READ_RESERVE: usize = 16 * 1024;
/// Pending output is written once it exceeds this.
const FLUSH_AT: usize = 64 * 1024;
/// Buffers grown past this by one large message are replaced afterwards.
const SHRINK_ABOVE: usize = 64 * 1024;
/// A peer that takes nothing of a pending write for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Answers to pipelined requests wait for each other at most this long
/// before being written, so one slow upstream does not hold back the rest.
const BATCH_WINDOW: Duration = Duration::from_millis(1);
/// A chunk line or trailer section from an upstream may be this long.
const UPSTREAM_LIMITS: http1::Limits = http1::Limits {
    max_head: 64 * 1024,
    max_body: usize::MAX,
};

/// What happens to the client connection after an exchange.
enum Next {
    KeepAlive,
    /// Close politely (flush, FIN, drain what the client still sends).
    Close,
    /// Drop at once: the client is gone or a response was cut short.
    Abort,
}

/// Why an exchange failed before the response head reached the client.
struct Failure {
    status: StatusCode,
    detail: String,
    /// The request body was only partly read from the client.
    body_unread: bool,
}

impl Failure {
    fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
            body_unread: false,
        }
    }
}

/// Why reading from the client stopped.
enum ReadEnd {
    Closed,
    TimedOut,
    Shutdown,
}

/// The HTTP/1.1 client side of the proxy, over any byte stream: TCP, TLS,
/// or (for HTTP/2 clients, see `h2_server`) an in-memory pipe per stream.
pub(crate) struct Session<S> {
    client: S,
    peer: SocketAddr,
    /// Whether the client reached us over TLS (`X-Forwarded-Proto`).
    secure: bool,
    worker: Arc<Worker>,
    /// The plan of the current request (or of the next, between requests).
    plan: Arc<Snapshot>,
    rbuf: BytesMut,
    wbuf: Vec<u8>,
    /// Bytes for the upstream (head and, when it fits, the body).
    ubuf: Vec<u8>,
    fields: Vec<Field>,
    response_fields: Vec<Field>,
    chunked: ChunkedDecoder,
    /// Bytes of a Content-Length request body not yet read from the client.
    body_left: usize,
    shutdown: watch::Receiver<bool>,
    shutdown_signal: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// Fires no later than the current read deadline; moved lazily,
    /// because re-arming a timer per read costs more than the read.
    timer: Pin<Box<Sleep>>,
    last_read: tokio::time::Instant,
    request_started: Option<tokio::time::Instant>,
    /// When the oldest unwritten answer in `wbuf` was finished.
    pending_since: Option<Instant>,
    /// The middleware state of the current request.
    exchange: Exchange,
    /// The chain that ran on the current request, until its done phase.
    chain: Option<Arc<Chain>>,
    outcome: Outcome,
    /// The request body may be this large (a route's `body_limit` lowers it).
    max_body: usize,
    /// The current request's normalised target, Host and upgrade offer.
    decided: Decided,
}

/// Where a session's client comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientOrigin {
    pub peer: SocketAddr,
    pub secure: bool,
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
        }
    }

    pub(crate) async fn run(mut self) {
        self.serve().await;
    }

    async fn serve(&mut self) {
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
    async fn exchange(&mut self, head: &Head) -> Next {
        let gateway = Arc::clone(&self.plan);
        // Request normalisation (issue 15): routing, the chain and the
        // upstream all see the one normal spelling of the target and Host.
        let admission = admit::admit(&gateway, &self.rbuf, head, &self.fields, self.secure);
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

    /// Runs the route's middleware on the request; `Some` when it answered.
    async fn run_chain(&mut self, head: &Head, route: RouteId, chain: Arc<Chain>) -> Option<Next> {
        let trust = self.plan.trust_forwarded;
        self.exchange
            .begin(route, self.worker.index, &head.method, self.max_body);
        self.chain = Some(Arc::clone(&chain));
        let ip = client_ip(self.peer, trust, &self.rbuf, &self.fields);
        let path = self.decided.rewrites.path.as_deref();
        let wanted = chain.wants_body(&request_view(
            head,
            &self.rbuf,
            &self.fields,
            ip,
            path,
            false,
        ));
        let held = match (wanted, head.framing) {
            (None, _) | (_, RequestFraming::Empty) => false,
            (Some(max), RequestFraming::Length(len)) => {
                if let Err(failure) = self.hold_body(head, len, max).await {
                    return Some(self.fail(head, Some(route), failure).await);
                }
                true
            }
            (Some(_), RequestFraming::Chunked) => {
                let failure = Failure {
                    body_unread: true,
                    ..Failure::new(
                        StatusCode::LENGTH_REQUIRED,
                        "this route checks request bodies: send Content-Length, not chunked",
                    )
                };
                return Some(self.fail(head, Some(route), failure).await);
            }
        };
        let path = self.decided.rewrites.path.as_deref();
        let view = request_view(head, &self.rbuf, &self.fields, ip, path, held);
        if let Some(answer) = chain.request(&view, &mut self.exchange).await {
            return Some(self.answer(head, route, answer));
        }
        self.max_body = self.exchange.max_body;
        None
    }

    /// Reads a `len`-byte body whole into `rbuf` (behind the head), for
    /// handlers that look at it; 413 past `max`.
    async fn hold_body(&mut self, head: &Head, len: usize, max: usize) -> Result<(), Failure> {
        if len > max.min(self.max_body) {
            let rejection = body_too_large(&http1::Limits {
                max_head: 0,
                max_body: max.min(self.max_body),
            });
            return Err(Failure {
                body_unread: true,
                ..Failure::new(rejection.status, rejection.detail)
            });
        }
        if head.expect_continue && self.rbuf.len() < head.len + len {
            self.wbuf
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        while self.rbuf.len() < head.len + len {
            self.read_body_part().await?;
        }
        Ok(())
    }

    /// Sends the request upstream (retrying where safe) and streams the answer back.
    async fn forward(&mut self, head: &Head, route: RouteId) -> Result<Next, Failure> {
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

    /// The upstream request head into `ubuf`.
    fn build_request(
        &mut self,
        head: &Head,
        host_header: Option<&http::HeaderValue>,
    ) -> Result<(), Failure> {
        let framing = match head.framing {
            RequestFraming::Empty => Framing::None,
            RequestFraming::Length(n) => Framing::Length(n as u64),
            RequestFraming::Chunked => Framing::Chunked,
        };
        let upgrade = &self.decided.upgrade.kept;
        if !upgrade.is_empty() && head.framing != RequestFraming::Empty {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "an upgrade request cannot carry a body",
            ));
        }
        self.ubuf.clear();
        let context = RequestContext {
            peer: self.peer.ip(),
            secure: self.secure,
            trust_forwarded: self.plan.trust_forwarded,
            host_header,
            path: self.decided.rewrites.path.as_deref(),
            host: self.decided.rewrites.host.as_deref(),
            upgrade: match self.decided.upgrade.removed {
                _ if upgrade.is_empty() => None,
                0 => Some(Offered::AsSent),
                _ => Some(Offered::Only(upgrade)),
            },
            framing,
            edits: self
                .chain
                .is_some()
                .then_some(&self.exchange.request_headers)
                .filter(|edits| !edits.is_empty()),
        };
        head::request_head(&mut self.ubuf, &self.rbuf, head, &self.fields, &context);
        Ok(())
    }

    /// Moves as much of the body as the client already sent into `ubuf`;
    /// true when that is all of it (the request can be sent again).
    fn buffer_body(&mut self, head: &Head) -> Result<bool, Failure> {
        match head.framing {
            RequestFraming::Empty => Ok(true),
            RequestFraming::Length(len) => {
                let take = len.min(self.rbuf.len());
                self.ubuf.extend_from_slice(&self.rbuf[..take]);
                self.rbuf.advance(take);
                self.body_left = len - take;
                Ok(self.body_left == 0)
            }
            RequestFraming::Chunked => {
                self.chunked.reset();
                self.decode_chunks()
            }
        }
    }

    /// Re-chunks what `rbuf` holds of a chunked body into `ubuf`; true at its end.
    fn decode_chunks(&mut self) -> Result<bool, Failure> {
        let limits = self.body_limits();
        let ubuf = &mut self.ubuf;
        let decoded = self
            .chunked
            .decode(&self.rbuf, &limits, |data| encode_chunk(ubuf, data))
            .map_err(|rejection| Failure {
                body_unread: true,
                ..Failure::new(rejection.status, rejection.detail)
            })?;
        self.rbuf.advance(decoded.consumed);
        if decoded.done {
            self.ubuf.extend_from_slice(LAST_CHUNK);
        }
        Ok(decoded.done)
    }

    /// A pooled connection to `host`, or a new one.
    async fn connection(
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

    /// Records a response head from `host` (a success, and its latency); when it came.
    fn answered(&self, upstream: UpstreamId, host: HostId, sent_at: Instant) -> Instant {
        let answered = Instant::now();
        self.plan.upstream(upstream).balancer.success(host);
        self.worker
            .metrics()
            .upstream_latency(upstream, answered - sent_at);
        answered
    }

    /// After a failed connect to `host`: counts it against the host and
    /// picks the next one to try, or gives up with `failure`.
    fn after_failure(
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
    fn connect_failure(&self, upstream: UpstreamId, host: HostId, err: ConnectError) -> Failure {
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
    fn upstream_failure(
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

    /// Writes the request (streaming the rest of its body) and reads the
    /// response head, skipping `100 Continue`.
    async fn send_and_read_head(
        &mut self,
        head: &Head,
        conn: &mut UpstreamConn,
        replayable: bool,
        sent_at: Instant,
    ) -> Result<ResponseHead, SendError> {
        let timeouts = self.plan.upstream(conn.upstream).timeouts.clone();
        if !write_bounded(&mut conn.stream, &self.ubuf, timeouts.request).await {
            return Err(if conn.reused {
                Stale
            } else {
                SendFailed(self.broken(conn, "cannot send the request", !replayable))
            });
        }
        let deadline = if replayable {
            tokio::time::Instant::from_std(sent_at) + timeouts.request
        } else {
            self.stream_body(head, conn).await.map_err(SendFailed)?;
            tokio::time::Instant::now() + timeouts.request
        };
        loop {
            self.response_fields.clear();
            let head_request = head.method == Method::HEAD;
            match http1::parse_response_head(
                &conn.buf,
                UPSTREAM_LIMITS.max_head,
                head_request,
                &mut self.response_fields,
            ) {
                Ok(Some(response)) if response.status == StatusCode::CONTINUE => {
                    conn.buf.advance(response.len);
                    continue;
                }
                Ok(Some(response)) => return Ok(response),
                Ok(None) => {}
                Err(rejection) => {
                    return Err(SendFailed(self.broken(conn, &rejection.detail, false)))
                }
            }
            match self.read_upstream(conn, deadline).await {
                UpstreamRead::ClientGone => {
                    return Err(SendFailed(Failure::new(
                        StatusCode::BAD_REQUEST,
                        "client gone",
                    )))
                }
                UpstreamRead::Done(Ok(0) | Err(_)) if conn.reused && conn.buf.is_empty() => {
                    return Err(Stale)
                }
                UpstreamRead::Done(Ok(0)) => {
                    return Err(SendFailed(self.broken(
                        conn,
                        "the upstream closed the connection before answering",
                        false,
                    )))
                }
                UpstreamRead::Done(Err(err)) => {
                    return Err(SendFailed(self.broken(
                        conn,
                        &format!("read failed: {err}"),
                        false,
                    )))
                }
                UpstreamRead::Done(Ok(_)) => {}
                UpstreamRead::TimedOut => {
                    let config = &self.plan.upstream(conn.upstream);
                    let mut failure = self.upstream_failure(
                        conn.upstream,
                        conn.host,
                        UpstreamError::Timeout,
                        &format!("no response within {:?}", timeouts.request),
                        false,
                    );
                    failure.status = StatusCode::GATEWAY_TIMEOUT;
                    config.balancer.failure(conn.host, self.plan.clock());
                    return Err(SendFailed(failure));
                }
            }
        }
    }

    /// Reads from the upstream until data arrives or `deadline` passes.
    /// Answers already waiting in `wbuf` leave when the batch window closes,
    /// so that a slow upstream holds back neither earlier pipelined answers
    /// nor the part of a streamed body already received.
    async fn read_upstream(
        &mut self,
        conn: &mut UpstreamConn,
        deadline: tokio::time::Instant,
    ) -> UpstreamRead {
        conn.buf.reserve(READ_RESERVE);
        loop {
            // Started when we first wait, not when the answer was written:
            // a request that needs no waiting costs no clock read.
            let batch_ends = (!self.wbuf.is_empty()).then(|| {
                let since = *self.pending_since.get_or_insert_with(Instant::now);
                tokio::time::Instant::from_std(since + BATCH_WINDOW)
            });
            self.arm_timer(batch_ends.map_or(deadline, |ends| ends.min(deadline)));
            tokio::select! {
                biased;
                read = conn.stream.read_buf(&mut conn.buf) => return UpstreamRead::Done(read),
                () = self.timer.as_mut() => {}
            }
            let now = tokio::time::Instant::now();
            if batch_ends.is_some_and(|ends| now >= ends) {
                if !self.flush().await {
                    return UpstreamRead::ClientGone;
                }
            } else if now >= deadline {
                return UpstreamRead::TimedOut;
            }
        }
    }

    /// Makes the session timer fire no later than `deadline`. A later
    /// deadline leaves it where it is (re-arming per request costs more
    /// than the request's reads); whoever it wakes early checks the time.
    fn arm_timer(&mut self, deadline: tokio::time::Instant) {
        if deadline < self.timer.deadline() || self.timer.is_elapsed() {
            self.timer.as_mut().reset(deadline);
        }
    }

    fn broken(&self, conn: &UpstreamConn, what: &str, body_unread: bool) -> Failure {
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

    /// Streams the part of the request body the client has not sent yet.
    async fn stream_body(&mut self, head: &Head, conn: &mut UpstreamConn) -> Result<(), Failure> {
        if head.expect_continue {
            self.wbuf
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        let write_timeout = self.plan.upstream(conn.upstream).timeouts.request;
        loop {
            self.read_body_part().await?;
            self.ubuf.clear();
            let done = match head.framing {
                RequestFraming::Chunked => self.decode_chunks()?,
                _ => {
                    let take = self.body_left.min(self.rbuf.len());
                    self.ubuf.extend_from_slice(&self.rbuf[..take]);
                    self.rbuf.advance(take);
                    self.body_left -= take;
                    self.body_left == 0
                }
            };
            if !write_bounded(&mut conn.stream, &self.ubuf, write_timeout).await {
                return Err(self.broken(conn, "cannot send the request body", !done));
            }
            if done {
                return Ok(());
            }
        }
    }

    /// Reads more of a request body from the client.
    /// 408 when the client stalls past `idle_timeout`, 400 when it goes away.
    async fn read_body_part(&mut self) -> Result<(), Failure> {
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

    /// Writes the response head and streams its body to the client.
    async fn respond(
        &mut self,
        head: &Head,
        route: RouteId,
        mut conn: UpstreamConn,
        response: ResponseHead,
        answered: Instant,
    ) -> Result<Next, Failure> {
        if response.status == StatusCode::SWITCHING_PROTOCOLS && !self.switch_offered(&conn) {
            // Only a 101 to an upgrade we relayed turns the connection into
            // a tunnel: anything else would let the upstream take the
            // client's connection out of routing (issue 15).
            warn!(upstream = %self.plan.upstream(conn.upstream).name, "101 to a request whose upgrade was not relayed");
            self.worker.metrics().upstream_open(conn.upstream, -1);
            return Err(Failure::new(
                StatusCode::BAD_GATEWAY,
                "the upstream switched to a protocol the request did not offer",
            ));
        }
        self.count(Some(route), response.status);
        self.outcome = Outcome {
            status: response.status,
            upstream: Some(conn.upstream),
            body_bytes: 0,
        };
        self.check_response_body(&mut conn, &response).await;
        let edits = self.response_edits(response.status);
        if response.status == StatusCode::SWITCHING_PROTOCOLS {
            return Ok(self.tunnel(conn, &response, edits).await);
        }
        let framing = match response.framing {
            BodyFraming::None => Framing::None,
            BodyFraming::Length(n) => Framing::Length(n),
            BodyFraming::Chunked | BodyFraming::UntilClose if head.http10 => Framing::Close,
            BodyFraming::Chunked | BodyFraming::UntilClose => Framing::Chunked,
        };
        let close = !head.keep_alive || framing == Framing::Close || *self.shutdown.borrow();
        head::response_head(
            &mut self.wbuf,
            response.status,
            &conn.buf,
            &self.response_fields,
            framing,
            persistence(head, close),
            edits.as_ref(),
        );
        self.put_back_edits(edits);
        conn.buf.advance(response.len);
        let complete = self.relay_body(&mut conn, response.framing, framing).await;
        let worker = Arc::clone(&self.worker);
        if complete && response.keep_alive && conn.buf.is_empty() {
            worker.pool.put(
                self.plan.upstream(conn.upstream),
                worker.metrics(),
                conn,
                answered,
            );
        } else {
            worker.metrics().upstream_open(conn.upstream, -1);
        }
        Ok(match (complete, close) {
            (false, _) => Next::Abort,
            (true, true) => Next::Close,
            (true, false) => Next::KeepAlive,
        })
    }

    /// Reads a Content-Length response body whole and shows it to the
    /// handlers that asked (`validate` with `responses: true`). A body that
    /// does not arrive is left to `relay_body` to report.
    async fn check_response_body(&mut self, conn: &mut UpstreamConn, response: &ResponseHead) {
        let Some(chain) = self.chain.clone() else {
            return;
        };
        let (Some(max), BodyFraming::Length(len)) = (
            chain.wants_response_body(response.status, &self.exchange),
            response.framing,
        ) else {
            return;
        };
        let Some(end) = usize::try_from(len)
            .ok()
            .filter(|&len| len <= max)
            .map(|len| response.len + len)
        else {
            return;
        };
        let timeout = self.plan.upstream(conn.upstream).timeouts.request;
        let deadline = tokio::time::Instant::now() + timeout;
        while conn.buf.len() < end {
            match self.read_upstream(conn, deadline).await {
                UpstreamRead::Done(Ok(read)) if read > 0 => {}
                _ => return,
            }
        }
        let content_type = self
            .response_fields
            .iter()
            .find(|(name, _)| conn.buf[name.clone()].eq_ignore_ascii_case(b"content-type"))
            .map(|(_, value)| &conn.buf[value.clone()]);
        let view = ResponseView {
            status: response.status,
            content_type,
            body: &conn.buf[response.len..end],
        };
        chain.response_body(&view, &self.exchange);
    }

    /// Copies the response body into `wbuf`, flushing as it grows. False
    /// when the upstream broke off or the client went away.
    async fn relay_body(
        &mut self,
        conn: &mut UpstreamConn,
        from: BodyFraming,
        to: Framing,
    ) -> bool {
        let read_timeout = self.plan.upstream(conn.upstream).timeouts.request;
        let mut remaining = match from {
            BodyFraming::None => return true,
            BodyFraming::Length(n) => n,
            _ => u64::MAX,
        };
        let mut decoder = ChunkedDecoder::default();
        loop {
            let done = match from {
                BodyFraming::Chunked => {
                    let wbuf = &mut self.wbuf;
                    let rechunk = to == Framing::Chunked;
                    let Ok(decoded) = decoder.decode(&conn.buf, &UPSTREAM_LIMITS, |data| {
                        if rechunk {
                            encode_chunk(wbuf, data);
                        } else {
                            wbuf.extend_from_slice(data);
                        }
                    }) else {
                        warn!(upstream = %self.plan.upstream(conn.upstream).name, "invalid chunked body from the upstream");
                        return false;
                    };
                    conn.buf.advance(decoded.consumed);
                    decoded.done
                }
                _ => {
                    let take = usize::try_from(remaining)
                        .unwrap_or(usize::MAX)
                        .min(conn.buf.len());
                    if to == Framing::Chunked {
                        encode_chunk(&mut self.wbuf, &conn.buf[..take]);
                    } else {
                        self.wbuf.extend_from_slice(&conn.buf[..take]);
                    }
                    conn.buf.advance(take);
                    remaining -= take as u64;
                    remaining == 0
                }
            };
            if done {
                if to == Framing::Chunked {
                    self.wbuf.extend_from_slice(LAST_CHUNK);
                }
                return true;
            }
            if self.wbuf.len() >= FLUSH_AT && !self.flush().await {
                return false;
            }
            let deadline = tokio::time::Instant::now() + read_timeout;
            match self.read_upstream(conn, deadline).await {
                UpstreamRead::Done(Ok(0)) if from == BodyFraming::UntilClose => {
                    if to == Framing::Chunked {
                        self.wbuf.extend_from_slice(LAST_CHUNK);
                    }
                    return true;
                }
                UpstreamRead::ClientGone => return false,
                UpstreamRead::Done(Ok(0) | Err(_)) | UpstreamRead::TimedOut => {
                    let config = &self.plan.upstream(conn.upstream);
                    self.worker
                        .metrics()
                        .upstream_error(conn.upstream, UpstreamError::Broken);
                    warn!(upstream = %config.name, host = %config.host_name(conn.host), "the upstream broke off a response body; closing the client connection");
                    return false;
                }
                UpstreamRead::Done(Ok(_)) => {}
            }
        }
    }

    /// After `101 Switching Protocols`: bytes flow both ways until either side closes.
    async fn tunnel(
        &mut self,
        mut conn: UpstreamConn,
        response: &ResponseHead,
        edits: Option<HeaderEdits>,
    ) -> Next {
        head::response_head(
            &mut self.wbuf,
            response.status,
            &conn.buf,
            &self.response_fields,
            Framing::None,
            Persistence::KeepAlive,
            edits.as_ref(),
        );
        self.put_back_edits(edits);
        conn.buf.advance(response.len);
        self.wbuf.extend_from_slice(&conn.buf);
        let early = std::mem::take(&mut self.rbuf);
        let ok =
            self.flush().await && (early.is_empty() || conn.stream.write_all(&early).await.is_ok());
        if ok {
            let _ = tokio::io::copy_bidirectional(&mut self.client, &mut conn.stream).await;
        }
        self.worker.metrics().upstream_open(conn.upstream, -1);
        Next::Abort
    }

    /// Whether a `101`'s `Upgrade` names a protocol the request offered upstream.
    fn switch_offered(&self, conn: &UpstreamConn) -> bool {
        let answered = self
            .response_fields
            .iter()
            .find(|(name, _)| conn.buf[name.clone()].eq_ignore_ascii_case(b"upgrade"))
            .map(|(_, value)| &conn.buf[value.clone()]);
        answered.is_some_and(|answered| {
            crate::wire::normalize::upgrade::switched_to_offered(
                answered,
                &self.decided.upgrade.kept,
            )
        })
    }

    /// Answers a failed exchange with a problem body.
    async fn fail(&mut self, head: &Head, route: Option<RouteId>, failure: Failure) -> Next {
        let close = failure.body_unread
            || !head.keep_alive
            || failure.status == StatusCode::BAD_REQUEST
            || failure.status == StatusCode::REQUEST_TIMEOUT;
        let head_only = head.method == Method::HEAD;
        // A request whose body was never read leaves it in the buffer.
        let close = close || (route.is_none() && head.framing != RequestFraming::Empty);
        self.count(route, failure.status);
        self.write_problem(
            Problem::new(failure.status, failure.detail),
            &[],
            head_only,
            persistence(head, close),
        );
        if close {
            Next::Close
        } else {
            if route.is_none() {
                self.rbuf.advance(head.len);
            }
            Next::KeepAlive
        }
    }

    /// Answers a request that reached no route (405, `OPTIONS *`); the
    /// connection goes on unless a body would have to be skipped.
    fn answer_unrouted(
        &mut self,
        head: &Head,
        status: StatusCode,
        detail: Option<String>,
        extra: &[(&str, &str)],
    ) -> Next {
        self.count(None, status);
        let close = head.framing != RequestFraming::Empty || !head.keep_alive;
        let head_only = head.method == Method::HEAD;
        match detail {
            Some(detail) => self.write_problem(
                Problem::new(status, detail),
                extra,
                head_only,
                persistence(head, close),
            ),
            None => self.write_answer(status, &[], None, head_only, persistence(head, close)),
        }
        if close {
            return Next::Close;
        }
        self.rbuf.advance(head.len);
        Next::KeepAlive
    }

    /// Answers a request that could not be parsed, then closes.
    async fn answer_failure(
        &mut self,
        route: Option<RouteId>,
        failure: Failure,
        head_only: bool,
        linger: bool,
    ) {
        self.count(route, failure.status);
        self.write_problem(
            Problem::new(failure.status, failure.detail),
            &[],
            head_only,
            Persistence::Close,
        );
        self.close(linger).await;
    }

    fn write_problem(
        &mut self,
        problem: Problem,
        extra: &[(&str, &str)],
        head_only: bool,
        persistence: Persistence,
    ) {
        let extra: Vec<(&[u8], &[u8])> = extra
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .collect();
        let body = problem.to_json();
        self.write_answer(
            problem.status(),
            &extra,
            Some(&body),
            head_only,
            persistence,
        );
    }

    /// Writes an answer of the proxy's own (a problem+json `body` or none),
    /// with `extra` fields and what the route's middleware adds to responses.
    fn write_answer(
        &mut self,
        status: StatusCode,
        extra: &[(&[u8], &[u8])],
        body: Option<&[u8]>,
        head_only: bool,
        persistence: Persistence,
    ) {
        let body = body.unwrap_or_default();
        self.outcome = Outcome {
            status,
            upstream: None,
            body_bytes: if head_only { 0 } else { body.len() as u64 },
        };
        let edits = self.response_edits(status);
        let content_type = (!body.is_empty()).then_some((
            &b"content-type"[..],
            http1::problem::PROBLEM_JSON.as_bytes(),
        ));
        let fields = content_type
            .into_iter()
            .chain(extra.iter().copied())
            .filter(|(name, _)| !edits.as_ref().is_some_and(|e| e.drops(name)))
            .chain(edits.iter().flat_map(HeaderEdits::appended));
        http1::io::with_date(|date| {
            http1::encode_head(
                &mut self.wbuf,
                status,
                fields,
                body.len(),
                date,
                persistence,
            );
        });
        self.put_back_edits(edits);
        if !head_only {
            self.wbuf.extend_from_slice(body);
        }
    }

    /// Runs the chain's response phase; the edits it made, taken out of
    /// the exchange (give them back with `put_back_edits`), if any.
    fn response_edits(&mut self, status: StatusCode) -> Option<HeaderEdits> {
        let chain = self.chain.as_ref()?;
        chain.response(status, &mut self.exchange);
        if self.exchange.response_headers.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut self.exchange.response_headers))
    }

    /// Returns the edits' buffers to the exchange, for the next request.
    fn put_back_edits(&mut self, edits: Option<HeaderEdits>) {
        if let Some(edits) = edits {
            self.exchange.response_headers = edits;
        }
    }

    /// Answers for a handler of the route's chain.
    fn answer(&mut self, head: &Head, route: RouteId, answer: Answer) -> Next {
        self.count(Some(route), answer.status);
        // A body that has fully arrived can be skipped; otherwise the connection cannot go on.
        let body_here = match head.framing {
            RequestFraming::Empty => Some(0),
            RequestFraming::Length(len) if self.rbuf.len() - head.len >= len => Some(len),
            _ => None,
        };
        let close = body_here.is_none() || !head.keep_alive;
        let body = answer.detail.map(|detail| {
            Problem::new(answer.status, detail)
                .with_errors(answer.violations)
                .to_json()
        });
        let extra: Vec<(&[u8], &[u8])> = answer
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
            .collect();
        self.write_answer(
            answer.status,
            &extra,
            body.as_deref(),
            head.method == Method::HEAD,
            persistence(head, close),
        );
        match body_here {
            Some(len) if !close => {
                self.rbuf.advance(head.len + len);
                Next::KeepAlive
            }
            _ => Next::Close,
        }
    }

    /// Limits for the current request's body.
    fn body_limits(&self) -> http1::Limits {
        http1::Limits {
            max_head: self.plan.limits.max_head,
            max_body: self.max_body,
        }
    }

    fn count(&self, route: Option<RouteId>, status: StatusCode) {
        let routes = self.plan.route_count();
        self.worker
            .metrics()
            .request(route, status.as_u16(), routes);
    }

    /// Flushes pending answers, then reads at least one byte of a request head.
    async fn read_more(&mut self) -> Result<(), ReadEnd> {
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

    async fn end(&mut self, end: ReadEnd) {
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

    async fn flush(&mut self) -> bool {
        self.pending_since = None;
        if self.wbuf.is_empty() {
            return true;
        }
        let written = write_bounded(&mut self.client, &self.wbuf, WRITE_TIMEOUT).await;
        self.wbuf.clear();
        written
    }

    fn release_large_buffers(&mut self) {
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
    async fn close(&mut self, linger: bool) {
        if !self.flush().await || self.client.shutdown().await.is_err() || !linger {
            return;
        }
        http1::io::linger(&mut self.client).await;
    }
}

/// How waiting for upstream bytes ended.
enum UpstreamRead {
    Done(std::io::Result<usize>),
    TimedOut,
    /// Flushing waiting answers found the client gone.
    ClientGone,
}

/// Why sending a request or reading its response head failed.
enum SendError {
    /// A pooled connection the upstream had already closed; nothing was answered.
    Stale,
    SendFailed(Failure),
}
use SendError::{SendFailed, Stale};

fn no_healthy_host(upstream: &str) -> Failure {
    Failure::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("upstream `{upstream}` has no healthy host"),
    )
}

fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE | Method::TRACE
    )
}

fn persistence(head: &Head, close: bool) -> Persistence {
    match (close, head.http10) {
        (true, _) => Persistence::Close,
        (false, true) => Persistence::KeepAlive10,
        (false, false) => Persistence::KeepAlive,
    }
}

/// The request as the middleware sees it, with the path the upstream
/// receives (`path` when normalisation rewrote it); with `held`, its
/// Content-Length body is whole in `buf` behind the head.
fn request_view<'a>(
    head: &'a Head,
    buf: &'a [u8],
    fields: &'a [http1::Field],
    client_ip: std::net::IpAddr,
    path: Option<&'a str>,
    held: bool,
) -> RequestView<'a> {
    let text = |range: std::ops::Range<usize>| std::str::from_utf8(&buf[range]).ok();
    let body_len = match head.framing {
        RequestFraming::Length(len) => Some(len),
        _ => None,
    };
    RequestView {
        method: &head.method,
        path: path
            .or_else(|| text(head.path.clone()))
            .filter(|p| !p.is_empty())
            .unwrap_or("/"),
        query: head.query.clone().and_then(text),
        client_ip,
        body_len,
        body: body_len
            .filter(|_| held)
            .and_then(|len| buf.get(head.len..head.len + len)),
        buf,
        fields,
    }
}

/// The client's address: the peer's, or with `trust` the last address in
/// the last X-Forwarded-For field (the one the trusted proxy added).
fn client_ip(
    peer: SocketAddr,
    trust: bool,
    buf: &[u8],
    fields: &[http1::Field],
) -> std::net::IpAddr {
    let forwarded = || {
        let (_, value) = fields
            .iter()
            .rev()
            .find(|(n, _)| buf[n.clone()].eq_ignore_ascii_case(b"x-forwarded-for"))?;
        let last = buf[value.clone()].rsplit(|&b| b == b',').next()?;
        std::str::from_utf8(http1::request::trim(last))
            .ok()?
            .parse()
            .ok()
    };
    if trust {
        forwarded().unwrap_or(peer.ip())
    } else {
        peer.ip()
    }
}
