//! The SERVER span of one request (docs/OBSERVABILITY.md), the same for
//! HTTP/1.1 and HTTP/2 clients: begun when a head is read (if `traces:`
//! is on and the sampler takes the request), named and given its route
//! when routed, a middleware refusal recorded as an event, its status
//! set with the request's row in the metrics, and sent when the exchange
//! ends. With `traces:` off, each of these is one `None` check.

use std::net::SocketAddr;

use http::StatusCode;

use super::attempts::traced::Traced;
use crate::{
    middleware::{Answer, CallTrace},
    telemetry::trace::{Span, SpanContext, SpanKind, Tracer, Value},
};

/// What the span records of a request's head.
pub(super) struct Facts<'a> {
    pub method: &'a str,
    pub path: &'a [u8],
    pub query: Option<&'a [u8]>,
    /// Host or `:authority`.
    pub host: Option<&'a [u8]>,
    pub secure: bool,
    pub peer: SocketAddr,
    /// The load balancer the client came through (its PROXY protocol
    /// header named `peer`), if it did.
    pub via: Option<SocketAddr>,
    /// `1.0`, `1.1` or `2`.
    pub version: &'static str,
    pub user_agent: Option<&'a [u8]>,
}

/// The request's SERVER span, if tracing is on and it is sampled (by the
/// `traceparent` that `parent` finds); `facts` is read only then.
///
/// Each hook here is an inlined `None` check in front of a cold body, so
/// that with `traces:` off a request pays a compare and no call
/// (bench/proxy-callgrind.sh measures it, docs/OBSERVABILITY.md).
#[inline]
pub(super) fn begin<'a>(
    tracer: Option<&Tracer>,
    parent: impl FnOnce() -> Option<&'a [u8]>,
    facts: impl FnOnce() -> Facts<'a>,
) -> Option<Box<Span>> {
    let tracer = tracer?;
    let (context, parent) = tracer.sample(parent())?;
    Some(started(tracer, context, parent, &facts()))
}

#[cold]
#[inline(never)]
fn started(
    tracer: &Tracer,
    context: SpanContext,
    parent: Option<u64>,
    facts: &Facts<'_>,
) -> Box<Span> {
    let mut span = Box::new(Span::new(context, parent, SpanKind::Server));
    span.name = facts.method.to_string();
    span.str("http.request.method", facts.method.as_bytes());
    span.str("url.path", facts.path);
    span.str("url.scheme", if facts.secure { b"https" } else { b"http" });
    if let Some(query) = facts.query.and_then(|query| tracer.query(query)) {
        span.str("url.query", &query);
    }
    if let Some(host) = facts.host {
        let (name, port) = split_host(host);
        span.str("server.address", name);
        let port = port.unwrap_or(if facts.secure { 443 } else { 80 });
        span.int("server.port", i64::from(port));
    }
    span.str("client.address", facts.peer.ip().to_string().as_bytes());
    span.int("client.port", i64::from(facts.peer.port()));
    if let Some(via) = facts.via {
        span.str("network.peer.address", via.ip().to_string().as_bytes());
        span.int("network.peer.port", i64::from(via.port()));
    }
    span.str("network.protocol.version", facts.version.as_bytes());
    if let Some(agent) = facts.user_agent {
        span.str("user_agent.original", agent);
    }
    span
}

/// A handler took parameters out of the query (`api_key`'s key): the
/// span records the query as it goes upstream, not as the client sent it.
#[inline]
pub(super) fn query_edited(
    tracer: Option<&Tracer>,
    span: &mut Option<Box<Span>>,
    query: Option<&str>,
) {
    if let (Some(tracer), Some(span), Some(query)) = (tracer, span, query) {
        rerecord_query(span, tracer, query);
    }
}

#[cold]
#[inline(never)]
fn rerecord_query(span: &mut Span, tracer: &Tracer, query: &str) {
    span.attributes.retain(|(key, _)| *key != "url.query");
    if let Some(query) = Some(query.as_bytes())
        .filter(|query| !query.is_empty())
        .and_then(|query| tracer.query(query))
    {
        span.str("url.query", &query);
    }
}

/// The route matched: `http.route` and the span's name, `METHOD route`
/// (`route` is looked up only for a traced request).
#[inline]
pub(super) fn routed<'a>(span: &mut Option<Box<Span>>, route: impl FnOnce() -> &'a str) {
    if let Some(span) = span {
        name_route(span, route());
    }
}

#[cold]
#[inline(never)]
fn name_route(span: &mut Span, route: &str) {
    span.str("http.route", route.as_bytes());
    span.name.push(' ');
    span.name.push_str(route);
}

/// A handler of the chain answered instead of the upstream: jwt's 401,
/// rate_limit's 429, validate's 400; the reason is its problem's detail,
/// `by` the handler's name (looked up only for a traced request).
#[inline]
pub(super) fn refused<'a>(
    span: &mut Option<Box<Span>>,
    answer: &Answer,
    by: impl FnOnce() -> &'a str,
) {
    if let Some(span) = span {
        refusal(span, answer, by());
    }
}

#[cold]
#[inline(never)]
fn refusal(span: &mut Span, answer: &Answer, by: &str) {
    let mut attributes = vec![
        (
            "http.response.status_code",
            Value::Int(i64::from(answer.status.as_u16())),
        ),
        ("sluice.handler", Value::Str(by.to_string())),
    ];
    if let Some(detail) = &answer.detail {
        attributes.push(("sluice.reason", Value::Str(detail.clone())));
    }
    span.event("middleware.refused", attributes);
    span.str("sluice.refused_by", by.as_bytes());
    if let Some(detail) = &answer.detail {
        span.str("sluice.refusal_reason", detail.as_bytes());
    }
}

/// The status the client gets; 5xx marks the span failed (`error.type`).
#[inline]
pub(super) fn status(span: &mut Option<Box<Span>>, status: StatusCode) {
    if let Some(span) = span {
        set_status(span, status);
    }
}

#[cold]
#[inline(never)]
fn set_status(span: &mut Span, status: StatusCode) {
    span.int("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.error = true;
        span.str("error.type", status.as_str().as_bytes());
    }
}

/// What a traced request's upstream attempts need of its SERVER span,
/// and the target as it goes upstream for their `url.full`: `sent` gives
/// its path and query, and is called only for a traced request (the
/// query as `traces.query` says, as on the SERVER span).
#[inline]
pub(super) fn for_attempts<'a>(
    span: &Option<Box<Span>>,
    tracer: Option<&Tracer>,
    method: &http::Method,
    sent: impl FnOnce() -> (&'a [u8], Option<&'a [u8]>),
) -> Option<Box<Traced>> {
    match (span.as_deref(), tracer) {
        (Some(span), Some(tracer)) => {
            let (path, query) = sent();
            Some(attempts_of(span, tracer, method, path, query))
        }
        _ => None,
    }
}

#[cold]
#[inline(never)]
fn attempts_of(
    span: &Span,
    tracer: &Tracer,
    method: &http::Method,
    path: &[u8],
    query: Option<&[u8]>,
) -> Box<Traced> {
    let mut target = path.to_vec();
    if let Some(query) = query.and_then(|query| tracer.query(query)) {
        target.push(b'?');
        target.extend_from_slice(&query);
    }
    Box::new(Traced {
        parent: span.context,
        method: method.clone(),
        target: target.into_boxed_slice(),
    })
}

/// What the chain's handlers need to trace the calls they make
/// (`ext_authz`), `None` when the request is not traced.
#[inline]
pub(super) fn for_calls(
    span: &Option<Box<Span>>,
    tracer: Option<&std::sync::Arc<Tracer>>,
) -> Option<CallTrace> {
    match (span.as_deref(), tracer) {
        (Some(span), Some(tracer)) => Some(CallTrace {
            parent: span.context,
            tracer: std::sync::Arc::clone(tracer),
        }),
        _ => None,
    }
}

/// Ends the span and queues it for export.
#[inline]
pub(super) fn end(tracer: Option<&Tracer>, span: Option<Box<Span>>) {
    if let (Some(tracer), Some(span)) = (tracer, span) {
        send(tracer, span);
    }
}

#[cold]
#[inline(never)]
fn send(tracer: &Tracer, mut span: Box<Span>) {
    span.end();
    tracer.send(span);
}

/// `name[:port]`, `[v6][:port]`.
fn split_host(host: &[u8]) -> (&[u8], Option<u16>) {
    let colon = match host.iter().rposition(|&b| b == b':') {
        Some(i) if !host[i..].contains(&b']') => i,
        _ => return (host, None),
    };
    let port = std::str::from_utf8(&host[colon + 1..])
        .ok()
        .and_then(|p| p.parse().ok());
    (&host[..colon], port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_split() {
        assert_eq!(
            split_host(b"example.com:8080"),
            (&b"example.com"[..], Some(8080))
        );
        assert_eq!(split_host(b"[::1]"), (&b"[::1]"[..], None));
        assert_eq!(split_host(b"[::1]:9"), (&b"[::1]"[..], Some(9)));
    }
}
