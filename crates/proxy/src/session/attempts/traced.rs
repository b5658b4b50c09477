//! The CLIENT span of one attempt of an exchange (docs/OBSERVABILITY.md):
//! a child of the request's SERVER span, naming the host tried and how
//! many attempts went before it (`http.request.resend_count`); the
//! upstream's `traceparent` names it as the parent.

use http::{Method, StatusCode};

use super::Hosts;
use crate::{
    ids::HostId,
    telemetry::trace::{Span, SpanContext, SpanKind},
};

/// What a traced request's attempts need: the SERVER span they are
/// children of, the method, and the target as sent upstream (path, and
/// the query as `traces.query` records it) for `url.full`.
#[derive(Debug, Clone)]
pub(crate) struct Traced {
    pub parent: SpanContext,
    pub method: Method,
    pub target: Box<[u8]>,
}

/// An attempt's span, `None` when the request is not traced.
pub(super) struct AttemptSpan(Option<Box<Span>>);

// Each method is an inlined `None` check in front of a cold body: with
// `traces:` off an attempt pays a compare and no call.
impl AttemptSpan {
    #[inline]
    pub(super) fn begin(hosts: &Hosts<'_>, host: HostId, attempt: u32) -> Self {
        match &hosts.trace {
            None => Self(None),
            Some(traced) => Self(Some(Self::started(hosts, traced, host, attempt))),
        }
    }

    #[cold]
    #[inline(never)]
    fn started(hosts: &Hosts<'_>, traced: &Traced, host: HostId, attempt: u32) -> Box<Span> {
        let Traced {
            parent,
            method,
            target,
        } = traced;
        let mut span = Box::new(Span::new(
            parent.child(),
            Some(parent.span_id),
            SpanKind::Client,
        ));
        let upstream = hosts.plan.upstream(hosts.upstream);
        span.name = format!("{} {}", method, upstream.name);
        span.str("http.request.method", method.as_str().as_bytes());
        let address = upstream.hosts[host.index()];
        let authority = upstream.host_name(host);
        // The host as configured (`name:port`, never a user or password:
        // they are not part of it) and the target as sent.
        let scheme: &[u8] = if upstream.tls.is_some() {
            b"https://"
        } else {
            b"http://"
        };
        span.str("url.full", &[scheme, authority.as_bytes(), target].concat());
        let name = authority.rsplit_once(':').map_or(authority, |(n, _)| n);
        span.str("server.address", name.as_bytes());
        span.int("server.port", i64::from(address.port()));
        span.str("network.peer.address", address.ip().to_string().as_bytes());
        span.str("sluice.upstream", upstream.name.as_bytes());
        if attempt > 0 {
            span.int("http.request.resend_count", i64::from(attempt));
        }
        span
    }

    /// The `traceparent` the upstream gets: this span as the parent.
    #[inline]
    pub(super) fn traceparent(&self) -> Option<[u8; 55]> {
        self.0.as_ref().map(|span| span.context.traceparent())
    }

    #[inline]
    pub(super) fn answered(self, hosts: &Hosts<'_>, status: StatusCode) {
        if self.0.is_none() {
            return;
        }
        self.end(hosts, |span| {
            span.int("http.response.status_code", i64::from(status.as_u16()));
            if status.is_server_error() {
                span.error = true;
                span.str("error.type", status.as_str().as_bytes());
            }
        });
    }

    /// The attempt failed: `why` is `error.type` (no connection, stale,
    /// refused, reset, or the status the failure is answered with).
    #[inline]
    pub(super) fn failed(self, hosts: &Hosts<'_>, why: &str) {
        if self.0.is_none() {
            return;
        }
        self.end(hosts, |span| {
            span.error = true;
            span.str("error.type", why.as_bytes());
        });
    }

    #[cold]
    #[inline(never)]
    fn end(self, hosts: &Hosts<'_>, fill: impl FnOnce(&mut Span)) {
        if let (Some(mut span), Some(tracer)) = (self.0, hosts.plan.tracer.as_deref()) {
            fill(&mut span);
            span.end();
            tracer.send(span);
        }
    }
}
