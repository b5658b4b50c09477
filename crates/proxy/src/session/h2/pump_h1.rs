//! The request body of an HTTP/2 client's stream on its way to an
//! HTTP/1.1 upstream, pumped while the upstream's answer is read (full
//! duplex on one connection): `to_h1` reads the response head and then
//! the response body through [`BodyPump::read`].

use std::{
    future::{poll_fn, Future},
    io,
    pin::{pin, Pin},
    task::{Context, Poll},
};

use bytes::Bytes;
use h2::RecvStream;
use http::HeaderMap;
use http1::chunked::{encode_chunk, encode_last_chunk};
use tokio::io::{AsyncReadExt, AsyncWrite};

use super::TrailerRules;
use crate::{
    session::READ_RESERVE,
    upstream::{connect::UpstreamStream, pool::UpstreamConn},
};

/// Why reading the upstream's answer stopped.
pub(super) enum PumpStop {
    Read(io::Error),
    TimedOut,
    /// The client's body went past the route's limit.
    TooLarge,
    /// The client broke off (or reset) its body.
    Client,
}

/// What the pump saw in one turn.
enum Turn {
    Read(io::Result<usize>),
    WriteFailed,
    Data(Option<Result<Bytes, h2::Error>>),
    Trailers(Result<Option<HeaderMap>, h2::Error>),
}

/// The client's body on its way upstream while the answer is read, both
/// on the one connection: a DATA frame is taken from the client only
/// once the one before is written (so its flow-control credit paces the
/// client), and a write that would block never holds up reading the
/// answer (an upstream may answer early and stop reading, RFC 9112 9.6).
pub(super) struct BodyPump<'a> {
    /// The client's stream while there is more to take from it.
    client: Option<&'a mut RecvStream>,
    chunked: bool,
    max_body: usize,
    /// Body bytes taken from the client.
    pub sent: usize,
    /// Framed bytes not yet written, from `written` on.
    out: Vec<u8>,
    written: usize,
    unflushed: bool,
    /// The client's DATA ended: its trailers (last chunk) come next.
    data_ended: bool,
    /// The whole body was framed (the rest of `out` still goes out).
    ended: bool,
    /// What becomes of the client's trailers.
    trailer_rules: TrailerRules<'a>,
}

impl<'a> BodyPump<'a> {
    pub(super) fn new(
        client: Option<&'a mut RecvStream>,
        chunked: bool,
        max_body: usize,
        trailer_rules: TrailerRules<'a>,
    ) -> Self {
        Self {
            trailer_rules,
            ended: client.is_none(),
            client,
            chunked,
            max_body,
            sent: 0,
            out: Vec::new(),
            written: 0,
            unflushed: false,
            data_ended: false,
        }
    }

    /// The whole body went upstream: the connection can serve another request.
    pub(super) fn complete(&self) -> bool {
        let written = self.out.is_empty() && !self.unflushed;
        // A client's END_STREAM not yet polled ends a body of known length.
        let at_end = !self.chunked && self.client.as_ref().is_some_and(|c| c.is_end_stream());
        written && (self.ended || at_end)
    }

    /// Reads more of the upstream's answer into `conn.buf` (the count, 0
    /// at its end), pumping the client's body meanwhile.
    pub(super) async fn read(
        &mut self,
        conn: &mut UpstreamConn,
        deadline: tokio::time::Instant,
    ) -> Result<usize, PumpStop> {
        conn.buf.reserve(READ_RESERVE);
        loop {
            let turn = tokio::select! {
                biased;
                turn = poll_fn(|cx| self.poll_turn(cx, conn)) => turn,
                () = tokio::time::sleep_until(deadline) => return Err(PumpStop::TimedOut),
            };
            match turn {
                Turn::Read(read) => return read.map_err(PumpStop::Read),
                Turn::WriteFailed => {
                    // The upstream may have answered and closed: read what it said.
                    self.client = None;
                    self.ended = false;
                    self.out.clear();
                    self.written = 0;
                    self.unflushed = false;
                }
                Turn::Data(Some(Ok(data))) => self.frame(&data)?,
                Turn::Data(Some(Err(_))) | Turn::Trailers(Err(_)) => return Err(PumpStop::Client),
                Turn::Data(None) if self.chunked => self.data_ended = true,
                Turn::Data(None) => self.end(),
                Turn::Trailers(Ok(trailers)) => {
                    let trailers = trailers
                        .and_then(|trailers| self.trailer_rules.passable(trailers))
                        .unwrap_or_default();
                    let fields = trailers
                        .iter()
                        .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
                    encode_last_chunk(&mut self.out, fields);
                    self.end();
                }
            }
        }
    }

    fn frame(&mut self, data: &Bytes) -> Result<(), PumpStop> {
        self.sent += data.len();
        if self.sent > self.max_body {
            return Err(PumpStop::TooLarge);
        }
        if self.chunked {
            encode_chunk(&mut self.out, data);
        } else {
            self.out.extend_from_slice(data);
        }
        if let Some(client) = self.client.as_deref_mut() {
            let _ = client.flow_control().release_capacity(data.len());
        }
        Ok(())
    }

    fn end(&mut self) {
        self.client = None;
        self.ended = true;
    }

    /// Writes what is framed, then reads the answer, then takes the next
    /// piece of the body once all is written.
    fn poll_turn(&mut self, cx: &mut Context<'_>, conn: &mut UpstreamConn) -> Poll<Turn> {
        let flushed = match self.poll_write(cx, &mut conn.stream) {
            Poll::Ready(Err(())) => return Poll::Ready(Turn::WriteFailed),
            Poll::Ready(Ok(())) => true,
            Poll::Pending => false,
        };
        if let Poll::Ready(read) = pin!(conn.stream.read_buf(&mut conn.buf)).poll(cx) {
            return Poll::Ready(Turn::Read(read));
        }
        match self.client.as_deref_mut() {
            Some(client) if flushed && !self.data_ended => client.poll_data(cx).map(Turn::Data),
            Some(client) if flushed => client.poll_trailers(cx).map(Turn::Trailers),
            _ => Poll::Pending,
        }
    }

    /// Writes and flushes `out`; ready once all of it went out.
    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        stream: &mut UpstreamStream,
    ) -> Poll<Result<(), ()>> {
        while self.written < self.out.len() {
            match Pin::new(&mut *stream).poll_write(cx, &self.out[self.written..]) {
                Poll::Ready(Ok(n)) if n > 0 => self.written += n,
                Poll::Ready(_) => return Poll::Ready(Err(())),
                Poll::Pending => return Poll::Pending,
            }
        }
        if !self.out.is_empty() {
            self.out.clear();
            self.written = 0;
            self.unflushed = true;
        }
        if self.unflushed {
            match Pin::new(stream).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(_)) => return Poll::Ready(Err(())),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}
