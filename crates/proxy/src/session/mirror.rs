//! Copies of a request to a route's mirrors (`routes[].mirror`), sent
//! and forgotten: each copy is a task of its own, started before the
//! request is forwarded and never waited for, so it cannot delay or
//! change the client's answer. A mirror has at most `max_in_flight`
//! copies out (a copy past it is dropped and counted), and each ends
//! within its upstream's `timeouts.connect` and `timeouts.request`, so a
//! mirror that hangs holds that many connections at most, for that long.
//! A request whose body is not whole in hand (it streams) is not copied
//! (counted as skipped): a copy never holds the request back.

use std::{net::SocketAddr, sync::Arc, time::Instant};

use bytes::{Buf, Bytes, BytesMut};
use http::Request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{attempts::Hosts, Worker, UPSTREAM_LIMITS};
use crate::{
    config::Protocol,
    ids::{HostId, UpstreamId},
    plan::{route::MirrorSlot, Route, Snapshot},
    telemetry::Mirrored,
    upstream::Upstream,
    wire::{
        fields::Fields,
        head::{Framing, Outgoing, RequestContext},
        http2,
    },
};

/// The longest answer body a copy reads to keep its connection; a longer
/// one closes it.
const DRAIN_AT_MOST: usize = 64 * 1024;

/// Starts the copies `route` makes of a request: `request` builds its
/// head for a mirror's upstream (as the upstream rules say, with the
/// route's changes), `body` is the whole body (`None` when it streams).
#[inline]
pub(super) fn start(
    (plan, worker): (&Arc<Snapshot>, &Arc<Worker>),
    route: &Route,
    peer: SocketAddr,
    request: impl Fn(&Upstream, usize) -> Option<Request<()>>,
    body: Option<&[u8]>,
) {
    if route.mirrors.is_empty() {
        return;
    }
    for mirror in route.mirrors.iter().filter(|m| m.chosen()) {
        let Some(body) = body else {
            worker.metrics().mirrored(Mirrored::Skipped);
            continue;
        };
        let Some(slot) = mirror.slot() else {
            worker.metrics().mirrored(Mirrored::Dropped);
            continue;
        };
        let Some(head) = request(plan.upstream(mirror.upstream), body.len()) else {
            worker.metrics().mirrored(Mirrored::Failed);
            continue;
        };
        let copy = Copy {
            plan: Arc::clone(plan),
            worker: Arc::clone(worker),
            upstream: mirror.upstream,
            peer,
            head,
            body: Bytes::copy_from_slice(body),
            _slot: slot,
        };
        tokio::spawn(copy.send());
    }
}

/// How a copy's head is built for a mirror's upstream: the request's,
/// under the same rules (its rewrites, the chain's header changes), with
/// the Host the route or that upstream sets, and the body's length.
pub(super) fn head_for<'a>(
    outgoing: &'a Outgoing<'a>,
    context: &'a RequestContext<'a>,
    route: &'a Route,
) -> impl Fn(&Upstream, usize) -> Option<Request<()>> + 'a {
    move |upstream, length| {
        let context = RequestContext {
            peer: context.peer,
            secure: context.secure,
            trust_forwarded: context.trust_forwarded,
            host_header: route.host_header(upstream),
            fallback_host: None,
            path: context.path,
            host: context.host,
            upgrade: None,
            strip_overrides: context.strip_overrides,
            framing: match length {
                0 => Framing::None,
                n => Framing::Length(n as u64),
            },
            edits: context.edits,
            proxied: context.proxied,
        };
        let scheme = if upstream.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let fallback = upstream.host_name(HostId::new(0));
        http2::upstream_request(outgoing, &context, scheme, fallback, None)
    }
}

/// One copy in flight, holding its place under the mirror's limit.
struct Copy {
    plan: Arc<Snapshot>,
    worker: Arc<Worker>,
    upstream: UpstreamId,
    peer: SocketAddr,
    head: Request<()>,
    body: Bytes,
    _slot: MirrorSlot,
}

impl Copy {
    async fn send(self) {
        let config = self.plan.upstream(self.upstream);
        let limit = config.timeouts.connect + config.timeouts.request;
        let answered = tokio::time::timeout(limit, self.exchange()).await;
        let result = match answered {
            Ok(true) => Mirrored::Answered,
            _ => Mirrored::Failed,
        };
        self.worker.metrics().mirrored(result);
    }

    /// Sends the copy and reads the answer's head: whether one came.
    async fn exchange(&self) -> bool {
        let hosts = Hosts::new(&self.plan, &self.worker, self.upstream, self.peer);
        let (path, query) = match self.head.uri().path_and_query() {
            Some(pq) => (pq.path().as_bytes(), pq.query().map(str::as_bytes)),
            None => (&b"/"[..], None),
        };
        let outgoing = Outgoing {
            method: self.head.method(),
            path,
            query,
            host: self.head.uri().authority().map(|a| a.as_str().as_bytes()),
            fields: Fields::Map(self.head.headers()),
        };
        let Ok(host) = hosts.pick(&outgoing).await else {
            return false;
        };
        match self.plan.upstream(self.upstream).protocol {
            Protocol::Http1 => self.over_h1(&hosts, host).await.is_some(),
            Protocol::H2c | Protocol::H2 => self.over_h2(&hosts, host).await.is_some(),
        }
    }

    async fn over_h1(&self, hosts: &Hosts<'_>, host: HostId) -> Option<()> {
        let mut conn = hosts.connection(host, false, Instant::now()).await.ok()?;
        let bytes = h1_request(&self.head, &self.body);
        let sent_at = Instant::now();
        let written = conn.stream.write_all(&bytes).await;
        if written.is_err() {
            self.closed();
            return None;
        }
        let response = loop {
            let parsed = http1::parse_response_head(
                &conn.buf,
                UPSTREAM_LIMITS.max_head,
                self.head.method() == http::Method::HEAD,
                &mut (),
            );
            match parsed {
                // An interim answer: the final one follows.
                Ok(Some(head)) if head.status.is_informational() => conn.buf.advance(head.len),
                Ok(Some(head)) => break head,
                Ok(None) if conn.stream.read_buf(&mut conn.buf).await.ok()? > 0 => {}
                _ => {
                    self.closed();
                    return None;
                }
            }
        };
        hosts.answered(host, sent_at, response.status);
        conn.buf.advance(response.len);
        let length = match response.framing {
            http1::BodyFraming::None => Some(0),
            http1::BodyFraming::Length(n) => usize::try_from(n).ok(),
            _ => None,
        };
        match length.filter(|&n| n <= DRAIN_AT_MOST && response.keep_alive) {
            Some(n) => {
                while conn.buf.len() < n {
                    if conn.stream.read_buf(&mut conn.buf).await.unwrap_or(0) == 0 {
                        self.closed();
                        return Some(());
                    }
                }
                conn.buf.advance(n);
                if conn.buf.is_empty() {
                    let config = self.plan.upstream(self.upstream);
                    let metrics = self.worker.metrics();
                    self.worker.pool.put(config, metrics, conn, Instant::now());
                } else {
                    self.closed();
                }
            }
            None => self.closed(),
        }
        Some(())
    }

    async fn over_h2(&self, hosts: &Hosts<'_>, host: HostId) -> Option<()> {
        let (send, _lease) = match hosts.pooled_stream(host) {
            Some(stream) => stream,
            None => hosts.stream(host).await.ok()?,
        };
        let mut send = send?.ready().await.ok()?;
        let mut head = Request::new(());
        *head.method_mut() = self.head.method().clone();
        *head.uri_mut() = self.head.uri().clone();
        *head.headers_mut() = self.head.headers().clone();
        let sent_at = Instant::now();
        let (response, mut body) = send.send_request(head, self.body.is_empty()).ok()?;
        if !self.body.is_empty() {
            body.send_data(self.body.clone(), true).ok()?;
        }
        let response = response.await.ok()?;
        hosts.answered(host, sent_at, response.status());
        // The answer's body is not read: dropping it resets the stream.
        Some(())
    }

    /// An HTTP/1.1 connection of the copy's that is not kept.
    fn closed(&self) {
        self.worker.metrics().upstream_open(self.upstream, -1);
    }
}

/// The copy as HTTP/1.1 bytes: the head (its Host from the URI's
/// authority) and the body.
fn h1_request(head: &Request<()>, body: &[u8]) -> BytesMut {
    let mut out = BytesMut::with_capacity(512 + body.len());
    out.extend_from_slice(head.method().as_str().as_bytes());
    out.extend_from_slice(b" ");
    let target = head.uri().path_and_query().map_or("/", |pq| pq.as_str());
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if let Some(authority) = head.uri().authority() {
        out.extend_from_slice(b"host: ");
        out.extend_from_slice(authority.as_str().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    for (name, value) in head.headers() {
        if name == http::header::TE {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_written_as_http1_with_its_host_from_the_authority() {
        let mut head = Request::new(());
        *head.uri_mut() = "http://api.example:8080/a?b=1".parse().unwrap();
        head.headers_mut()
            .insert("x-a", http::HeaderValue::from_static("1"));
        head.headers_mut()
            .insert(http::header::TE, http::HeaderValue::from_static("trailers"));
        head.headers_mut()
            .insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(2));
        let bytes = h1_request(&head, b"hi");
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            "GET /a?b=1 HTTP/1.1\r\nhost: api.example:8080\r\nx-a: 1\r\ncontent-length: 2\r\n\r\nhi"
        );
    }
}
