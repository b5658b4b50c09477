//! The session's hook into request normalisation (`wire::normalize`):
//! from a parsed head to a route and what the upstream is to receive. Both
//! protocols come through here: an HTTP/1.1 head by way of [`raw_h1`], an
//! HTTP/2 stream by way of `h2::raw_h2`.

use std::{net::SocketAddr, sync::Arc};

use http::StatusCode;
use http1::{Framing as RequestFraming, Head};
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::debug;

use super::{Failure, Next, Session, Unrouted};

use crate::config::OverrideHeaders;
use crate::telemetry::{trace::Span, Shard};
use crate::wire::fields::Fields;
use crate::wire::proxy_protocol::Proxied;
use crate::{
    ids::RouteId,
    middleware::{Chain, RequestView},
    plan::routes::{Facts, RouteMatch},
    plan::Plan,
    wire::head::is_override,
    wire::normalize::{self, upgrade::Offer, Normal, Refusal, Rewrites},
};

/// What the request being forwarded carries instead of the client's spelling.
#[derive(Debug, Default)]
pub(super) struct Decided {
    pub rewrites: Rewrites,
    pub upgrade: Offer,
    /// The request carries fields that make lenient frameworks serve
    /// another path or method (`X-Original-URL`, ...), to be removed
    /// (`paths.override_headers: strip`).
    pub strip_overrides: bool,
    /// The route's backend it takes (`plan::Route::backend`).
    pub backend: usize,
}

/// Where a request head goes.
pub(super) enum Admission {
    Route {
        route: RouteId,
        decided: Decided,
    },
    /// `OPTIONS *`, answered by the proxy.
    Asterisk,
    Refused(Refusal),
    /// No route; the detail names the normalised path.
    NotFound(String),
    /// Routes match the path, none for the method: the `Allow` value.
    MethodNotAllowed(String),
}

impl Admission {
    /// The route the request takes, or what the proxy answers instead:
    /// what every client protocol does with an [`Admission`], with the
    /// metrics and the SERVER span's route name it notes.
    pub(super) fn settle(
        self,
        plan: &Plan,
        method: &http::Method,
        (metrics, peer): (&Shard, SocketAddr),
        span: &mut Option<Box<Span>>,
    ) -> Result<(RouteId, Decided), Unrouted> {
        let problem = |status, detail| Unrouted::Problem {
            status,
            detail,
            allow: None,
        };
        match self {
            Admission::Route { route, decided } => {
                if decided.upgrade.removed > 0 {
                    metrics.upgrade_removed();
                }
                if decided.strip_overrides {
                    metrics.overrides_removed();
                }
                super::traced::routed(span, || &plan.route(route).name);
                Ok((route, decided))
            }
            Admission::Refused(refusal) => {
                metrics.refused(refusal);
                debug!(%peer, reason = refusal.label(), "refused request");
                Err(problem(StatusCode::BAD_REQUEST, refusal.detail().into()))
            }
            Admission::Asterisk => Err(Unrouted::Asterisk),
            Admission::NotFound(detail) => Err(problem(StatusCode::NOT_FOUND, detail)),
            Admission::MethodNotAllowed(allow) => Err(Unrouted::Problem {
                status: StatusCode::METHOD_NOT_ALLOWED,
                detail: format!("method {method} is not allowed here; allowed: {allow}"),
                allow: Some(allow),
            }),
        }
    }
}

/// An HTTP/1.1 head as normalisation reads it; `Err` when its target or
/// Host is not text.
pub(super) fn raw_h1<'a>(
    buf: &'a [u8],
    head: &'a Head,
    secure: bool,
) -> Result<normalize::Raw<'a>, Refusal> {
    let text = |range: std::ops::Range<usize>| std::str::from_utf8(&buf[range]).ok();
    let path = text(head.path.clone()).ok_or(Refusal::NotUtf8)?;
    Ok(normalize::Raw {
        method: &head.method,
        target: &buf[head.target.clone()],
        path,
        query: head.query.clone().map(|q| &buf[q]),
        host: match head.host.clone().map(text) {
            Some(None) => return Err(Refusal::Host),
            host => host.flatten(),
        },
        secure,
    })
}

/// Normalises a request's target and Host, then routes it by the route
/// table `routes` (its listener's); `upgrade`: the head asks for an
/// upgrade (HTTP/1.1 only).
pub(super) fn admit(
    plan: &Plan,
    routes: u16,
    raw: &normalize::Raw<'_>,
    fields: Fields<'_>,
    upgrade: bool,
) -> Admission {
    let normal = match normalize::request(raw, &plan.paths) {
        Ok(Normal::Request(normal)) => normal,
        Ok(Normal::Asterisk) => return Admission::Asterisk,
        Err(refusal) => return Admission::Refused(refusal),
    };
    let facts = Facts {
        host: normal.host.as_ref().map(|h| &*h.name),
        method: raw.method,
        path: normal.path.for_matching(),
        query: raw.query,
        fields,
    };
    let route = match plan.table.find(usize::from(routes), &facts) {
        RouteMatch::Found(route) => route.id,
        RouteMatch::NotFound => {
            return Admission::NotFound(format!("no route for {}", normal.path.path))
        }
        RouteMatch::MethodNotAllowed { allow } => return Admission::MethodNotAllowed(allow),
    };
    let upgrade = match upgrade {
        true => normalize::upgrade::offer(fields.get_all("upgrade"), &plan.route(route).upgrades),
        false => Offer::default(),
    };
    let mut strip_overrides = false;
    if plan.paths.override_headers == OverrideHeaders::Strip {
        fields.for_each(|name, _| strip_overrides |= is_override(name));
    }
    let taken = plan.route(route);
    let rewritten = taken.rewritten_path(&normal.path.path);
    let mut rewrites = normal.into_rewrites(plan.paths.forward);
    if rewritten.is_some() {
        rewrites.path = rewritten;
    }
    Admission::Route {
        route,
        decided: Decided {
            rewrites,
            upgrade,
            strip_overrides,
            backend: taken.pick(),
        },
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Runs the route's middleware on the request; `Some` when it answered.
    pub(super) async fn run_chain(
        &mut self,
        head: &Head,
        route: RouteId,
        chain: Arc<Chain>,
    ) -> Option<Next> {
        let trust = self.plan.trust_forwarded;
        self.exchange
            .begin(route, self.worker.index, &head.method, self.max_body);
        self.exchange.trace = super::traced::for_calls(&self.span, self.plan.tracer.as_ref());
        self.chain = Some(Arc::clone(&chain));
        let ip = client_ip(
            self.peer,
            trust,
            Fields::H1 {
                buf: &self.conn.rbuf,
                fields: &self.fields,
            },
        );
        let path = self.decided.rewrites.path.as_deref();
        let secure = self.secure;
        let proxied = self.proxied.as_deref();
        let wanted = chain.wants_body(&request_view(
            head,
            (&self.conn.rbuf, &self.fields),
            (ip, secure, proxied),
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
        let secure = self.secure;
        let proxied = self.proxied.as_deref();
        let view = request_view(
            head,
            (&self.conn.rbuf, &self.fields),
            (ip, secure, proxied),
            path,
            held,
        );
        if let Some(answer) = chain.request(&view, &mut self.exchange).await {
            super::traced::refused(&mut self.span, &answer, || {
                chain.answered_by(&self.exchange)
            });
            return Some(self.answer(head, route, answer));
        }
        super::traced::query_edited(
            self.plan.tracer.as_deref(),
            &mut self.span,
            self.exchange.request_headers.query.as_deref(),
        );
        self.max_body = self.exchange.max_body;
        None
    }

    /// Reads a `len`-byte body whole into `rbuf` (behind the head), for
    /// handlers that look at it; 413 past `max`.
    pub(super) async fn hold_body(
        &mut self,
        head: &Head,
        len: usize,
        max: usize,
    ) -> Result<(), Failure> {
        if len > max.min(self.max_body) {
            return Err(Failure::body_too_large(max.min(self.max_body)));
        }
        if head.expect_continue && self.conn.rbuf.len() < head.len + len {
            self.conn
                .wbuf
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        while self.conn.rbuf.len() < head.len + len {
            self.read_body_part().await?;
        }
        Ok(())
    }
}

/// The request as the middleware sees it, with the path the upstream
/// receives (`path` when normalisation rewrote it); with `held`, its
/// Content-Length body is whole in `buf` behind the head.
fn request_view<'a>(
    head: &'a Head,
    (buf, fields): (&'a [u8], &'a [http1::Field]),
    (client_ip, secure, proxied): (std::net::IpAddr, bool, Option<&'a Proxied>),
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
        fields: Fields::H1 { buf, fields },
        host: head.host.clone().and_then(text),
        secure,
        proxied,
    }
}

/// The client's address: the peer's, or with `trust` the last address in
/// the last X-Forwarded-For field (the one the trusted proxy added).
pub(super) fn client_ip(peer: SocketAddr, trust: bool, fields: Fields<'_>) -> std::net::IpAddr {
    let forwarded = || {
        let value = fields.get_all("x-forwarded-for").last()?;
        let last = value.rsplit(|&b| b == b',').next()?;
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
