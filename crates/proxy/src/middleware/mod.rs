//! The middleware chain: cross-cutting handlers that a route lists
//! (docs/MIDDLEWARE.md). One trait for all, with synchronous phases, since
//! what they do (headers, tokens with cached keys, validation, counters)
//! needs no await; a handler that must wait (an injected delay, a key
//! refetch) returns [`Flow::Wait`].
//!
//! Handlers run in the listed order on the request; any may answer early,
//! and then only the handlers before it see the response. Response and
//! done phases run in reverse order, like the layers of an onion. An empty
//! chain costs one branch per request.

// The handlers' modules are declared by the registry (one line per
// handler type in `config::for_each_handler`, config/middleware.rs);
// these are the helpers they share.
pub(crate) mod body_filter;
mod build;
mod jwks;
mod oidc_session;
mod per_request;
mod rate_limit_redis;
mod rate_policy;
mod watched;

/// `mod NAME;` for each handler type's module, from the registry.
macro_rules! declare_handler_modules {
    ($($name:literal (mod $module:ident) => $settings:ident $(, $defaults:ident)?;)*) => {
        $(pub(crate) mod $module;)*
    };
}
crate::config::for_each_handler!(declare_handler_modules);

use std::{
    fmt,
    future::Future,
    net::IpAddr,
    pin::Pin,
    sync::Arc,
    time::{Duration, Instant},
};

use http::{HeaderName, HeaderValue, Method, StatusCode};

use crate::{
    ids::{RouteId, UpstreamId},
    telemetry::Exposition,
    wire::{edits::HeaderEdits, fields::Fields, proxy_protocol::Proxied},
};

pub(crate) use build::{build, BuildContext, Chains, StatsSections};
pub(crate) use compress::gzip_bytes as compress_gzip_bytes;
pub(crate) use correlation::{is_traceparent, next_traceparent};
pub(crate) use per_request::PerRequest;

/// The parsers of the handlers that decide who may pass, for the fuzz
/// targets (`proxy::fuzzing`).
pub(crate) mod auth_parsers {
    pub(crate) use super::api_key::KeyList;
    pub(crate) use super::basic_auth::{credentials, Users};
    pub(crate) use super::ext_authz::grpc::decision_of;
    pub(crate) use super::ext_authz::Decision;
    pub(crate) use super::oidc_session::{cookie, query_param, Sealer};
}

/// One request as the handlers see it (the head; the body when a handler
/// asked for it).
#[derive(Debug)]
pub(crate) struct RequestView<'a> {
    pub method: &'a Method,
    /// The path the upstream receives, without the query: normalised
    /// (docs/CONFIG.md, "Request normalisation") unless `paths.forward:
    /// original`; still percent-encoded where it must be.
    pub path: &'a str,
    pub query: Option<&'a str>,
    /// The peer, or with `forwarded.trust` the last X-Forwarded-For address.
    pub client_ip: IpAddr,
    /// Its declared Content-Length, if any.
    pub body_len: Option<usize>,
    /// The whole body, when a handler of the chain asked for it.
    pub body: Option<&'a [u8]>,
    /// The header fields, whichever protocol carried them.
    pub fields: Fields<'a>,
    /// The Host (`:authority` over HTTP/2 and HTTP/3) as sent.
    pub host: Option<&'a str>,
    /// The client came over TLS (or QUIC).
    pub secure: bool,
    /// What the connection's PROXY protocol header said, if it had one.
    pub proxied: Option<&'a Proxied>,
}

impl<'a> RequestView<'a> {
    /// A `GET /` from 127.0.0.1 with `headers` and no body: the request
    /// the handlers' unit tests start from (struct update for the rest).
    #[cfg(test)]
    pub(crate) fn get(headers: &'a http::HeaderMap) -> Self {
        RequestView {
            method: &http::Method::GET,
            path: "/",
            query: None,
            client_ip: std::net::Ipv4Addr::LOCALHOST.into(),
            body_len: None,
            body: None,
            fields: crate::wire::fields::Fields::Map(headers),
            host: None,
            secure: false,
            proxied: None,
        }
    }

    /// The first field called `name` (any case).
    pub(crate) fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.fields.get(name)
    }

    pub(crate) fn headers(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        self.fields.iter()
    }
}

/// What a handler decides about a request.
pub(crate) enum Flow {
    Next,
    Answer(Answer),
    /// Waits, then goes on as the future decides.
    Wait(Pin<Box<dyn Future<Output = Flow> + Send>>),
    /// Runs the same handler's request phase again (after a wait that
    /// changed what it will find, such as refetched keys).
    Again,
    /// Changes the exchange (after a wait: the headers an authorization
    /// service gave), then goes on as it decides.
    Apply(Box<dyn FnOnce(&mut Exchange) -> Flow + Send>),
}

impl fmt::Debug for Flow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Next => f.write_str("Next"),
            Self::Answer(answer) => f.debug_tuple("Answer").field(answer).finish(),
            Self::Wait(_) => f.write_str("Wait"),
            Self::Again => f.write_str("Again"),
            Self::Apply(_) => f.write_str("Apply"),
        }
    }
}

/// An answer a handler gives instead of the upstream.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// A problem+json body with this detail; `None`: no body.
    pub detail: Option<String>,
    /// Violations listed in the problem body.
    pub violations: Vec<http1::Violation>,
    /// A body sent as it is instead of a problem (its `Content-Type`
    /// among `headers`): a route's `respond`, or an authorization
    /// service's denial.
    pub body: Option<bytes::Bytes>,
}

impl Answer {
    pub(crate) fn problem(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            detail: Some(detail.into()),
            violations: Vec::new(),
            body: None,
        }
    }

    /// A redirect to `location`, without a body.
    pub(crate) fn redirect(status: StatusCode, location: HeaderValue) -> Self {
        Self {
            detail: None,
            ..Self::problem(status, "")
        }
        .with_header(http::header::LOCATION, location)
    }

    pub(crate) fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }
}

/// What the handlers of one exchange share, kept on the session and
/// cleared per request so that its buffers are reused.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    pub route: RouteId,
    pub worker: usize,
    pub method: Method,
    pub client_ip: Option<IpAddr>,
    pub started: Option<Instant>,
    /// Edits to the head sent upstream.
    pub request_headers: HeaderEdits,
    /// Edits to the head sent to the client.
    pub response_headers: HeaderEdits,
    pub correlation_id: Option<HeaderValue>,
    pub traceability_id: Option<HeaderValue>,
    pub traceparent: Option<HeaderValue>,
    /// The verified token, for handlers after `jwt`.
    pub claims: Option<Arc<::jwt::Verified>>,
    /// The request body may be this large (`body_limit` lowers it).
    pub max_body: usize,
    /// A response body transformation a handler asked for (`compress`,
    /// `grpc_web`), taken by the relay at the response head.
    pub body_filter: Option<body_filter::FilterOffer>,
    /// A request body transformation (gRPC-Web's text mode), taken by
    /// the request's body path toward an HTTP/2 upstream.
    pub request_filter: Option<body_filter::RequestBodyFilter>,
    /// The request's SERVER span, when it is traced: a handler that calls
    /// out (`ext_authz`) records the call as a CLIENT span, its child.
    pub trace: Option<CallTrace>,
    /// What each handler type keeps of this request alone (the
    /// `Access-Control-Allow-Origin` to answer with, the API operation
    /// matched, the concurrency slots held, the access log line begun),
    /// declared in the handler's file: reset when a request begins and
    /// when the done phase ends.
    pub state: PerRequest,
    /// How many handlers ran their request phase (and see the response).
    ran: usize,
}

/// What a handler needs to trace a call it makes: the SERVER span its
/// CLIENT span is a child of, and the tracer that exports it.
#[derive(Debug, Clone)]
pub(crate) struct CallTrace {
    pub parent: crate::telemetry::trace::SpanContext,
    pub tracer: Arc<crate::telemetry::trace::Tracer>,
}

impl Exchange {
    pub(crate) fn begin(
        &mut self,
        route: RouteId,
        worker: usize,
        method: &Method,
        max_body: usize,
    ) {
        self.route = route;
        self.worker = worker;
        self.method = method.clone();
        self.client_ip = None;
        self.started = None;
        self.request_headers.clear();
        self.response_headers.clear();
        self.correlation_id = None;
        self.traceability_id = None;
        self.traceparent = None;
        self.claims = None;
        self.max_body = max_body;
        self.state.reset();
        self.body_filter = None;
        self.request_filter = None;
        self.trace = None;
        self.ran = 0;
    }
}

/// How an exchange ended, for the done phase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outcome {
    pub status: StatusCode,
    pub upstream: Option<UpstreamId>,
    /// Body bytes sent to the client.
    pub body_bytes: u64,
}

/// One cross-cutting concern.
pub(crate) trait Handler: Send + Sync + fmt::Debug {
    /// Before the request goes upstream.
    fn request(&self, _request: &RequestView<'_>, _exchange: &mut Exchange) -> Flow {
        Flow::Next
    }

    /// When the response head is about to be written (ours or the upstream's).
    fn response(&self, _status: StatusCode, _exchange: &mut Exchange) {}

    /// After the exchange, with its outcome.
    fn done(&self, _exchange: &mut Exchange, _outcome: &Outcome) {}

    /// The most body this handler wants to see whole before `request`, if any.
    fn wants_body(&self, _request: &RequestView<'_>) -> Option<usize> {
        None
    }

    /// The most response body this handler wants to see, if any.
    fn wants_response_body(&self, _status: StatusCode, _exchange: &Exchange) -> Option<usize> {
        None
    }

    /// Looks at a whole response body (before the head is written).
    fn response_body(&self, _response: &ResponseView<'_>, _exchange: &Exchange) {}

    /// For `/metrics`: this instance's samples (`name`: its name in
    /// `middleware:`). Instances of one type write to the same families in
    /// turn (the exposition keeps each family together); a figure summed
    /// over them is written with [`crate::telemetry::Family::add`].
    fn render_metrics(&self, _name: &str, _out: &mut Exposition) {}

    /// For `/stats.json`: figures about the route at position `route`,
    /// whose chain this handler is on, as members of its entry in
    /// `routes` (`latency`). A member an earlier handler of the chain
    /// wrote is kept.
    fn route_stats(
        &self,
        _route: usize,
        _figures: &mut serde_json::Map<String, serde_json::Value>,
    ) {
    }

    /// For `/stats.json`: this instance's figures, as `{name: figures}`
    /// members of top-level sections (`rate_limit_stores`).
    fn stats(&self, _name: &str, _sections: &mut StatsSections) {}
}

/// An upstream response whose body was read whole for a handler.
#[derive(Debug)]
pub(crate) struct ResponseView<'a> {
    pub status: StatusCode,
    pub content_type: Option<&'a [u8]>,
    pub body: &'a [u8],
}

/// The handlers of one route, in order.
#[derive(Debug, Default)]
pub(crate) struct Chain {
    handlers: Vec<Arc<dyn Handler>>,
    /// Each handler's name in `middleware:` (or its type's), for the
    /// trace event of a refusal.
    names: Vec<Arc<str>>,
}

impl Chain {
    /// This chain with `more` handlers after its own (a route's filters).
    pub(crate) fn extended(&self, more: Vec<(Arc<str>, Arc<dyn Handler>)>) -> Self {
        let (names, handlers): (Vec<_>, Vec<_>) = more.into_iter().unzip();
        Self {
            handlers: self.handlers.iter().cloned().chain(handlers).collect(),
            names: self.names.iter().cloned().chain(names).collect(),
        }
    }

    /// The name of the handler that answered in [`Self::request`]: the
    /// one after those that ran through.
    pub(crate) fn answered_by(&self, exchange: &Exchange) -> &str {
        self.names.get(exchange.ran).map_or("", |name| name)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }

    /// The largest body a handler wants held whole, if any does.
    pub(crate) fn wants_body(&self, request: &RequestView<'_>) -> Option<usize> {
        self.handlers
            .iter()
            .filter_map(|h| h.wants_body(request))
            .max()
    }

    /// Runs the request phase; `Some` when a handler answered.
    pub(crate) async fn request(
        &self,
        request: &RequestView<'_>,
        exchange: &mut Exchange,
    ) -> Option<Answer> {
        exchange.started.get_or_insert_with(Instant::now);
        exchange.client_ip = Some(request.client_ip);
        for handler in &self.handlers {
            let mut flow = handler.request(request, exchange);
            loop {
                match flow {
                    Flow::Next => break,
                    Flow::Answer(answer) => return Some(answer),
                    Flow::Wait(wait) => flow = wait.await,
                    Flow::Again => flow = handler.request(request, exchange),
                    Flow::Apply(apply) => flow = apply(exchange),
                }
            }
            exchange.ran += 1;
        }
        None
    }

    /// The largest response body a handler that ran wants to see, if any.
    pub(crate) fn wants_response_body(
        &self,
        status: StatusCode,
        exchange: &Exchange,
    ) -> Option<usize> {
        self.handlers[..exchange.ran]
            .iter()
            .filter_map(|h| h.wants_response_body(status, exchange))
            .max()
    }

    /// Shows a whole response body to the handlers that ran, last first.
    pub(crate) fn response_body(&self, response: &ResponseView<'_>, exchange: &Exchange) {
        for handler in self.handlers[..exchange.ran].iter().rev() {
            handler.response_body(response, exchange);
        }
    }

    /// Runs the response phase, last handler first.
    pub(crate) fn response(&self, status: StatusCode, exchange: &mut Exchange) {
        for handler in self.handlers[..exchange.ran].iter().rev() {
            handler.response(status, exchange);
        }
    }

    /// Runs the done phase, last handler first.
    pub(crate) fn done(&self, exchange: &mut Exchange, outcome: &Outcome) {
        for handler in self.handlers[..exchange.ran].iter().rev() {
            handler.done(exchange, outcome);
        }
        // Releases what the handlers held for it (concurrency slots).
        exchange.state.reset();
    }
}

/// Milliseconds of a duration for logs.
fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
