//! HTTP/2 client streams (docs/LIFECYCLE-h2.md). Each stream is one
//! exchange, read straight from the `h2` codec: no HTTP/1.1 bytes in
//! between. It goes through the same phases as an HTTP/1.1 request
//! (normalisation and routing in `admit`, the route's chain, host choice
//! and retries in `attempts`, the same head rules in `wire`), then to the
//! upstream over HTTP/1.1 (`to_h1`) or HTTP/2 (`to_h2`). Request and
//! response bodies flow at the same time, so bidirectional streams
//! (gRPC) interleave and an early answer reaches the client.

mod client_side;
mod pump_h1;
mod pump_h2;
mod request_body;
mod to_h1;
mod to_h2;

use client_side::{unless_reset, ResetWatch, TrailerRules};
use request_body::{hold, RequestBody};

use std::sync::Arc;

use bytes::Bytes;
use h2::{server::SendResponse, RecvStream};
use http::{header, request::Parts, HeaderValue, Method, Request, Response, StatusCode};
use http1::Problem;

use super::{
    admit::{self, Admission},
    traced, ClientOrigin, Failure, Unrouted, Worker, CLIENT_CLOSED,
};
use crate::{
    ids::RouteId,
    middleware::{Answer, Chain, Exchange, Outcome, RequestView},
    plan::Snapshot,
    telemetry::{trace::Span, Event},
    wire::{
        edits::HeaderEdits,
        fields::Fields,
        head::{Framing, Outgoing, RequestContext},
        http2,
        interim::{ClientVersion, InterimAnswers},
        normalize::{self, Refusal},
    },
};

/// One stream's exchange: what the phases share.
pub(super) struct Stream {
    pub worker: Arc<Worker>,
    pub plan: Arc<Snapshot>,
    pub origin: ClientOrigin,
    /// Taken when the response head goes out.
    respond: Option<SendResponse<Bytes>>,
    route: Option<RouteId>,
    chain: Option<Arc<Chain>>,
    pub exchange: Exchange,
    pub outcome: Outcome,
    /// This stream's interim (1xx) answers so far.
    interim: InterimAnswers,
    /// The client reset the stream before its response was complete.
    pub reset: bool,
    /// The request's SERVER span, when it is traced.
    pub span: Option<Box<Span>>,
}

/// Serves one stream until its response has gone out (or failed), on
/// `plan`, the connection's plan when the stream opened. True when the
/// client reset the stream before its response was complete (its
/// upstream exchange was cancelled then): the connection counts those.
pub(crate) async fn serve_stream(
    request: Request<RecvStream>,
    respond: SendResponse<Bytes>,
    origin: ClientOrigin,
    worker: Arc<Worker>,
    plan: Arc<Snapshot>,
) -> bool {
    let mut stream = Stream {
        worker,
        plan,
        origin,
        respond: Some(respond),
        route: None,
        chain: None,
        exchange: Exchange::default(),
        outcome: Outcome {
            status: StatusCode::OK,
            upstream: None,
            body_bytes: 0,
        },
        interim: InterimAnswers::new(ClientVersion::Http2),
        reset: false,
        span: None,
    };
    let (parts, body) = request.into_parts();
    // Boxed: the task's future stays a few hundred bytes, and the task
    // machinery moves it (spawn, each change of stage) without copying
    // the exchange's large state.
    if let Err(failure) = Box::pin(stream.serve_request(&parts, body)).await {
        if !stream.reset {
            stream.answer_failure(failure);
        }
    }
    if stream.reset {
        stream.worker.metrics().event(Event::StreamReset);
        if stream.respond.is_some() {
            // No head went out: logged as nginx does.
            stream.outcome.status = CLIENT_CLOSED;
        }
    }
    let status = stream.outcome.status;
    stream.count(status);
    traced::status(&mut stream.span, status);
    super::request_done(
        stream.plan.tracer.as_deref(),
        stream.span.take(),
        stream.chain.take(),
        &mut stream.exchange,
        &stream.outcome,
    );
    stream.reset
}

/// An HTTP/2 request as normalisation reads it. CONNECT (authority-form)
/// is refused as over HTTP/1.1.
fn raw_h2(parts: &Parts, secure: bool) -> Result<normalize::Raw<'_>, Refusal> {
    if parts.method == Method::CONNECT {
        return Err(Refusal::TargetForm);
    }
    if parts.headers.values().any(|v| http2::padded(v.as_bytes())) {
        return Err(Refusal::Malformed);
    }
    let host = match host_of(parts) {
        Some(host) => Some(std::str::from_utf8(host).map_err(|_| Refusal::Host)?),
        None => return Err(Refusal::Host),
    };
    Ok(normalize::Raw {
        method: &parts.method,
        target: parts
            .uri
            .path_and_query()
            .map_or(b"/", |pq| pq.as_str().as_bytes()),
        path: parts.uri.path(),
        query: parts.uri.query().map(str::as_bytes),
        host,
        secure,
    })
}

/// Where an HTTP/2 (or bridged HTTP/3) request names its host:
/// `:authority`, or without one the `host` field (RFC 9113 8.3.1). A
/// `host` field, like an HTTP/1.1 Host, may appear once, and beside
/// `:authority` must name the same host (RFC 9113 8.3.1's "SHOULD treat
/// as malformed"; `h3` checks only the first of several). `None` when the
/// request names none, several, or two different ones: it is refused, so
/// that it neither skips the routes for a host nor reaches an upstream
/// without a Host, and no two parts of the proxy read different hosts.
fn host_of(parts: &Parts) -> Option<&[u8]> {
    let mut hosts = parts.headers.get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (host, None) => host.map(HeaderValue::as_bytes),
        _ => return None,
    };
    match (parts.uri.authority().map(|a| a.as_str().as_bytes()), host) {
        (Some(authority), Some(host)) if !authority.eq_ignore_ascii_case(host) => None,
        (Some(authority), _) => Some(authority),
        (None, host) => host,
    }
}

impl Stream {
    async fn serve_request(&mut self, parts: &Parts, body: RecvStream) -> Result<(), Failure> {
        let plan = Arc::clone(&self.plan);
        let fields = Fields::Map(&parts.headers);
        self.span = traced::begin(
            plan.tracer.as_deref(),
            || fields.get("traceparent"),
            || traced::Facts {
                method: parts.method.as_str(),
                path: parts.uri.path().as_bytes(),
                query: parts.uri.query().map(str::as_bytes),
                host: host_of(parts),
                secure: self.origin.secure,
                peer: self.origin.peer,
                via: self.origin.proxied.as_ref().and_then(|p| p.via),
                version: if self.origin.h3 { "3" } else { "2" },
                user_agent: fields.get("user-agent"),
            },
        );
        let admission = match raw_h2(parts, self.origin.secure) {
            Ok(raw) => admit::admit(&plan, self.origin.routes, &raw, fields, false),
            Err(refusal) => Admission::Refused(refusal),
        };
        let metrics = (self.worker.metrics(), self.origin.peer);
        let (route, decided) = match admission.settle(&plan, &parts.method, metrics, &mut self.span)
        {
            Ok(routed) => routed,
            Err(unrouted) => {
                self.answer_unrouted(unrouted);
                return Ok(());
            }
        };
        self.route = Some(route);
        let length = content_length(parts);
        let mut max_body = plan.limits.max_body;
        let mut body = if body.is_end_stream() {
            RequestBody::Empty
        } else {
            RequestBody::Streaming(body)
        };
        let taken = plan.route(route).backend(decided.backend);
        let chain = Arc::clone(&taken.chain);
        if !chain.is_empty() {
            let trust = plan.trust_forwarded;
            let client_ip = admit::client_ip(self.origin.peer, trust, fields);
            self.exchange
                .begin(route, self.worker.index, &parts.method, max_body);
            self.exchange.trace = traced::for_calls(&self.span, plan.tracer.as_ref());
            self.chain = Some(Arc::clone(&chain));
            let path = decided.rewrites.path.as_deref().unwrap_or(parts.uri.path());
            let view = RequestView {
                method: &parts.method,
                path,
                query: parts.uri.query(),
                client_ip,
                body_len: length,
                body: None,
                fields,
                host: host_of(parts).and_then(|h| std::str::from_utf8(h).ok()),
                secure: self.origin.secure,
                proxied: self.origin.proxied.as_deref(),
            };
            if let Some(max) = chain.wants_body(&view) {
                body = hold(body, max.min(max_body)).await?;
            }
            let view = RequestView {
                body: match &body {
                    RequestBody::Held(bytes, _) => Some(&bytes[..]),
                    _ => None,
                },
                ..view
            };
            if let Some(answer) = chain.request(&view, &mut self.exchange).await {
                traced::refused(&mut self.span, &answer, || {
                    chain.answered_by(&self.exchange)
                });
                self.answer(answer);
                return Ok(());
            }
            traced::query_edited(
                plan.tracer.as_deref(),
                &mut self.span,
                self.exchange.request_headers.query.as_deref(),
            );
            max_body = self.exchange.max_body;
            if let Some(filter) = self.exchange.request_filter.take() {
                body = request_body::filtered(body, filter, max_body).await?;
            }
        }
        if length.is_some_and(|len| len > max_body) {
            return Err(Failure::body_too_large(max_body));
        }
        let upstream = taken.upstream.ok_or_else(Failure::no_backend)?;
        let config = plan.upstream(upstream);
        let framing = match (&body, length) {
            (RequestBody::Empty, _) => Framing::None,
            (RequestBody::Held(bytes, _), _) => Framing::Length(bytes.len() as u64),
            (RequestBody::Streaming(_), Some(len)) => Framing::Length(len as u64),
            (RequestBody::Streaming(_), None) => Framing::Chunked,
        };
        // Taken out of the exchange: the upstream phase borrows the stream.
        let edits = self.take_request_edits();
        let proxied = self.origin.proxied.clone();
        let context = RequestContext {
            peer: self.origin.peer.ip(),
            secure: self.origin.secure,
            trust_forwarded: plan.trust_forwarded,
            host_header: plan.route(route).host_header(config),
            fallback_host: None,
            path: decided.rewrites.path.as_deref(),
            host: decided.rewrites.host.as_deref(),
            upgrade: None,
            strip_overrides: decided.strip_overrides,
            framing,
            edits: edits.as_ref(),
            proxied: proxied.as_deref(),
        };
        let outgoing = Outgoing {
            method: &parts.method,
            path: parts.uri.path().as_bytes(),
            query: parts.uri.query().map(str::as_bytes),
            host: host_of(parts),
            fields,
        };
        if !plan.route(route).mirrors.is_empty() {
            let in_hand = match &body {
                RequestBody::Empty => Some(&[][..]),
                RequestBody::Held(bytes, _) => Some(&bytes[..]),
                RequestBody::Streaming(_) => None,
            };
            let build = super::mirror::head_for(&outgoing, &context, plan.route(route));
            let place = (&plan, &self.worker);
            super::mirror::start(place, plan.route(route), self.origin.peer, build, in_hand);
        }
        match config.protocol {
            crate::config::Protocol::Http1 => {
                to_h1::forward(self, upstream, &outgoing, &context, body, max_body).await
            }
            crate::config::Protocol::H2c | crate::config::Protocol::H2 => {
                let source = &parts.uri;
                to_h2::forward(self, upstream, &outgoing, &context, source, body, max_body).await
            }
        }
    }

    /// The chain's edits to the request head, if it made any.
    fn take_request_edits(&mut self) -> Option<HeaderEdits> {
        self.chain.as_ref()?;
        Some(std::mem::take(&mut self.exchange.request_headers)).filter(|e| !e.is_empty())
    }

    /// A problem+json answer of the proxy's own.
    fn answer_failure(&mut self, failure: Failure) {
        self.answer(Answer::problem(failure.status, failure.detail));
    }

    /// The answer to a request that reached no route (`Unrouted`).
    fn answer_unrouted(&mut self, unrouted: Unrouted) {
        match unrouted {
            Unrouted::Asterisk => {
                self.outcome.status = StatusCode::NO_CONTENT;
                let mut response = Response::new(());
                *response.status_mut() = StatusCode::NO_CONTENT;
                self.finish_answer(response, None);
            }
            Unrouted::Problem {
                status,
                detail,
                allow,
            } => {
                let mut answer = Answer::problem(status, detail);
                if let Some(allow) = allow.and_then(|a| HeaderValue::from_str(&a).ok()) {
                    answer = answer.with_header(header::ALLOW, allow);
                }
                self.answer(answer);
            }
        }
    }

    /// A handler's (or the proxy's) answer, with what the chain adds to responses.
    fn answer(&mut self, answer: Answer) {
        self.outcome = Outcome {
            status: answer.status,
            upstream: None,
            body_bytes: 0,
        };
        let problem = answer.body.is_none();
        let body = match answer.body {
            Some(body) => Some(body),
            None => answer.detail.map(|detail| {
                Problem::new(answer.status, detail)
                    .with_errors(answer.violations)
                    .to_json()
                    .into()
            }),
        };
        let mut response = Response::new(());
        *response.status_mut() = answer.status;
        let headers = response.headers_mut();
        if problem && body.is_some() {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(http1::problem::PROBLEM_JSON),
            );
        }
        for (name, value) in answer.headers {
            headers.append(name, value);
        }
        self.finish_answer(response, body);
    }

    fn finish_answer(&mut self, mut response: Response<()>, body: Option<Bytes>) {
        if let Some(edits) = self.response_edits(response.status()) {
            let headers = response.headers_mut();
            for name in edits.remove.iter().chain(edits.set.iter().map(|(n, _)| n)) {
                headers.remove(name);
            }
            for (name, value) in edits.set.iter().chain(&edits.add) {
                headers.append(name.clone(), value.clone());
            }
            self.exchange.response_headers = edits;
        }
        let empty = body.as_ref().is_none_or(Bytes::is_empty);
        if let Some(length) = body.as_ref().map(Bytes::len) {
            response
                .headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
        if let (Some(mut send), Some(body)) = (self.send_head(response, empty), body) {
            self.outcome.body_bytes = body.len() as u64;
            let _ = send.send_data(body, true);
        }
    }

    fn count(&self, status: StatusCode) {
        let routes = self.plan.route_count();
        self.worker
            .metrics()
            .request(self.route, status.as_u16(), routes);
    }
}

/// The request's Content-Length, when it gave one.
fn content_length(parts: &Parts) -> Option<usize> {
    parts
        .headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn returned<A, B, C, D, E, F: std::future::Future>(_: fn(A, B, C, D, E) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// A stream's future is moved when its task is spawned: it stays
    /// small (cold paths such as opening a connection are boxed).
    #[test]
    fn a_stream_future_stays_small() {
        let size = returned(serve_stream as fn(_, _, _, _, _) -> _);
        assert!(size <= 1536, "serve_stream's future is {size} bytes");
    }
}
