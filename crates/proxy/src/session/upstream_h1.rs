//! The exchange with an HTTP/1.1 upstream: the request head (and the body
//! when it is all here) in one write, the rest of the body streamed, then
//! the response head, reading while earlier pipelined answers still wait.

use super::{Failure, Session, BATCH_WINDOW, CLIENT_CLOSED, READ_RESERVE, UPSTREAM_LIMITS};
use crate::telemetry::Event;
use crate::upstream::pool::UpstreamConn;
use crate::wire::head;
use crate::wire::interim::{self, ClientVersion, Interim, InterimAnswers, TooMany};
use crate::wire::{
    fields::Fields,
    head::{Framing, Offered, Outgoing, RequestContext},
};
use http1::io::write_bounded;
use http1::{conn::ServerConnection, Framing as RequestFraming, Head, ResponseHead};

use std::{
    future::{poll_fn, Future},
    pin::pin,
    task::Poll,
    time::Instant,
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

    /// Writes the request (streaming the rest of its body) and reads the
    /// final response head (interim answers as `final_head` says).
    pub(super) async fn send_and_read_head(
        &mut self,
        head: &Head,
        conn: &mut UpstreamConn,
        replayable: bool,
        sent_at: Instant,
    ) -> Result<ResponseHead, super::exchange::Failed> {
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
            // Nothing to parse before the first read (the usual case).
            if !conn.buf.is_empty() {
                match self.final_head(head, conn) {
                    Ok(Some(response)) => return Ok(response),
                    Ok(None) => {}
                    Err(failure) => return Err(SendFailed(failure)),
                }
            }
            match self.read_upstream(conn, deadline, true).await {
                UpstreamRead::ClientGone | UpstreamRead::ClientClosed => {
                    return Err(SendFailed(Failure::new(
                        CLIENT_CLOSED,
                        "the client closed its connection",
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

    /// The final response head if `conn.buf` starts with one, after the
    /// interim (1xx) answers before it, each forwarded to the client or
    /// dropped as the interim rule says (`wire::interim`); `None` while
    /// the buffer holds nothing more than the start of a head.
    #[inline(always)]
    pub(super) fn final_head(
        &mut self,
        head: &Head,
        conn: &mut UpstreamConn,
    ) -> Result<Option<ResponseHead>, Failure> {
        self.past_interim(head, conn)
            .map_err(|detail| self.broken(conn, &detail, false))
    }

    /// [`Session::final_head`], with what is wrong with the head.
    #[inline(always)]
    pub(super) fn past_interim(
        &mut self,
        head: &Head,
        conn: &mut UpstreamConn,
    ) -> Result<Option<ResponseHead>, String> {
        loop {
            self.response_fields.clear();
            let head_request = head.method == Method::HEAD;
            let response = match http1::parse_response_head(
                &conn.buf,
                UPSTREAM_LIMITS.max_head,
                head_request,
                &mut self.response_fields,
            ) {
                Ok(Some(response)) => response,
                Ok(None) => return Ok(None),
                Err(rejection) => return Err(rejection.detail),
            };
            if !interim::is_interim(response.status) {
                return Ok(Some(response));
            }
            let fields = Fields::H1 {
                buf: &conn.buf,
                fields: &self.response_fields,
            };
            let (wbuf, interim) = (&mut self.conn.wbuf, &mut self.interim);
            match interim_for(wbuf, interim, head, response.status, fields) {
                Ok(true) => return Ok(Some(response)),
                Ok(false) => conn.buf.advance(response.len),
                Err(TooMany) => {
                    self.worker.metrics().event(Event::InterimFlood);
                    return Err(TooMany::DETAIL.into());
                }
            }
        }
    }

    /// [`interim_for`] an HTTP/2 upstream's interim answer; past the
    /// bound the exchange fails with `failed` (the stream is dropped:
    /// reset).
    pub(super) fn take_interim(
        &mut self,
        head: &Head,
        status: StatusCode,
        fields: Fields<'_>,
        failed: impl FnOnce(&Self) -> Failure,
    ) -> Result<(), Failure> {
        let (wbuf, interim) = (&mut self.conn.wbuf, &mut self.interim);
        match interim_for(wbuf, interim, head, status, fields) {
            Ok(_) => Ok(()),
            Err(TooMany) => {
                self.worker.metrics().event(Event::InterimFlood);
                Err(failed(self))
            }
        }
    }

    /// Runs `work` (a wait before the upstream exchange: a host slot, a
    /// connection) unless the client closes its connection first: then
    /// 499, and nothing goes upstream.
    pub(super) async fn unless_client_gone<F: Future>(
        &mut self,
        work: F,
    ) -> Result<F::Output, Failure> {
        let mut work = pin!(work);
        let max_buffered = self.plan.limits.max_head;
        let client = &mut self.conn;
        let done = poll_fn(|cx| {
            if let Poll::Ready(done) = work.as_mut().poll(cx) {
                return Poll::Ready(Some(done));
            }
            poll_client_gone(client, max_buffered, cx).map(|()| None)
        })
        .await;
        done.ok_or_else(|| Failure::new(CLIENT_CLOSED, "the client closed its connection"))
    }

    /// Reads from the upstream until data arrives or `deadline` passes.
    /// Answers already waiting in `wbuf` leave when the batch window closes,
    /// so that a slow upstream holds back neither earlier pipelined answers
    /// nor the part of a streamed body already received.
    pub(super) async fn read_upstream(
        &mut self,
        conn: &mut UpstreamConn,
        deadline: tokio::time::Instant,
        watch_client: bool,
    ) -> UpstreamRead {
        conn.buf.reserve(READ_RESERVE);
        loop {
            // Started when we first wait, not when the answer was written:
            // a request that needs no waiting costs no clock read.
            let batch_ends = self.conn.batch_ends(BATCH_WINDOW);
            self.conn
                .arm_timer(batch_ends.map_or(deadline, |ends| ends.min(deadline)));
            // With `watch_client` (while the answer's head is awaited), the
            // client is watched too: one that closes its connection (or
            // resets it) cancels the exchange at once, as nginx does. What
            // a pipelining client sends meanwhile is kept, up to a head's size.
            let max_buffered = self.plan.limits.max_head;
            let client = &mut self.conn;
            let woke = poll_fn(|cx| {
                if let Poll::Ready(read) = pin!(conn.stream.read_buf(&mut conn.buf)).poll(cx) {
                    return Poll::Ready(Woke::Upstream(read));
                }
                if watch_client && poll_client_gone(client, max_buffered, cx).is_ready() {
                    return Poll::Ready(Woke::ClientClosed);
                }
                client.timer().poll(cx).map(|()| Woke::Timer)
            })
            .await;
            match woke {
                Woke::Upstream(read) => return UpstreamRead::Done(read),
                Woke::ClientClosed => return UpstreamRead::ClientClosed,
                Woke::Timer => {}
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
}

/// Applies the interim rule (`wire::interim`) to a response head with
/// `status` from the upstream (either protocol): true when it is the
/// final one; an interim one goes into `wbuf` for the client, or not.
fn interim_for(
    wbuf: &mut Vec<u8>,
    interim: &mut InterimAnswers,
    head: &Head,
    status: StatusCode,
    fields: Fields<'_>,
) -> Result<bool, TooMany> {
    let client = if head.http10 {
        ClientVersion::Http10
    } else {
        ClientVersion::Http11
    };
    match interim.classify(status, client)? {
        Interim::Final => return Ok(true),
        Interim::Drop => {}
        Interim::Forward => interim::interim_head(wbuf, status, fields),
    }
    Ok(false)
}

/// How waiting for upstream bytes ended.
pub(super) enum UpstreamRead {
    Done(std::io::Result<usize>),
    TimedOut,
    /// Flushing waiting answers found the client gone.
    ClientGone,
    /// The client closed its connection while the upstream was awaited.
    ClientClosed,
}

/// What woke a wait for the upstream.
enum Woke {
    Upstream(std::io::Result<usize>),
    ClientClosed,
    Timer,
}

/// Reads what the client sends while its answer is awaited (pipelined
/// requests, kept for later, up to `max_buffered` bytes); ready once the
/// client has closed or reset its connection. Past `max_buffered` the
/// client is no longer watched (nothing more is read from it).
pub(super) fn poll_client_gone<S: AsyncRead + Unpin>(
    client: &mut ServerConnection<S>,
    max_buffered: usize,
    cx: &mut std::task::Context<'_>,
) -> Poll<()> {
    while client.rbuf.len() < max_buffered {
        client.rbuf.reserve(READ_RESERVE);
        match pin!(client.stream.read_buf(&mut client.rbuf)).poll(cx) {
            Poll::Ready(Ok(0) | Err(_)) => return Poll::Ready(()),
            Poll::Ready(Ok(_)) => {}
            Poll::Pending => return Poll::Pending,
        }
    }
    Poll::Pending
}

pub(super) use super::exchange::Failed::{Final as SendFailed, Reset, Stale};

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
