//! The answer of an HTTP/2 upstream to an HTTP/1.1 client: the head
//! written by the same rules as any response head, the DATA frames
//! copied as they come (chunked unless the upstream gave a length), the
//! trailers (under the trailer rules) after the last chunk.

use std::future::poll_fn;

use h2::RecvStream;
use http::{header, Method, Response};
use http1::{chunked::encode_last_chunk, Head};
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::warn;

use crate::session::{
    h1::relay_h1::put_body, h1::response::persistence, h1::waits::Waited, passable_trailers, Next,
    Session,
};
use crate::{
    ids::{RouteId, UpstreamId},
    middleware::{
        body_filter::{ResponseBodyFilter, Trailers},
        Outcome,
    },
    telemetry::UpstreamError,
    upstream::h2_pool::StreamLease,
    wire::{
        edits::with_cookie,
        fields::Fields,
        head::{self, Framing},
    },
};

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Writes the HTTP/1.1 response head and relays the body and trailers.
    pub(in crate::session) async fn relay_h2(
        &mut self,
        head: &Head,
        route: RouteId,
        upstream: UpstreamId,
        response: Response<RecvStream>,
        lease: StreamLease,
        sticky: Option<&http::HeaderValue>,
    ) -> Next {
        let (parts, body) = response.into_parts();
        self.count(Some(route), parts.status);
        self.outcome = Outcome {
            status: parts.status,
            upstream: Some(upstream),
            body_bytes: 0,
        };
        let mut edits = with_cookie(self.response_edits(parts.status), sticky);
        let exchange = self.chain.is_some().then_some(&mut self.exchange);
        let fields = Fields::Map(&parts.headers);
        let empty = body.is_end_stream();
        let mut filter =
            crate::session::body_filter(exchange, parts.status, fields, empty, &mut edits);
        // A filtered body's length is not known before it ends.
        let length = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .filter(|_| filter.is_none())
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let framing =
            if head.method == Method::HEAD || !http1::response::may_have_body(parts.status) {
                Framing::None
            } else if empty && filter.is_none() {
                Framing::Length(0)
            } else if let Some(length) = length {
                Framing::Length(length)
            } else if head.http10 {
                Framing::Close
            } else {
                Framing::Chunked
            };
        let close = !head.keep_alive
            || framing == Framing::Close
            || self.body_abandoned
            || self.conn.shutting_down();
        head::response_head(
            &mut self.conn.wbuf,
            parts.status,
            Fields::Map(&parts.headers),
            framing,
            persistence(head, close),
            edits.as_ref(),
        );
        self.put_back_edits(edits);
        let complete = self
            .relay_body_h2(body, framing, upstream, filter.as_mut())
            .await;
        drop(lease);
        match (complete, close) {
            (false, _) => Next::Abort,
            (true, true) => Next::Close,
            (true, false) => Next::KeepAlive,
        }
    }

    /// Copies DATA frames into `wbuf` (through `filter`, when the chain
    /// asked for one; chunk-encoded when `to` is chunked, with the
    /// trailers at the end). False when the stream broke off or the
    /// client went away.
    async fn relay_body_h2(
        &mut self,
        mut body: RecvStream,
        to: Framing,
        upstream: UpstreamId,
        mut filter: Option<&mut ResponseBodyFilter>,
    ) -> bool {
        if to == Framing::None {
            return true;
        }
        let timeout = self.plan.upstream(upstream).timeouts.request;
        loop {
            let next = poll_fn(|cx| body.poll_data(cx));
            let data = match self.wait(next, timeout, false).await {
                Waited::ClientGone => return false,
                Waited::TimedOut => return self.body_broke(upstream, "timed out"),
                Waited::Done(None) => break,
                Waited::Done(Some(Err(err))) => return self.body_broke(upstream, &err.to_string()),
                Waited::Done(Some(Ok(data))) => data,
            };
            let _ = body.flow_control().release_capacity(data.len());
            if !put_body(&mut self.conn.wbuf, to, filter.as_deref_mut(), &data) {
                return false;
            }
            if self.conn.wbuf.len() >= crate::session::FLUSH_AT && !self.conn.flush().await {
                return false;
            }
        }
        let mut trailers = http::HeaderMap::new();
        if to == Framing::Chunked || filter.is_some() {
            let next = poll_fn(|cx| body.poll_trailers(cx));
            trailers = match self.wait(next, timeout, false).await {
                Waited::Done(Ok(trailers)) => trailers.unwrap_or_default(),
                Waited::ClientGone => return false,
                Waited::TimedOut => return self.body_broke(upstream, "timed out"),
                Waited::Done(Err(err)) => return self.body_broke(upstream, &err.to_string()),
            };
        }
        if let Some(filter) = filter {
            let mut out = Vec::new();
            match filter.end(Some(&trailers), &mut out) {
                Ok(Trailers::Pass) => {}
                Ok(Trailers::InBody) => trailers.clear(),
                Err(failed) => {
                    warn!(
                        why = failed.0,
                        "a response body filter failed; closing the client connection"
                    );
                    return false;
                }
            }
            put_body(&mut self.conn.wbuf, to, None, &out);
        }
        if to == Framing::Chunked {
            let edits = Some(&self.exchange.response_headers).filter(|e| !e.is_empty());
            let trailers = passable_trailers(trailers, edits, self.worker.metrics());
            encode_last_chunk(
                &mut self.conn.wbuf,
                trailers
                    .iter()
                    .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes())),
            );
        }
        true
    }

    fn body_broke(&self, upstream: UpstreamId, why: &str) -> bool {
        let config = &self.plan.upstream(upstream);
        self.worker
            .metrics()
            .upstream_error(upstream, UpstreamError::Broken);
        warn!(upstream = %config.name, %why, "the upstream broke off an HTTP/2 response body; closing the client connection");
        false
    }
}
