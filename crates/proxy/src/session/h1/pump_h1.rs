//! The request body of an HTTP/1.1 client on its way to an HTTP/1.1
//! upstream: what has arrived goes with the head, the rest is streamed
//! while the upstream is watched, so that an early answer is heard and an
//! interim one lets the body go on.

use std::{
    future::{poll_fn, Future},
    pin::{pin, Pin},
    task::Poll,
    time::Duration,
};

use bytes::Buf;
use http1::{
    chunked::{encode_chunk, LAST_CHUNK},
    Framing as RequestFraming, Head,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use crate::session::{attempts::hosts::Hosts, Failure, Session, READ_RESERVE};
use crate::upstream::pool::UpstreamConn;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Moves as much of the body as the client already sent into `ubuf`;
    /// true when that is all of it (the request can be sent again).
    pub(in crate::session) fn buffer_body(&mut self, head: &Head) -> Result<bool, Failure> {
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
    pub(in crate::session) fn decode_chunks(&mut self) -> Result<bool, Failure> {
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

    /// Streams the part of the request body the client has not sent yet.
    /// Interim answers that arrive meanwhile (`100 Continue` to a
    /// forwarded `Expect`, `102`, `103`) are taken as they come and the
    /// body goes on; a final answer (or a close) ends the body early.
    pub(in crate::session) async fn stream_body(
        &mut self,
        hosts: &Hosts<'_>,
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
            let upstream_read = tokio::select! {
                biased;
                read = conn.stream.read_buf(&mut conn.buf) => Some(read),
                part = self.read_body_part() => {
                    part?;
                    None
                }
            };
            if let Some(read) = upstream_read {
                if !self.only_interim(head, conn, read) {
                    self.body_abandoned = true;
                    return Ok(());
                }
                continue;
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
            let mut written = 0;
            loop {
                let ubuf = std::mem::take(&mut self.ubuf);
                let outcome = write_or_hear(conn, &ubuf, &mut written, write_timeout).await;
                self.ubuf = ubuf;
                match outcome {
                    Written::All => break,
                    // It spoke while this part was going out: an interim
                    // answer lets the write go on; anything else is read next.
                    Written::Heard(read) => {
                        if !self.only_interim(head, conn, read) {
                            self.body_abandoned = !done || written < self.ubuf.len();
                            return Ok(());
                        }
                    }
                    Written::Failed if done => {
                        return Err(hosts.broken(conn.host, "cannot send the request body", false));
                    }
                    Written::Failed => {
                        // Closed on us mid-body: it may have answered first.
                        self.body_abandoned = true;
                        return Ok(());
                    }
                }
            }
            if done {
                return Ok(());
            }
        }
    }

    /// After the upstream spoke mid-body (`read`): whether all it said so
    /// far is interim answers (taken now), so the body goes on.
    fn only_interim(
        &mut self,
        head: &Head,
        conn: &mut UpstreamConn,
        read: std::io::Result<usize>,
    ) -> bool {
        // A close or an error is read again with the answer; a final
        // head (or a broken one) stays in `conn.buf` for `final_head`.
        matches!(read, Ok(n) if n > 0) && matches!(self.past_interim(head, conn), Ok(None))
    }
}

/// How writing a part of the body upstream ended.
enum Written {
    All,
    /// The upstream spoke (or closed) while the write could not go on.
    Heard(std::io::Result<usize>),
    /// The write failed or timed out.
    Failed,
}

/// Writes `bytes[*written..]` upstream, unless the upstream speaks while
/// the write is blocked: an upstream that answers early may stop reading
/// the body (RFC 9112 9.6), and its answer must not wait behind our write.
async fn write_or_hear(
    conn: &mut UpstreamConn,
    bytes: &[u8],
    written: &mut usize,
    timeout: Duration,
) -> Written {
    let mut flushed = false;
    let turn = poll_fn(|cx| {
        while *written < bytes.len() {
            match Pin::new(&mut conn.stream).poll_write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(n)) if n > 0 => *written += n,
                Poll::Ready(_) => return Poll::Ready(Written::Failed),
                Poll::Pending => break,
            }
        }
        if *written == bytes.len() && !flushed {
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
        pin!(conn.stream.read_buf(&mut conn.buf))
            .poll(cx)
            .map(Written::Heard)
    });
    tokio::time::timeout(timeout, turn)
        .await
        .unwrap_or(Written::Failed)
}
