//! The exchange with an HTTP/1.1 upstream: the request head (and the body
//! when it is all here) in one write, the rest of the body streamed, then
//! the response head, reading while earlier pipelined answers still wait.

use super::{Failure, Session, BATCH_WINDOW, READ_RESERVE, UPSTREAM_LIMITS};
use crate::upstream::pool::UpstreamConn;
use crate::wire::head;
use crate::wire::{
    fields::Fields,
    head::{Framing, Offered, Outgoing, RequestContext},
};
use http1::chunked::{encode_chunk, LAST_CHUNK};
use http1::io::write_bounded;
use http1::{Framing as RequestFraming, Head, ResponseHead};

use std::{
    future::{poll_fn, Future},
    pin::{pin, Pin},
    task::Poll,
    time::{Duration, Instant},
};

use bytes::Buf;
use http::{Method, StatusCode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tracing::debug;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// The upstream request head into `ubuf`.
    pub(super) fn build_request(
        &mut self,
        head: &Head,
        host_header: Option<&http::HeaderValue>,
    ) -> Result<(), Failure> {
        // Taken out for the write: the context borrows the rest of the session.
        let mut ubuf = std::mem::take(&mut self.ubuf);
        ubuf.clear();
        let built = self.request_context(head, host_header).map(|context| {
            let request = outgoing(&self.conn.rbuf, head, &self.fields);
            head::request_head(&mut ubuf, &request, &context);
        });
        self.ubuf = ubuf;
        built
    }

    /// What the head rules need beyond the client's head: the peer, the
    /// normalised target, the upgrade offer, the framing and the edits.
    pub(super) fn request_context<'a>(
        &'a self,
        head: &Head,
        host_header: Option<&'a http::HeaderValue>,
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
        })
    }

    /// Moves as much of the body as the client already sent into `ubuf`;
    /// true when that is all of it (the request can be sent again).
    pub(super) fn buffer_body(&mut self, head: &Head) -> Result<bool, Failure> {
        match head.framing {
            RequestFraming::Empty => Ok(true),
            RequestFraming::Length(len) => {
                let take = len.min(self.conn.rbuf.len());
                self.ubuf.extend_from_slice(&self.conn.rbuf[..take]);
                self.conn.rbuf.advance(take);
                self.body_left = len - take;
                Ok(self.body_left == 0)
            }
            RequestFraming::Chunked => {
                self.chunked.reset();
                self.decode_chunks()
            }
        }
    }

    /// Re-chunks what `rbuf` holds of a chunked body into `ubuf`; true at its end.
    pub(super) fn decode_chunks(&mut self) -> Result<bool, Failure> {
        let limits = self.body_limits();
        let ubuf = &mut self.ubuf;
        let decoded = self
            .chunked
            .decode(&self.conn.rbuf, &limits, |data| encode_chunk(ubuf, data))
            .map_err(|rejection| Failure {
                body_unread: true,
                ..Failure::new(rejection.status, rejection.detail)
            })?;
        self.conn.rbuf.advance(decoded.consumed);
        if decoded.done {
            self.ubuf.extend_from_slice(LAST_CHUNK);
        }
        Ok(decoded.done)
    }

    /// Writes the request (streaming the rest of its body) and reads the
    /// response head, skipping `100 Continue`.
    pub(super) async fn send_and_read_head(
        &mut self,
        head: &Head,
        conn: &mut UpstreamConn,
        replayable: bool,
        sent_at: Instant,
    ) -> Result<ResponseHead, SendError> {
        let timeouts = self.plan.upstream(conn.upstream).timeouts.clone();
        if !write_bounded(&mut conn.stream, &self.ubuf, timeouts.request).await {
            return Err(if conn.reused {
                Stale
            } else {
                Reset(self.broken(conn, "cannot send the request", !replayable))
            });
        }
        let deadline = if replayable {
            tokio::time::Instant::from_std(sent_at) + timeouts.request
        } else {
            self.stream_body(head, conn).await.map_err(SendFailed)?;
            tokio::time::Instant::now() + timeouts.request
        };
        if self.body_abandoned {
            // The upstream spoke before the body ended (an early 413 or
            // 401): what it said is read below; the client's connection
            // closes after the answer (RFC 9112 9.6).
            debug!(peer = %self.peer, "the upstream answered before the request body ended");
        }
        loop {
            self.response_fields.clear();
            let head_request = head.method == Method::HEAD;
            match http1::parse_response_head(
                &conn.buf,
                UPSTREAM_LIMITS.max_head,
                head_request,
                &mut self.response_fields,
            ) {
                Ok(Some(response)) if response.status == StatusCode::CONTINUE => {
                    conn.buf.advance(response.len);
                    continue;
                }
                Ok(Some(response)) => return Ok(response),
                Ok(None) => {}
                Err(rejection) => {
                    return Err(SendFailed(self.broken(conn, &rejection.detail, false)))
                }
            }
            match self.read_upstream(conn, deadline).await {
                UpstreamRead::ClientGone => {
                    return Err(SendFailed(Failure::new(
                        StatusCode::BAD_REQUEST,
                        "client gone",
                    )))
                }
                UpstreamRead::Done(Ok(0) | Err(_)) if conn.reused && conn.buf.is_empty() => {
                    return Err(Stale)
                }
                UpstreamRead::Done(Ok(0) | Err(_)) if conn.buf.is_empty() => {
                    return Err(Reset(self.broken(
                        conn,
                        "the upstream closed the connection before answering",
                        false,
                    )))
                }
                UpstreamRead::Done(Ok(0)) => {
                    return Err(SendFailed(self.broken(
                        conn,
                        "the upstream closed the connection in its answer's head",
                        false,
                    )))
                }
                UpstreamRead::Done(Err(err)) => {
                    return Err(SendFailed(self.broken(
                        conn,
                        &format!("read failed: {err}"),
                        false,
                    )))
                }
                UpstreamRead::Done(Ok(_)) => {}
                UpstreamRead::TimedOut => {
                    return Err(SendFailed(self.timed_out(conn, timeouts.request)));
                }
            }
        }
    }

    /// Reads from the upstream until data arrives or `deadline` passes.
    /// Answers already waiting in `wbuf` leave when the batch window closes,
    /// so that a slow upstream holds back neither earlier pipelined answers
    /// nor the part of a streamed body already received.
    pub(super) async fn read_upstream(
        &mut self,
        conn: &mut UpstreamConn,
        deadline: tokio::time::Instant,
    ) -> UpstreamRead {
        conn.buf.reserve(READ_RESERVE);
        loop {
            // Started when we first wait, not when the answer was written:
            // a request that needs no waiting costs no clock read.
            let batch_ends = self.conn.batch_ends(BATCH_WINDOW);
            self.conn
                .arm_timer(batch_ends.map_or(deadline, |ends| ends.min(deadline)));
            tokio::select! {
                biased;
                read = conn.stream.read_buf(&mut conn.buf) => return UpstreamRead::Done(read),
                () = self.conn.timer() => {}
            }
            let now = tokio::time::Instant::now();
            if batch_ends.is_some_and(|ends| now >= ends) {
                if !self.conn.flush().await {
                    return UpstreamRead::ClientGone;
                }
            } else if now >= deadline {
                return UpstreamRead::TimedOut;
            }
        }
    }

    /// Streams the part of the request body the client has not sent yet.
    pub(super) async fn stream_body(
        &mut self,
        head: &Head,
        conn: &mut UpstreamConn,
    ) -> Result<(), Failure> {
        if head.expect_continue {
            self.conn
                .wbuf
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        let write_timeout = self.plan.upstream(conn.upstream).timeouts.request;
        loop {
            // The upstream may answer before the body ends: watch it while
            // waiting for the client.
            conn.buf.reserve(READ_RESERVE);
            let upstream_spoke = tokio::select! {
                biased;
                _ = conn.stream.read_buf(&mut conn.buf) => true,
                part = self.read_body_part() => {
                    part?;
                    false
                }
            };
            if upstream_spoke {
                self.body_abandoned = true;
                return Ok(());
            }
            self.ubuf.clear();
            let done = match head.framing {
                RequestFraming::Chunked => self.decode_chunks()?,
                _ => {
                    let take = self.body_left.min(self.conn.rbuf.len());
                    self.ubuf.extend_from_slice(&self.conn.rbuf[..take]);
                    self.conn.rbuf.advance(take);
                    self.body_left -= take;
                    self.body_left == 0
                }
            };
            match write_or_hear(conn, &self.ubuf, write_timeout).await {
                Written::All => {}
                // It answered (or closed) while this part was going out:
                // what it said is read next.
                Written::Heard => {
                    self.body_abandoned = !done;
                    return Ok(());
                }
                Written::Failed if done => {
                    return Err(self.broken(conn, "cannot send the request body", false));
                }
                Written::Failed => {
                    // Closed on us mid-body: it may have answered first.
                    self.body_abandoned = true;
                    return Ok(());
                }
            }
            if done {
                return Ok(());
            }
        }
    }
}

/// How writing a part of the body upstream ended.
enum Written {
    All,
    /// The upstream spoke (or closed) while the write could not go on.
    Heard,
    /// The write failed or timed out.
    Failed,
}

/// Writes `bytes` upstream, unless the upstream speaks while the write
/// is blocked: an upstream that answers early may stop reading the body
/// (RFC 9112 9.6), and its answer must not wait behind our write.
async fn write_or_hear(conn: &mut UpstreamConn, bytes: &[u8], timeout: Duration) -> Written {
    let mut written = 0;
    let mut flushed = false;
    let turn = poll_fn(|cx| {
        while written < bytes.len() {
            match Pin::new(&mut conn.stream).poll_write(cx, &bytes[written..]) {
                Poll::Ready(Ok(n)) if n > 0 => written += n,
                Poll::Ready(_) => return Poll::Ready(Written::Failed),
                Poll::Pending => break,
            }
        }
        if written == bytes.len() && !flushed {
            match Pin::new(&mut conn.stream).poll_flush(cx) {
                Poll::Ready(Ok(())) => flushed = true,
                Poll::Ready(Err(_)) => return Poll::Ready(Written::Failed),
                Poll::Pending => {}
            }
        }
        if flushed {
            return Poll::Ready(Written::All);
        }
        conn.buf.reserve(READ_RESERVE);
        match pin!(conn.stream.read_buf(&mut conn.buf)).poll(cx) {
            Poll::Ready(_) => Poll::Ready(Written::Heard),
            Poll::Pending => Poll::Pending,
        }
    });
    tokio::time::timeout(timeout, turn)
        .await
        .unwrap_or(Written::Failed)
}

/// How waiting for upstream bytes ended.
pub(super) enum UpstreamRead {
    Done(std::io::Result<usize>),
    TimedOut,
    /// Flushing waiting answers found the client gone.
    ClientGone,
}

/// Why sending a request or reading its response head failed.
pub(super) enum SendError {
    /// A pooled connection the upstream had already closed; nothing was answered.
    Stale,
    /// A new connection closed or reset before any byte of an answer
    /// (`retry_on: reset`); counted against the host already.
    Reset(Failure),
    SendFailed(Failure),
}

pub(super) use SendError::{Reset, SendFailed, Stale};

/// An HTTP/1.1 client's request, as the head rules read it.
pub(super) fn outgoing<'a>(
    buf: &'a [u8],
    head: &'a Head,
    fields: &'a [http1::Field],
) -> Outgoing<'a> {
    Outgoing {
        method: &head.method,
        path: &buf[head.path.clone()],
        query: head.query.clone().map(|q| &buf[q]),
        host: head.host.clone().map(|h| &buf[h]),
        fields: Fields::H1 { buf, fields },
    }
}
