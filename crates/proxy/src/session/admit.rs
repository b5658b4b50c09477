//! The session's hook into request normalisation (`wire::normalize`):
//! from a parsed head to a route and what the upstream is to receive. HTTP/2
//! streams reach the session as HTTP/1.1 heads, so this covers both.

use http1::{Field, Head};

use crate::{
    ids::RouteId,
    plan::routes::RouteMatch,
    plan::Plan,
    wire::normalize::{self, upgrade::Offer, Normal, Refusal, Rewrites},
};

/// What the request being forwarded carries instead of the client's spelling.
#[derive(Debug, Default)]
pub(super) struct Decided {
    pub rewrites: Rewrites,
    pub upgrade: Offer,
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

/// Normalises the head's target and Host, then routes it.
pub(super) fn admit(
    gateway: &Plan,
    buf: &[u8],
    head: &Head,
    fields: &[Field],
    secure: bool,
) -> Admission {
    let text = |range: std::ops::Range<usize>| std::str::from_utf8(&buf[range]).ok();
    let Some(path) = text(head.path.clone()) else {
        return Admission::Refused(Refusal::Malformed);
    };
    let raw = normalize::Raw {
        method: &head.method,
        target: &buf[head.target.clone()],
        path,
        query: head.query.clone().map(|q| &buf[q]),
        host: match head.host.clone().map(text) {
            Some(None) => return Admission::Refused(Refusal::Host),
            host => host.flatten(),
        },
        secure,
    };
    let normal = match normalize::request(&raw, &gateway.paths) {
        Ok(Normal::Request(normal)) => normal,
        Ok(Normal::Asterisk) => return Admission::Asterisk,
        Err(refusal) => return Admission::Refused(refusal),
    };
    let host = normal.host.as_ref().map(|h| &*h.name);
    let route = match gateway
        .table
        .find(host, &head.method, normal.path.for_matching())
    {
        RouteMatch::Found(route) => route.id,
        RouteMatch::NotFound => {
            return Admission::NotFound(format!("no route for {}", normal.path.path))
        }
        RouteMatch::MethodNotAllowed { allow } => return Admission::MethodNotAllowed(allow),
    };
    let upgrade = if head.upgrade {
        let offered = fields
            .iter()
            .filter(|(name, _)| buf[name.clone()].eq_ignore_ascii_case(b"upgrade"))
            .map(|(_, value)| &buf[value.clone()]);
        normalize::upgrade::offer(offered, &gateway.route(route).upgrades)
    } else {
        Offer::default()
    };
    Admission::Route {
        route,
        decided: Decided {
            rewrites: normal.into_rewrites(gateway.paths.forward),
            upgrade,
        },
    }
}
