//! The response: its head for the client (after the chain's response
//! phase), its body relayed as it arrives, or a tunnel after `101`.

use crate::ids::RouteId;
use crate::middleware::{body_filter::ResponseBodyFilter, Outcome, ResponseView};
use crate::session::{
    h1::response::persistence, h1::waits::UpstreamRead, Failure, Next, Session, FLUSH_AT,
    UPSTREAM_LIMITS,
};
use crate::telemetry::UpstreamError;
use crate::upstream::pool::UpstreamConn;
use crate::wire::edits::{with_cookie, HeaderEdits};
use crate::wire::head;
use crate::wire::{fields::Fields, head::Framing};
use http1::chunked::{encode_chunk, LAST_CHUNK};
use http1::{BodyFraming, ChunkedDecoder, Head, Persistence, ResponseHead};

use std::{sync::Arc, time::Instant};

use bytes::Buf;
use http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tracing::warn;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Writes the response head and streams its body to the client.
    pub(in crate::session) async fn respond(
        &mut self,
        head: &Head,
        route: RouteId,
        mut conn: UpstreamConn,
        response: ResponseHead,
        answered: Instant,
        sticky: Option<&http::HeaderValue>,
    ) -> Result<Next, Failure> {
        if response.status == StatusCode::SWITCHING_PROTOCOLS && !self.switch_offered(&conn) {
            // Only a 101 to an upgrade we relayed turns the connection into
            // a tunnel: anything else would let the upstream take the
            // client's connection out of routing (issue 15).
            warn!(upstream = %self.plan.upstream(conn.upstream).name, "101 to a request whose upgrade was not relayed");
            self.worker.metrics().upstream_open(conn.upstream, -1);
            return Err(Failure::new(
                StatusCode::BAD_GATEWAY,
                "the upstream switched to a protocol the request did not offer",
            ));
        }
        self.count(Some(route), response.status);
        self.outcome = Outcome {
            status: response.status,
            upstream: Some(conn.upstream),
            body_bytes: 0,
        };
        self.check_response_body(&mut conn, &response).await;
        let mut edits = with_cookie(self.response_edits(response.status), sticky);
        if response.status == StatusCode::SWITCHING_PROTOCOLS {
            return Ok(self.tunnel(conn, &response, edits).await);
        }
        let fields = Fields::H1 {
            buf: &conn.buf,
            fields: &self.response_fields,
        };
        let empty = matches!(response.framing, BodyFraming::None | BodyFraming::Length(0));
        let exchange = self.chain.is_some().then_some(&mut self.exchange);
        let mut filter =
            crate::session::body_filter(exchange, response.status, fields, empty, &mut edits);
        let framing = match response.framing {
            BodyFraming::None => Framing::None,
            // A filtered body's length is not known before it ends.
            BodyFraming::Length(n) if filter.is_none() => Framing::Length(n),
            _ if head.http10 => Framing::Close,
            _ => Framing::Chunked,
        };
        let close = !head.keep_alive
            || framing == Framing::Close
            || self.body_abandoned
            || self.conn.shutting_down();
        head::response_head(
            &mut self.conn.wbuf,
            response.status,
            Fields::H1 {
                buf: &conn.buf,
                fields: &self.response_fields,
            },
            framing,
            persistence(head, close),
            edits.as_ref(),
        );
        self.put_back_edits(edits);
        conn.buf.advance(response.len);
        let complete = self
            .relay_body(&mut conn, response.framing, framing, filter.as_mut())
            .await;
        let worker = Arc::clone(&self.worker);
        if complete && response.keep_alive && conn.buf.is_empty() && !self.body_abandoned {
            worker.pool.put(
                self.plan.upstream(conn.upstream),
                worker.metrics(),
                conn,
                answered,
            );
        } else {
            worker.metrics().upstream_open(conn.upstream, -1);
        }
        Ok(match (complete, close) {
            (false, _) => Next::Abort,
            (true, true) => Next::Close,
            (true, false) => Next::KeepAlive,
        })
    }

    /// Reads a Content-Length response body whole and shows it to the
    /// handlers that asked (`validate` with `responses: true`). A body that
    /// does not arrive is left to `relay_body` to report.
    pub(in crate::session) async fn check_response_body(
        &mut self,
        conn: &mut UpstreamConn,
        response: &ResponseHead,
    ) {
        let Some(chain) = self.chain.clone() else {
            return;
        };
        let (Some(max), BodyFraming::Length(len)) = (
            chain.wants_response_body(response.status, &self.exchange),
            response.framing,
        ) else {
            return;
        };
        let Some(end) = usize::try_from(len)
            .ok()
            .filter(|&len| len <= max)
            .map(|len| response.len + len)
        else {
            return;
        };
        let timeout = self.plan.upstream(conn.upstream).timeouts.request;
        let deadline = tokio::time::Instant::now() + timeout;
        while conn.buf.len() < end {
            match self.read_upstream(conn, deadline, false).await {
                UpstreamRead::Done(Ok(read)) if read > 0 => {}
                _ => return,
            }
        }
        let content_type = self
            .response_fields
            .iter()
            .find(|(name, _)| conn.buf[name.clone()].eq_ignore_ascii_case(b"content-type"))
            .map(|(_, value)| &conn.buf[value.clone()]);
        let view = ResponseView {
            status: response.status,
            content_type,
            body: &conn.buf[response.len..end],
        };
        chain.response_body(&view, &self.exchange);
    }

    /// Copies the response body into `wbuf` (through `filter`, when the
    /// chain asked for one), flushing as it grows. False when the upstream
    /// broke off or the client went away.
    pub(in crate::session) async fn relay_body(
        &mut self,
        conn: &mut UpstreamConn,
        from: BodyFraming,
        to: Framing,
        mut filter: Option<&mut ResponseBodyFilter>,
    ) -> bool {
        let read_timeout = self.plan.upstream(conn.upstream).timeouts.request;
        let mut remaining = match from {
            BodyFraming::None => return true,
            BodyFraming::Length(n) => n,
            _ => u64::MAX,
        };
        let mut decoder = ChunkedDecoder::default();
        // The decoded bytes of a chunked body, when they are filtered.
        let mut decoded = Vec::new();
        loop {
            let done = match from {
                BodyFraming::Chunked => {
                    let wbuf = &mut self.conn.wbuf;
                    let filtering = filter.is_some();
                    let rechunk = to == Framing::Chunked;
                    let Ok(decoded_part) = decoder.decode(&conn.buf, &UPSTREAM_LIMITS, |data| {
                        if filtering {
                            decoded.extend_from_slice(data);
                        } else if rechunk {
                            encode_chunk(wbuf, data);
                        } else {
                            wbuf.extend_from_slice(data);
                        }
                    }) else {
                        warn!(upstream = %self.plan.upstream(conn.upstream).name, "invalid chunked body from the upstream");
                        return false;
                    };
                    conn.buf.advance(decoded_part.consumed);
                    if !put_body(&mut self.conn.wbuf, to, filter.as_deref_mut(), &decoded) {
                        return false;
                    }
                    decoded.clear();
                    decoded_part.done
                }
                _ => {
                    let take = usize::try_from(remaining)
                        .unwrap_or(usize::MAX)
                        .min(conn.buf.len());
                    let data = &conn.buf[..take];
                    if !put_body(&mut self.conn.wbuf, to, filter.as_deref_mut(), data) {
                        return false;
                    }
                    conn.buf.advance(take);
                    remaining -= take as u64;
                    remaining == 0
                }
            };
            if done {
                return end_body(&mut self.conn.wbuf, to, filter);
            }
            if self.conn.wbuf.len() >= FLUSH_AT && !self.conn.flush().await {
                return false;
            }
            let deadline = tokio::time::Instant::now() + read_timeout;
            match self.read_upstream(conn, deadline, false).await {
                UpstreamRead::Done(Ok(0)) if from == BodyFraming::UntilClose => {
                    return end_body(&mut self.conn.wbuf, to, filter);
                }
                UpstreamRead::ClientGone | UpstreamRead::ClientClosed => return false,
                UpstreamRead::Done(Ok(0) | Err(_)) | UpstreamRead::TimedOut => {
                    let config = &self.plan.upstream(conn.upstream);
                    self.worker
                        .metrics()
                        .upstream_error(conn.upstream, UpstreamError::Broken);
                    warn!(upstream = %config.name, host = %config.host_name(conn.host), "the upstream broke off a response body; closing the client connection");
                    return false;
                }
                UpstreamRead::Done(Ok(_)) => {}
            }
        }
    }

    /// After `101 Switching Protocols`: bytes flow both ways until either side closes.
    pub(in crate::session) async fn tunnel(
        &mut self,
        mut conn: UpstreamConn,
        response: &ResponseHead,
        edits: Option<HeaderEdits>,
    ) -> Next {
        head::response_head(
            &mut self.conn.wbuf,
            response.status,
            Fields::H1 {
                buf: &conn.buf,
                fields: &self.response_fields,
            },
            Framing::None,
            Persistence::KeepAlive,
            edits.as_ref(),
        );
        self.put_back_edits(edits);
        conn.buf.advance(response.len);
        self.conn.wbuf.extend_from_slice(&conn.buf);
        let early = std::mem::take(&mut self.conn.rbuf);
        let ok = self.conn.flush().await
            && (early.is_empty() || conn.stream.write_all(&early).await.is_ok());
        if ok {
            let _ = tokio::io::copy_bidirectional(&mut self.conn.stream, &mut conn.stream).await;
        }
        self.worker.metrics().upstream_open(conn.upstream, -1);
        Next::Abort
    }

    /// Whether a `101`'s `Upgrade` names a protocol the request offered upstream.
    pub(in crate::session) fn switch_offered(&self, conn: &UpstreamConn) -> bool {
        let answered = self
            .response_fields
            .iter()
            .find(|(name, _)| conn.buf[name.clone()].eq_ignore_ascii_case(b"upgrade"))
            .map(|(_, value)| &conn.buf[value.clone()]);
        answered.is_some_and(|answered| {
            crate::wire::normalize::upgrade::switched_to_offered(
                answered,
                &self.decided.upgrade.kept,
            )
        })
    }
}

/// Writes `data` of the upstream's body into `wbuf` for the client:
/// through `filter` when there is one, then framed as `to` says. False
/// when the filter failed (the response is cut short).
pub(in crate::session) fn put_body(
    wbuf: &mut Vec<u8>,
    to: Framing,
    filter: Option<&mut ResponseBodyFilter>,
    data: &[u8],
) -> bool {
    let Some(filter) = filter else {
        match to {
            Framing::Chunked => encode_chunk(wbuf, data),
            _ => wbuf.extend_from_slice(data),
        }
        return true;
    };
    if data.is_empty() {
        return true;
    }
    let mut out = Vec::new();
    if let Err(failed) = filter.data(data, &mut out) {
        warn!(
            why = failed.0,
            "a response body filter failed; closing the client connection"
        );
        return false;
    }
    put_body(wbuf, to, None, &out)
}

/// Ends the body in `wbuf`: the filter's last bytes, then the last chunk.
pub(in crate::session) fn end_body(
    wbuf: &mut Vec<u8>,
    to: Framing,
    filter: Option<&mut ResponseBodyFilter>,
) -> bool {
    if let Some(filter) = filter {
        let mut out = Vec::new();
        if let Err(failed) = filter.end(None, &mut out) {
            warn!(
                why = failed.0,
                "a response body filter failed; closing the client connection"
            );
            return false;
        }
        put_body(wbuf, to, None, &out);
    }
    if to == Framing::Chunked {
        wbuf.extend_from_slice(LAST_CHUNK);
    }
    true
}
