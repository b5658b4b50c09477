//! One HTTP/1.1 connection: read, parse every complete request, answer each
//! in order into one buffer, flush once, repeat. Generic over the stream
//! (TCP or TLS), monomorphised so that plain TCP pays nothing for TLS.

use std::{future::Future, pin::Pin, time::Duration};

use bytes::Buf;
use http::{header, Method, StatusCode};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::watch,
};

use http1::{
    chunked::body_too_large,
    conn::{Deadlines, ReadEnd, ReadReady, ServerConnection},
    io::{preface, with_date, write_bounded, Preface, Prefaced},
    ChunkedDecoder, Framing, Head, Limits, Persistence, Rejection,
};

use crate::message::{Request, Response};
use crate::{problem::IntoResponse, App};

/// Limits for every backend connection.
pub(crate) const LIMITS: Limits = Limits {
    max_head: 32 * 1024,
    max_body: crate::request::MAX_JSON_BODY,
};
/// A keep-alive connection with no request for this long is closed.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// A request must arrive completely (head and body) within this time of its first byte.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const DEADLINES: Deadlines = Deadlines {
    idle: IDLE_TIMEOUT,
    request: REQUEST_TIMEOUT,
};
/// Bodies larger than this are written straight from their buffer, not copied.
const INLINE_BODY_MAX: usize = 64 * 1024;
/// Pending responses are flushed early once they exceed this.
const FLUSH_AT: usize = 256 * 1024;
/// A client that takes nothing of a pending write for this long is dropped.
pub(crate) const WRITE_TIMEOUT: Duration = http1::conn::WRITE_TIMEOUT;
/// Buffers grown past this by one large request are replaced afterwards.
const SHRINK_ABOVE: usize = http1::conn::SHRINK_ABOVE;

/// Serves a connection that opened with the HTTP/2 preface: HTTP/2 with
/// prior knowledge, the bytes read so far replayed. A function pointer, not
/// a call in this generic code, so that the h2 server is compiled only for
/// plain TCP, the one stream that can carry h2c.
pub(crate) type H2c<S> =
    fn(Prefaced<S>, App, watch::Receiver<bool>) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// Serves `stream` until the client closes, a timeout passes, a request is
/// rejected, or shutdown is signalled (idle connections close at once, a
/// request in progress is answered with `Connection: close`).
///
/// With `h2c`, a connection that opens with the HTTP/2 preface instead of
/// a request goes to it. The first read looks for the preface and is the
/// read HTTP/1.1 makes anyway: no peek, no extra system call, and nothing
/// per request.
pub(crate) async fn serve_connection<S: AsyncRead + AsyncWrite + ReadReady + Unpin>(
    stream: S,
    app: App,
    shutdown: watch::Receiver<bool>,
    h2c: Option<H2c<S>>,
) {
    let mut conn = Connection {
        conn: ServerConnection::new(stream, bytes::BytesMut::new(), shutdown, IDLE_TIMEOUT),
        chunked: ChunkedDecoder::default(),
        chunked_raw: 0,
        chunked_body: Vec::new(),
    };
    if let Some(h2c) = h2c {
        match conn.read_preface().await {
            Ok(false) => {}
            Ok(true) => {
                let (stream, read, shutdown) = conn.conn.into_parts();
                let stream = Prefaced::new(read.freeze(), stream);
                return h2c(stream, app, shutdown).await;
            }
            Err(end) => return conn.end(end).await,
        }
    }
    conn.run(&app).await;
}

/// The shared connection plus what a backend keeps per request.
struct Connection<S> {
    conn: ServerConnection<S>,
    /// Decoder of the current request's chunked body.
    chunked: ChunkedDecoder,
    /// Raw bytes of the chunked body decoded so far (after the head).
    chunked_raw: usize,
    /// The decoded chunked body.
    chunked_body: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + ReadReady + Unpin> Connection<S> {
    async fn run(&mut self, app: &App) {
        loop {
            let head = match http1::parse_head(&self.conn.rbuf, &LIMITS) {
                Ok(Some(head)) => head,
                Ok(None) => match self.conn.read_more(DEADLINES).await {
                    Ok(()) => continue,
                    Err(end) => return self.end(end).await,
                },
                Err(rejection) => return self.reject(rejection, false).await,
            };
            let head_only = head.method == Method::HEAD;
            let body_len = match self.read_body(&head).await {
                Ok(len) => len,
                Err(Ok(rejection)) => return self.reject(rejection, head_only).await,
                Err(Err(end)) => return self.end(end).await,
            };
            let response = {
                let request = self.request(&head, body_len);
                app.handle(&request).await
            };
            // Shutdown may have come while the handler ran.
            let closing = !head.keep_alive || self.conn.shutting_down();
            self.conn.rbuf.advance(head.len + body_len);
            self.conn.request_read();
            self.release_large_buffers();
            let persistence = match (closing, head.http10) {
                (true, _) => Persistence::Close,
                (false, true) => Persistence::KeepAlive10,
                (false, false) => Persistence::KeepAlive,
            };
            if !self.write_response(&response, head_only, persistence).await {
                return;
            }
            if closing {
                // Pipelined input after the last answered request is unread.
                let linger = !self.conn.rbuf.is_empty();
                return self.conn.close(linger).await;
            }
        }
    }

    /// Reads until the buffer holds the whole HTTP/2 preface (true) or bytes
    /// that cannot begin it (false: HTTP/1.1 parses them, as any first read).
    async fn read_preface(&mut self) -> Result<bool, ReadEnd> {
        loop {
            match preface(&self.conn.rbuf) {
                Preface::Complete => return Ok(true),
                Preface::Absent => return Ok(false),
                Preface::Partial => self.conn.read_more(DEADLINES).await?,
            }
        }
    }

    fn request(&self, head: &Head, body_len: usize) -> Request<'_> {
        let text = |range: std::ops::Range<usize>| {
            std::str::from_utf8(&self.conn.rbuf[range]).unwrap_or("")
        };
        Request {
            method: head.method.clone(),
            // An absolute-form target without a path (`http://host`) means `/`.
            path: match text(head.path.clone()) {
                "" => "/",
                path => path,
            },
            query: head.query.clone().map(text),
            content_type: head.content_type.clone().map(|r| &self.conn.rbuf[r]),
            body: match head.framing {
                Framing::Chunked => &self.chunked_body,
                _ => &self.conn.rbuf[head.len..head.len + body_len],
            },
        }
    }

    /// Makes the whole body available; returns the bytes it occupies after
    /// the head. The error is a rejection to answer, or why reading stopped.
    async fn read_body(&mut self, head: &Head) -> Result<usize, Result<Rejection, ReadEnd>> {
        let wanted = match head.framing {
            Framing::Empty => return Ok(0),
            Framing::Length(len) if len > LIMITS.max_body => {
                return Err(Ok(body_too_large(&LIMITS)))
            }
            Framing::Length(len) => Some(len),
            Framing::Chunked => None,
        };
        let mut continued = !head.expect_continue;
        loop {
            let available = &self.conn.rbuf[head.len..];
            match wanted {
                Some(len) if available.len() >= len => return Ok(len),
                Some(_) => {}
                None => {
                    let body = &mut self.chunked_body;
                    let raw = &available[self.chunked_raw..];
                    match self
                        .chunked
                        .decode(raw, &LIMITS, |data| body.extend_from_slice(data))
                    {
                        Ok(decoded) => {
                            self.chunked_raw += decoded.consumed;
                            if decoded.done {
                                return Ok(self.chunked_raw);
                            }
                        }
                        Err(rejection) => return Err(Ok(rejection)),
                    }
                }
            }
            if !continued {
                self.conn
                    .wbuf
                    .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                continued = true;
            }
            self.conn.read_more(DEADLINES).await.map_err(Err)?;
        }
    }

    async fn end(&mut self, end: ReadEnd) {
        match end {
            // Quiet: never asked for here.
            ReadEnd::Closed | ReadEnd::Quiet => {}
            ReadEnd::Shutdown => self.conn.close(false).await,
            ReadEnd::TimedOut if self.conn.rbuf.is_empty() => self.conn.close(false).await,
            ReadEnd::TimedOut => self.reject(request_timeout(), false).await,
        }
    }

    /// Answers a request that cannot be served, then closes.
    async fn reject(&mut self, rejection: Rejection, head_only: bool) {
        tracing::debug!(status = %rejection.status, detail = %rejection.detail, "rejected request");
        let response = rejection.into_response();
        if self
            .write_response(&response, head_only, Persistence::Close)
            .await
        {
            self.conn.close(true).await;
        }
    }

    /// A connection that once carried a large request must not keep its
    /// buffers for the rest of its life.
    fn release_large_buffers(&mut self) {
        self.conn.release_large_buffers();
        self.chunked.reset();
        self.chunked_raw = 0;
        self.chunked_body.clear();
        if self.chunked_body.capacity() > SHRINK_ABOVE {
            self.chunked_body = Vec::new();
        }
    }

    /// Encodes a response after those already pending; flushes when enough is pending.
    async fn write_response(
        &mut self,
        response: &Response,
        head_only: bool,
        persistence: Persistence,
    ) -> bool {
        let fields = std::iter::once((
            header::CONTENT_TYPE.as_str().as_bytes(),
            response.content_type.as_bytes(),
        ))
        .chain(
            response
                .headers
                .iter()
                .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes())),
        );
        with_date(|date| {
            http1::encode_head(
                &mut self.conn.wbuf,
                response.status,
                fields,
                response.body.len(),
                date,
                persistence,
            );
        });
        if !head_only && http1::may_have_body(response.status) {
            if response.body.len() <= INLINE_BODY_MAX {
                self.conn.wbuf.extend_from_slice(&response.body);
            } else if !self.conn.flush().await
                || !write_bounded(&mut self.conn.stream, &response.body, WRITE_TIMEOUT).await
            {
                return false;
            }
        }
        if self.conn.wbuf.len() < FLUSH_AT {
            return true;
        }
        let written = self.conn.flush().await;
        self.conn.release_large_buffers();
        written
    }
}

/// The answer to a request that did not arrive within [`REQUEST_TIMEOUT`].
pub(crate) fn request_timeout() -> Rejection {
    Rejection::new(
        StatusCode::REQUEST_TIMEOUT,
        format!("request not received within {REQUEST_TIMEOUT:?}"),
    )
}
