//! One client connection, as a short list of phases per request (see
//! docs/LIFECYCLE-proxy.md): read and check the head, route, pick an
//! upstream host and connection, send the request (streaming its body),
//! read the response head, stream the response body, then keep or close
//! each side. Answers to pipelined requests are batched into one write.

use std::{net::SocketAddr, time::Duration};

use http::StatusCode;

use crate::{
    middleware::{body_filter::ResponseBodyFilter, Chain, Exchange},
    telemetry::{Event, Shard},
    wire::{edits::HeaderEdits, trailers},
};

mod admit;
mod attempts;
mod h1;
mod h2;
mod mirror;
mod traced;
mod worker;

pub(crate) use h1::idle::{serve_h1, H2c};
pub(crate) use h1::park::{
    run as run_parking_lot, serve_unparked, ConnectionSlot, Parked, ParkingLot, Serving, PARK_AFTER,
};
use h1::Session;
pub(crate) use h2::serve_stream;

pub(crate) use worker::Worker;

pub(super) use http1::conn::{READ_RESERVE, SHRINK_ABOVE};
/// Pending output is written once it exceeds this.
const FLUSH_AT: usize = 64 * 1024;
/// Answers to pipelined requests wait for each other at most this long
/// before being written, so one slow upstream does not hold back the rest.
const BATCH_WINDOW: Duration = Duration::from_millis(1);
/// A chunk line or trailer section from an upstream may be this long.
pub(super) const UPSTREAM_LIMITS: http1::Limits = http1::Limits {
    max_head: 64 * 1024,
    max_body: usize::MAX,
};

/// The status logged and counted for a request whose client went away
/// before its answer was complete (nginx's 499; no client ever sees it).
const CLIENT_CLOSED: StatusCode = match StatusCode::from_u16(499) {
    Ok(status) => status,
    Err(_) => StatusCode::BAD_REQUEST,
};

/// What happens to the client connection after an exchange.
enum Next {
    KeepAlive,
    /// Close politely (flush, FIN, drain what the client still sends).
    Close,
    /// Drop at once: the client is gone or a response was cut short.
    Abort,
}

/// A request the proxy answers itself, having routed it nowhere.
pub(super) enum Unrouted {
    /// `OPTIONS *` asks about the server, which the proxy is: 204, no body.
    Asterisk,
    /// 400 (refused), 404 (no route) or 405 (no route for the method,
    /// with the routes' methods as `Allow`), as problem+json.
    Problem {
        status: StatusCode,
        detail: String,
        allow: Option<String>,
    },
}

/// Why an exchange failed before the response head reached the client.
/// `pub(crate)`: the `ToUpstream` trait's `impl Future` returns name it, which
/// nightly rustc refuses for a type less visible than the trait (E0446),
/// and the fuzz targets build on nightly.
pub(crate) struct Failure {
    pub(super) status: StatusCode,
    pub(super) detail: String,
    /// The request body was only partly read from the client.
    pub(super) body_unread: bool,
}

impl Failure {
    fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
            body_unread: false,
        }
    }

    /// 413 for a request body past `max_body` bytes, which was not read
    /// whole (the client's connection cannot carry another request).
    fn body_too_large(max_body: usize) -> Self {
        let rejection = http1::chunked::body_too_large(&http1::Limits {
            max_head: 0,
            max_body,
        });
        Self {
            body_unread: true,
            ..Self::new(rejection.status, rejection.detail)
        }
    }

    /// A route whose chain did not answer has an upstream; this is the
    /// answer if a configuration ever made one without.
    fn no_backend() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the route has no backend to send the request to",
        )
    }
}

/// The end of a request on any client protocol, its answer sent or
/// failed: its SERVER span ends, and the chain that ran on it (if one
/// did) sees its outcome (access log, metrics handlers).
fn request_done(
    tracer: Option<&crate::telemetry::trace::Tracer>,
    span: Option<Box<crate::telemetry::trace::Span>>,
    chain: Option<std::sync::Arc<Chain>>,
    exchange: &mut Exchange,
    outcome: &crate::middleware::Outcome,
) {
    traced::end(tracer, span);
    if let Some(chain) = chain {
        chain.done(exchange, outcome);
    }
}

/// `trailers` as they may cross the proxy (`wire::trailers`), each field
/// removed counted.
fn passable_trailers(
    mut trailers: http::HeaderMap,
    edits: Option<&HeaderEdits>,
    metrics: &Shard,
) -> http::HeaderMap {
    for _ in 0..trailers::remove_controlled(&mut trailers, edits) {
        metrics.event(Event::TrailerFieldRemoved);
    }
    trailers
}

/// Runs `chain`'s response phase; the edits it made, taken out of
/// `exchange` (given back once the head is written), if any, with the
/// listener's `Alt-Svc` (`alt_svc`: the port it serves HTTP/3 on).
fn response_edits(
    chain: Option<&std::sync::Arc<Chain>>,
    exchange: &mut Exchange,
    status: StatusCode,
    alt_svc: Option<std::num::NonZeroU16>,
) -> Option<HeaderEdits> {
    match chain {
        Some(chain) => chain.response(status, exchange),
        // No chain began this exchange: what is left is the last answer's
        // `Alt-Svc`, given back with the edits' buffers.
        None => exchange.response_headers.clear(),
    }
    if let Some(port) = alt_svc {
        // Set: an upstream's own is replaced (its alternatives are not
        // the proxy's), and it is there once however often it is asked.
        let value = crate::wire::alt_svc::value(port);
        exchange.response_headers.set(http::header::ALT_SVC, value);
    }
    if exchange.response_headers.is_empty() {
        return None;
    }
    Some(std::mem::take(&mut exchange.response_headers))
}

/// The response body's filter (`compress`, `grpc_web`): asked of the
/// exchange of a request whose chain ran (`None` for the others, whose
/// exchange is left from an earlier request), at the response head; its
/// head changes go into `edits`. The one call each response relay makes.
#[inline]
fn body_filter(
    exchange: Option<&mut Exchange>,
    status: StatusCode,
    fields: crate::wire::fields::Fields<'_>,
    empty: bool,
    edits: &mut Option<HeaderEdits>,
) -> Option<ResponseBodyFilter> {
    crate::middleware::body_filter::start(exchange?, status, fields, empty, edits)
}

/// For HTTP/2 clients: `data` through `filter`; with `end` (the upstream's body is over), its
/// last bytes too, and `end`'s trailers cleared when the filter wrote
/// them into the body.
fn filtered(
    filter: &mut ResponseBodyFilter,
    data: &[u8],
    end: Option<&mut http::HeaderMap>,
) -> Result<bytes::Bytes, &'static str> {
    let mut out = Vec::new();
    filter.data(data, &mut out).map_err(|failed| failed.0)?;
    if let Some(trailers) = end {
        if filter
            .end(Some(trailers), &mut out)
            .map_err(|failed| failed.0)?
            == crate::middleware::body_filter::Trailers::InBody
        {
            trailers.clear();
        }
    }
    Ok(bytes::Bytes::from(out))
}

/// Where a session's client comes from.
#[derive(Debug, Clone)]
pub(crate) struct ClientOrigin {
    /// The client's address: the socket's peer, or the one a PROXY
    /// protocol header named (`server/proxied.rs`).
    pub peer: SocketAddr,
    pub secure: bool,
    /// The UDP port the listener serves HTTP/3 on, advertised by
    /// `Alt-Svc` on its responses.
    pub alt_svc: Option<std::num::NonZeroU16>,
    /// An HTTP/3 client, whose requests reach the HTTP/2 codec through
    /// an in-process HTTP/2 connection (server/h3): traced as version 3.
    pub h3: bool,
    /// The route table its listener routes by (`ListenerSettings::route_table`).
    pub routes: u16,
    /// What the connection's PROXY protocol header said, if it had one
    /// (or the names of the headers its TLVs go upstream in).
    pub proxied: Option<std::sync::Arc<crate::wire::proxy_protocol::Proxied>>,
}
