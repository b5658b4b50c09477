//! The HTTP/1.1 client side: one connection's loop (read a head, hand it
//! to the phases, keep the connection or close it), the buffers and
//! timers it keeps, and writing batched answers back. Pipelined answers
//! leave in one write.

pub(super) mod forward;
pub(super) mod idle;
pub(super) mod local;
pub(super) mod park;
pub(super) mod pump_h1;
pub(super) mod relay_h1;
pub(super) mod relay_h2;
pub(super) mod response;
pub(super) mod to_h1;
pub(super) mod to_h2;
pub(super) mod waits;

use crate::middleware::{Chain, Exchange, Outcome};
use crate::plan::Snapshot;
use crate::session::admit::{Admission, Decided};
use crate::session::h1::idle::{Idle, BUSY_LINGER};
use crate::session::{admit, traced, Failure, Next, Worker, SHRINK_ABOVE};
use crate::telemetry::{trace::Span, Event};
use crate::wire::fields::Fields;
use crate::wire::interim::{ClientVersion, InterimAnswers};
use crate::wire::normalize::Refusal;
use http1::conn::{Deadlines, ReadEnd, ReadReady, ServerConnection};
use http1::{ChunkedDecoder, Field, Framing as RequestFraming, Head};
use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;

use std::sync::Arc;

use http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::debug;

/// Spare scratch sets a worker thread keeps for its busy sessions.
const MAX_SPARE_SCRATCH: usize = 256;

thread_local! {
    /// Scratch of this thread's idle sessions.
    static SPARE_SCRATCH: RefCell<Vec<Scratch>> = const { RefCell::new(Vec::new()) };
}

/// What a session needs only while it has a request.
struct Scratch {
    ubuf: Vec<u8>,
    fields: Vec<Field>,
    response_fields: Vec<Field>,
}

/// The HTTP/1.1 client side of the proxy, over TCP or TLS.
pub(crate) struct Session<S> {
    /// The client's stream, its read and write buffers (none while idle)
    /// and its timer.
    pub(super) conn: ServerConnection<S>,
    pub(super) peer: SocketAddr,
    /// Whether the client reached us over TLS (`X-Forwarded-Proto`).
    pub(super) secure: bool,
    /// See [`crate::session::ClientOrigin::alt_svc`].
    pub(super) alt_svc: Option<std::num::NonZeroU16>,
    /// See [`crate::session::ClientOrigin::routes`].
    pub(super) routes: u16,
    /// See [`crate::session::ClientOrigin::proxied`].
    pub(super) proxied: Option<Arc<crate::wire::proxy_protocol::Proxied>>,
    pub(super) worker: Arc<Worker>,
    /// The plan of the current request (or of the next, between requests).
    pub(super) plan: Arc<Snapshot>,
    /// Bytes for the upstream (head and, when it fits, the body).
    pub(super) ubuf: Vec<u8>,
    pub(super) fields: Vec<Field>,
    pub(super) response_fields: Vec<Field>,
    pub(super) chunked: ChunkedDecoder,
    /// Bytes of a Content-Length request body not yet read from the client.
    pub(super) body_left: usize,
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
    /// The current request's interim (1xx) answers so far.
    pub(super) interim: InterimAnswers,
    /// See [`Idle`].
    chatty: bool,
    /// The current request's SERVER span, when it is traced.
    pub(super) span: Option<Box<Span>>,
}

impl<S: AsyncRead + AsyncWrite + ReadReady + Unpin + Send> Session<S> {
    /// A session for the request whose first bytes `idle` has read.
    pub(super) fn resume(idle: Idle<S>) -> Self {
        let scratch = SPARE_SCRATCH
            .try_with(|spare| spare.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_else(|| Scratch {
                ubuf: Vec::with_capacity(1024),
                fields: Vec::with_capacity(32),
                response_fields: Vec::with_capacity(32),
            });
        Self {
            conn: idle.conn,
            peer: idle.peer.addr(),
            secure: idle.secure,
            alt_svc: idle.alt_svc,
            routes: idle.routes,
            proxied: idle.peer.proxied(),
            worker: idle.worker,
            plan: idle.plan,
            ubuf: scratch.ubuf,
            fields: scratch.fields,
            response_fields: scratch.response_fields,
            chunked: ChunkedDecoder::default(),
            body_left: 0,
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
            interim: InterimAnswers::new(ClientVersion::Http11),
            chatty: idle.chatty,
            span: None,
        }
    }

    /// The connection between requests; the scratch buffers become the
    /// thread's spares.
    fn suspend(self) -> Idle<S> {
        let scratch = Scratch {
            ubuf: self.ubuf,
            fields: self.fields,
            response_fields: self.response_fields,
        };
        let _ = SPARE_SCRATCH.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < MAX_SPARE_SCRATCH {
                spare.push(scratch);
            }
        });
        Idle {
            conn: self.conn,
            peer: crate::session::h1::idle::Peer::new(self.peer, self.proxied),
            secure: self.secure,
            alt_svc: self.alt_svc,
            routes: self.routes,
            chatty: self.chatty,
            worker: self.worker,
            plan: self.plan,
        }
    }

    /// Serves requests while the client has sent some: the connection
    /// back when it is idle (nothing left to read), `None` when it ended.
    /// Not an `async fn`, which would keep the session twice.
    #[allow(clippy::manual_async_fn)] // see above
    pub(super) fn serve(mut self) -> impl Future<Output = Option<Idle<S>>> + Send {
        async move {
            loop {
                self.fields.clear();
                // A request takes the plan current when its head is parsed.
                self.worker.plans.refresh(&mut self.plan);
                self.conn.set_send_timeout(self.plan.send_timeout);
                let limits = self.plan.limits;
                let parsed = http1::parse_head_into(&self.conn.rbuf, &limits, &mut self.fields);
                let head = match parsed {
                    Ok(Some(head)) => head,
                    // Answered, nothing left: a client whose requests come
                    // close together finds the session still here for the
                    // next one (boxing one per request would cost more
                    // than the request's parsing); a quiet one leaves it
                    // for an `Idle`, and so does any other client at once.
                    Ok(None) if self.conn.rbuf.is_empty() && self.chatty => {
                        let quiet = self.conn.last_active() + BUSY_LINGER;
                        let deadlines = Deadlines {
                            idle: self.plan.idle_timeout,
                            request: self.plan.header_read_timeout,
                        };
                        match self.conn.read_until(deadlines, Some(quiet)).await {
                            Ok(()) => continue,
                            Err(ReadEnd::Quiet) => return Some(self.suspend()),
                            Err(ReadEnd::Closed) => return None,
                            Err(_) => {
                                self.conn.close(false).await;
                                return None;
                            }
                        }
                    }
                    // The start of a pipelined head: the connection waits
                    // for the rest without a session.
                    Ok(None) => return Some(self.suspend()),
                    Err(rejection) => {
                        if rejection.status == StatusCode::BAD_REQUEST {
                            // Authority-form (CONNECT) and other targets
                            // that are neither origin- nor absolute-form
                            // count as such, as over HTTP/2.
                            let reason = match rejection.target_form {
                                true => Refusal::TargetForm,
                                false => Refusal::Malformed,
                            };
                            self.worker.metrics().refused(reason);
                        }
                        let failure = Failure::new(rejection.status, rejection.detail);
                        debug!(peer = %self.peer, status = %failure.status, detail = %failure.detail, "rejected request");
                        self.answer_failure(None, failure, false, true).await;
                        return None;
                    }
                };
                self.conn.request_read();
                let next = self.serve_request(&head).await;
                // Idle from here: the keep-alive deadline, the linger below
                // and parking count from the answer, not from the request.
                self.conn.answered();
                crate::session::request_done(
                    self.plan.tracer.as_deref(),
                    self.span.take(),
                    self.chain.take(),
                    &mut self.exchange,
                    &self.outcome,
                );
                self.release_large_buffers();
                match next {
                    Next::KeepAlive if !self.conn.shutting_down() => continue,
                    Next::KeepAlive | Next::Close => {
                        let linger = !self.conn.rbuf.is_empty();
                        self.conn.close(linger).await;
                    }
                    Next::Abort => {
                        let _ = self.conn.flush().await;
                    }
                }
                if self.conn.stalled() {
                    // It stopped reading its answer (`limits.send_timeout`).
                    self.worker.metrics().event(Event::SendTimeout);
                }
                return None;
            }
        }
    }

    /// Routes one request, forwards it and its answer.
    pub(super) async fn serve_request(&mut self, head: &Head) -> Next {
        self.body_abandoned = false;
        self.interim = InterimAnswers::new(match head.http10 {
            true => ClientVersion::Http10,
            false => ClientVersion::Http11,
        });
        let plan = Arc::clone(&self.plan);
        // Request normalisation (issue 15): routing, the chain and the
        // upstream all see the one normal spelling of the target and Host.
        let fields = Fields::H1 {
            buf: &self.conn.rbuf,
            fields: &self.fields,
        };
        let rbuf = &self.conn.rbuf;
        self.span = traced::begin(
            plan.tracer.as_deref(),
            || fields.get("traceparent"),
            || traced::Facts {
                method: head.method.as_str(),
                path: &rbuf[head.path.clone()],
                query: head.query.clone().map(|q| &rbuf[q]),
                host: head.host.clone().map(|h| &rbuf[h]),
                secure: self.secure,
                peer: self.peer,
                via: self.proxied.as_ref().and_then(|p| p.via),
                version: if head.http10 { "1.0" } else { "1.1" },
                user_agent: fields.get("user-agent"),
            },
        );
        let admission = match admit::raw_h1(&self.conn.rbuf, head, self.secure) {
            Ok(raw) => admit::admit(&plan, self.routes, &raw, fields, head.upgrade),
            Err(refusal) => Admission::Refused(refusal),
        };
        let metrics = (self.worker.metrics(), self.peer);
        let route = match admission.settle(&plan, &head.method, metrics, &mut self.span) {
            Ok((route, decided)) => {
                self.decided = decided;
                route
            }
            Err(unrouted) => return self.answer_unrouted(head, unrouted),
        };
        self.max_body = plan.limits.max_body;
        let chain = &plan.route(route).backend(self.decided.backend).chain;
        if !chain.is_empty() {
            if let Some(next) = self.run_chain(head, route, Arc::clone(chain)).await {
                return next;
            }
        }
        if let RequestFraming::Length(len) = head.framing {
            if len > self.max_body {
                let failure = Failure::body_too_large(self.max_body);
                return self.fail(head, Some(route), failure).await;
            }
        }
        match self.forward(head, route).await {
            Ok(next) => next,
            Err(failure) => self.fail(head, Some(route), failure).await,
        }
    }

    /// Ends a connection whose head did not arrive (408 if it began).
    pub(super) async fn end(&mut self, end: ReadEnd) {
        match end {
            // Quiet: never asked for with a head begun.
            ReadEnd::Closed | ReadEnd::Quiet => {}
            ReadEnd::Shutdown => self.conn.close(false).await,
            ReadEnd::TimedOut if self.conn.rbuf.is_empty() => self.conn.close(false).await,
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
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Buffers grown by one large message are not kept.
    pub(super) fn release_large_buffers(&mut self) {
        self.conn.release_large_buffers();
        if self.ubuf.capacity() > SHRINK_ABOVE {
            self.ubuf = Vec::new();
        }
    }
}
