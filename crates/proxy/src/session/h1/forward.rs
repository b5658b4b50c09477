//! An HTTP/1.1 client's request on its way upstream: the host the
//! balancer picks (while the client's head is at hand), the request head
//! for the upstream's protocol, then `attempts::run` with the wire of that
//! protocol (`h1::to_h1`, `h1::to_h2`), which sends it (again where
//! `attempts::decide` says), and the answer that stands to `relay_h1`.

use std::sync::Arc;

use bytes::Buf;
use http::StatusCode;
use http1::{Framing as RequestFraming, Head};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::session::{
    attempts::{self, decide::Retries, Answered, Hosts},
    h1::to_h1::H1ToH1,
    h1::to_h2::H1ToH2,
    traced, Failure, Next, Session,
};
use crate::{
    config::Protocol,
    ids::{HostId, RouteId, UpstreamId},
    wire::{
        fields::Fields,
        head::{self, Framing, Offered, Outgoing, RequestContext},
        http2,
    },
};

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Sends the request upstream (retrying where safe) and streams the answer back.
    pub(in crate::session) async fn forward(
        &mut self,
        head: &Head,
        route: RouteId,
    ) -> Result<Next, Failure> {
        let plan = Arc::clone(&self.plan);
        let worker = Arc::clone(&self.worker);
        let taken = plan.route(route);
        if !taken.mirrors.is_empty() {
            self.mirror(head, route);
        }
        let upstream_index = taken
            .backend(self.decided.backend)
            .upstream
            .ok_or_else(Failure::no_backend)?;
        let upstream = &plan.upstream(upstream_index);
        if upstream.protocol != Protocol::Http1 {
            return self.forward_h2(head, route, upstream_index).await;
        }
        let mut hosts = Hosts::new(&plan, &worker, upstream_index, self.peer);
        hosts.local = self.proxied.as_ref().and_then(|proxied| proxied.local);
        let (rbuf, fields) = (&self.conn.rbuf, &self.fields);
        let rewritten = self.decided.rewrites.path.as_deref();
        // The query as it goes upstream: without a parameter the chain
        // took out (`api_key`'s key), never the client's as sent.
        let edited = self
            .chain
            .as_ref()
            .and(self.exchange.request_headers.query.as_deref());
        hosts.trace =
            traced::for_attempts(&self.span, plan.tracer.as_deref(), &head.method, || {
                let request = outgoing(rbuf, head, fields);
                let query = match edited {
                    Some(query) => Some(query.as_bytes()).filter(|q| !q.is_empty()),
                    None => request.query,
                };
                (head::sent_path(rewritten, request.path), query)
            });
        hosts.route = Some(&taken.policy);
        // Picked while the client's head is at hand (hash keys, cookies);
        // a 503 is answered once the head is consumed.
        let picked = hosts.choose(|| outgoing(rbuf, head, fields));
        let fallback_host = picked.as_ref().ok().map(|&host| upstream.host_name(host));
        self.build_request(head, taken.host_header(upstream), fallback_host)?;
        // The head is in `ubuf` now; the client's copy is not needed any more.
        self.conn.rbuf.advance(head.len);
        let replayable = self.buffer_body(head)?;
        let host = picked?;
        if hosts.waits() {
            self.unless_client_gone(hosts.hold(host)).await??;
        }
        let mut retries = Retries::new(hosts.retries(), &head.method, replayable);
        let mut wire = H1ToH1 {
            session: self,
            head,
            replayable,
        };
        let answered = attempts::run(&mut wire, &hosts, host, &mut retries).await?;
        let Answered {
            host,
            conn,
            head: response,
            at,
        } = answered;
        hosts.learn_cookies(
            host,
            Fields::H1 {
                buf: &conn.buf,
                fields: &self.response_fields,
            },
        );
        let cookie = hosts.cookie(host);
        self.respond(head, route, conn, response, at, cookie).await
    }

    /// `forward` for an HTTP/2 upstream.
    async fn forward_h2(
        &mut self,
        head: &Head,
        route: RouteId,
        upstream_index: UpstreamId,
    ) -> Result<Next, Failure> {
        let plan = Arc::clone(&self.plan);
        let worker = Arc::clone(&self.worker);
        let upstream = &plan.upstream(upstream_index);
        let mut hosts = Hosts::new(&plan, &worker, upstream_index, self.peer);
        hosts.route = Some(&plan.route(route).policy);
        let host_header = plan.route(route).host_header(upstream);
        let context = self.request_context(head, host_header, None)?;
        let scheme = if upstream.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let fallback = upstream.host_name(HostId::new(0));
        let outgoing = outgoing(&self.conn.rbuf, head, &self.fields);
        hosts.trace =
            traced::for_attempts(&self.span, plan.tracer.as_deref(), &head.method, || {
                (context.path(&outgoing), context.query(&outgoing))
            });
        let request = http2::upstream_request(&outgoing, &context, scheme, fallback, None)
            .ok_or_else(|| {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    "the request cannot be expressed in HTTP/2",
                )
            })?;
        let picked = hosts.pick(&outgoing).await;
        self.conn.rbuf.advance(head.len);
        let host = picked?;
        // The body streams from the client's connection: only an empty
        // one can go again.
        let in_hand = head.framing == RequestFraming::Empty;
        let mut retries = Retries::new(hosts.retries(), &head.method, in_hand);
        let mut wire = H1ToH2 {
            session: self,
            head,
            request,
        };
        let answered = attempts::run(&mut wire, &hosts, host, &mut retries).await?;
        let Answered {
            host,
            conn: (_, lease),
            head: response,
            ..
        } = answered;
        hosts.learn_cookies(host, Fields::Map(response.headers()));
        let cookie = hosts.cookie(host);
        Ok(self
            .relay_h2(head, route, upstream_index, response, lease, cookie)
            .await)
    }

    /// Starts the copies the route's mirrors make of the request (its
    /// body when it has all arrived with the head).
    fn mirror(&self, head: &Head, route: RouteId) {
        let taken = self.plan.route(route);
        let body = match head.framing {
            RequestFraming::Empty => Some(&[][..]),
            RequestFraming::Length(len) => self.conn.rbuf.get(head.len..head.len + len),
            RequestFraming::Chunked => None,
        };
        let Ok(context) = self.request_context(head, None, None) else {
            return;
        };
        let outgoing = outgoing(&self.conn.rbuf, head, &self.fields);
        let build = crate::session::mirror::head_for(&outgoing, &context, taken);
        let place = (&self.plan, &self.worker);
        crate::session::mirror::start(place, taken, self.peer, build, body);
    }

    /// The upstream request head into `ubuf`.
    fn build_request(
        &mut self,
        head: &Head,
        host_header: Option<&http::HeaderValue>,
        fallback_host: Option<&str>,
    ) -> Result<(), Failure> {
        // Taken out for the write: the context borrows the rest of the session.
        let mut ubuf = std::mem::take(&mut self.ubuf);
        ubuf.clear();
        let built = self
            .request_context(head, host_header, fallback_host)
            .map(|context| {
                let request = outgoing(&self.conn.rbuf, head, &self.fields);
                head::request_head(&mut ubuf, &request, &context);
            });
        self.ubuf = ubuf;
        built
    }

    /// What the head rules need beyond the client's head: the peer, the
    /// normalised target, the upgrade offer, the framing and the edits.
    fn request_context<'a>(
        &'a self,
        head: &Head,
        host_header: Option<&'a http::HeaderValue>,
        fallback_host: Option<&'a str>,
    ) -> Result<RequestContext<'a>, Failure> {
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
        Ok(RequestContext {
            peer: self.peer.ip(),
            secure: self.secure,
            trust_forwarded: self.plan.trust_forwarded,
            host_header,
            fallback_host,
            path: self.decided.rewrites.path.as_deref(),
            host: self.decided.rewrites.host.as_deref(),
            upgrade: match self.decided.upgrade.removed {
                _ if upgrade.is_empty() => None,
                0 => Some(Offered::AsSent),
                _ => Some(Offered::Only(upgrade)),
            },
            strip_overrides: self.decided.strip_overrides,
            framing,
            edits: self
                .chain
                .is_some()
                .then_some(&self.exchange.request_headers)
                .filter(|edits| !edits.is_empty()),
            proxied: self.proxied.as_deref(),
        })
    }
}

/// An HTTP/1.1 client's request, as the head rules read it.
fn outgoing<'a>(buf: &'a [u8], head: &'a Head, fields: &'a [http1::Field]) -> Outgoing<'a> {
    Outgoing {
        method: &head.method,
        path: &buf[head.path.clone()],
        query: head.query.clone().map(|q| &buf[q]),
        host: head.host.clone().map(|h| &buf[h]),
        fields: Fields::H1 { buf, fields },
    }
}
