//! HTTP/2 sessions on the `h2` crate: up to `streams` requests in flight
//! on one connection, each timed on its own.
//!
//! One task drives everything of a connection: the `h2` connection (reads,
//! writes, flow control), the streams in flight, the timers. Nothing is
//! spawned per request and there is no second task per connection to wake.
//! A pass polls the connection (which reads all that has arrived), then
//! the streams that were woken, then opens new streams for the ones that
//! ended; the connection writes those on the next pass, after the other
//! connections of the thread have had theirs and the I/O driver has been
//! polled, so that each write carries what the loop has gathered by then
//! (as in h2load's event loop); in the open model at once, each request
//! leaving when it is due. Request heads are cloned from a template
//! built before the run.

use std::{
    cell::Cell,
    future::{poll_fn, Future},
    io,
    pin::Pin,
    rc::Rc,
    task::{ready, Context, Poll},
};

use bytes::Bytes;
use h2::{
    client::{Connection, ResponseFuture, SendRequest},
    Reason, RecvStream, SendStream,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::Instant,
};

use super::{
    slots::{self, Slots},
    Client, Next, SessionEnd,
};
use crate::stats::ErrorKind;

/// Receive window of each stream: responses up to 1 MiB never wait for a
/// WINDOW_UPDATE.
const STREAM_WINDOW: u32 = 1 << 20;
/// Receive window of the connection, shared by its streams.
const CONNECTION_WINDOW: u32 = 16 << 20;

/// One request of the rotation: its head, cloned for each stream, and its body.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub head: http::Request<()>,
    pub body: Bytes,
}

/// A request in flight on its stream.
struct Exchange {
    request: Next,
    sent: Instant,
    response: Response,
    /// The part of the request body not yet handed to `h2`.
    upload: Option<Upload>,
}

enum Response {
    Head(ResponseFuture),
    Body { status: u16, body: RecvStream },
}

struct Upload {
    stream: SendStream<Bytes>,
    rest: Bytes,
}

/// How a pass over a session ended.
enum Pass {
    End(SessionEnd),
    /// It opened streams, to be written on the next pass.
    Opened,
}

/// One HTTP/2 connection.
struct Session<S> {
    send: SendRequest<Bytes>,
    conn: Connection<Counted<S>, Bytes>,
    exchanges: Slots<Exchange>,
    /// Bytes read from the connection and not yet counted.
    received: Rc<Cell<usize>>,
    /// The connection refuses new streams (GOAWAY): reconnect once the
    /// open ones have ended.
    draining: bool,
    /// The server's limit on concurrent streams held a request back.
    throttled: bool,
}

impl Client {
    /// An HTTP/2 session; returns how it ended and how many requests it lost.
    pub(super) async fn http2<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        io: S,
        requests: &[Template],
    ) -> (SessionEnd, u64) {
        let received = Rc::new(Cell::new(0));
        let io = Counted {
            io,
            received: Rc::clone(&received),
        };
        // Writes the preface and SETTINGS; does not wait for the server's.
        let handshake = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .enable_push(false)
            .handshake::<_, Bytes>(io);
        let (send, conn) = tokio::select! {
            handshake = handshake => match handshake {
                Ok(pair) => pair,
                Err(_) => return (SessionEnd::Failed(ErrorKind::Write), 0),
            },
            () = self.stop_signal.as_mut() => return (SessionEnd::Stop, 0),
        };
        let mut session = Session {
            send,
            conn,
            exchanges: Slots::new(self.shared.streams),
            received,
            draining: false,
            throttled: false,
        };
        self.free_since = Instant::now();
        let end = loop {
            match poll_fn(|cx| self.poll_session(cx, &mut session, requests)).await {
                Pass::End(end) => break end,
                // The open model writes a request the moment it is due.
                Pass::Opened if self.schedule.is_some() => {}
                // The closed model writes the new streams on the next pass,
                // once the thread's other connections have had theirs and
                // the I/O driver has been polled: more answers are in by
                // then, and their successors leave in the same write.
                Pass::Opened => tokio::task::yield_now().await,
            }
        };
        (end, session.exchanges.len() as u64)
    }

    fn poll_session<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        cx: &mut Context<'_>,
        session: &mut Session<S>,
        requests: &[Template],
    ) -> Poll<Pass> {
        session.exchanges.set_task(cx.waker());
        loop {
            // Checked on every pass: a server that never pauses must not
            // keep the stop from being seen.
            if self.stop_signal.as_mut().poll(cx).is_ready() || self.shared.stopping() {
                return Poll::Ready(Pass::End(SessionEnd::Stop));
            }
            let closed = match Pin::new(&mut session.conn).poll(cx) {
                Poll::Ready(Ok(())) => true,
                Poll::Ready(Err(err)) => {
                    return Poll::Ready(Pass::End(SessionEnd::Failed(error_kind(&err))))
                }
                Poll::Pending => false,
            };
            let now = Instant::now();
            let received = session.received.replace(0);
            if received > 0 {
                self.stats.borrow_mut().bytes(received, now);
            }
            if session.exchanges.is_full() {
                // Whatever ends now frees a slot that due requests wait for.
                self.free_since = now;
            }
            self.poll_exchanges(&mut session.exchanges, now);
            if closed {
                // Anything still in flight is lost (a read error).
                return Poll::Ready(Pass::End(SessionEnd::Reconnect));
            }
            while self.timer.as_mut().poll(cx).is_ready() {
                self.expire(&mut session.exchanges);
            }
            let (opened, due) = self.open_streams(cx, session, requests, now);
            if session.exchanges.is_empty() {
                if session.draining {
                    return Poll::Ready(Pass::End(SessionEnd::Reconnect));
                }
                if self.spent && self.retry.is_empty() {
                    return Poll::Ready(Pass::End(SessionEnd::Stop));
                }
            }
            if opened {
                return Poll::Ready(Pass::Opened);
            }
            if let Some(due) = due {
                if self.send_timer.deadline() != due {
                    self.send_timer.reset(due);
                }
                if Pin::new(&mut self.send_timer).poll(cx).is_ready() {
                    continue;
                }
            }
            return Poll::Pending;
        }
    }

    /// Opens streams while slots are free, requests are due and the
    /// connection takes them. Returns whether it opened any, and when the
    /// next request falls due if that is what it waits for (open model).
    fn open_streams<S>(
        &mut self,
        cx: &mut Context<'_>,
        session: &mut Session<S>,
        requests: &[Template],
        now: Instant,
    ) -> (bool, Option<Instant>) {
        let mut opened = false;
        while !session.draining && !session.exchanges.is_full() {
            match session.send.poll_ready(cx) {
                Poll::Ready(Ok(())) if session.throttled => {
                    session.throttled = false;
                    self.free_since = now;
                }
                Poll::Ready(Ok(())) => {}
                // Going away (or broken, which the connection reports).
                Poll::Ready(Err(_)) => session.draining = true,
                // The server's limit on concurrent streams.
                Poll::Pending => {
                    session.throttled = true;
                    return (opened, None);
                }
            }
            if session.draining {
                break;
            }
            let Some(next) = self.take_next(now) else {
                // The open model's next request, or a thinking user's.
                return (opened, self.next_due());
            };
            let template = &requests[next.index];
            let end_of_stream = template.body.is_empty();
            match session
                .send
                .send_request(template.head.clone(), end_of_stream)
            {
                Ok((response, mut stream)) => {
                    let upload = (!end_of_stream).then(|| {
                        // Sent as the server's flow-control windows allow.
                        stream.reserve_capacity(template.body.len());
                        Upload {
                            stream,
                            rest: template.body.clone(),
                        }
                    });
                    session.exchanges.insert(Exchange {
                        request: next,
                        sent: now,
                        response: Response::Head(response),
                        upload,
                    });
                    self.arm_timer(now + self.shared.timeout);
                    opened = true;
                }
                Err(_) => {
                    self.record_error(ErrorKind::Write);
                    self.lose(1);
                    self.rest(now);
                    session.draining = true;
                }
            }
        }
        (opened, None)
    }
}

impl slots::Exchange for Exchange {
    type Error = h2::Error;

    fn request(&self) -> Next {
        self.request
    }

    fn sent(&self) -> Instant {
        self.sent
    }

    fn refused(err: &h2::Error) -> bool {
        refused(err)
    }

    fn error_kind(err: &h2::Error) -> ErrorKind {
        error_kind(err)
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<u16, h2::Error>> {
        if let Some(upload) = &mut self.upload {
            // Done or refused: either way the response tells the outcome.
            if upload.poll(cx).is_ready() {
                self.upload = None;
            }
        }
        loop {
            match &mut self.response {
                Response::Head(future) => {
                    let response = ready!(Pin::new(future).poll(cx))?;
                    let status = response.status().as_u16();
                    let body = response.into_body();
                    if body.is_end_stream() {
                        return Poll::Ready(Ok(status));
                    }
                    self.response = Response::Body { status, body };
                }
                Response::Body { status, body } => match ready!(body.poll_data(cx)) {
                    Some(data) => {
                        let data = data?;
                        // Discarded as it arrives: the window reopens at once.
                        let _ = body.flow_control().release_capacity(data.len());
                        if body.is_end_stream() {
                            return Poll::Ready(Ok(*status));
                        }
                    }
                    // The data is over; trailers may follow.
                    None => {
                        ready!(body.poll_trailers(cx))?;
                        return Poll::Ready(Ok(*status));
                    }
                },
            }
        }
    }
}

impl Upload {
    /// Hands the body to `h2` as capacity is assigned; ready when all of
    /// it is handed over or the stream no longer takes data.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match ready!(self.stream.poll_capacity(cx)) {
                Some(Ok(capacity)) => {
                    let chunk = self.rest.split_to(capacity.min(self.rest.len()));
                    let last = self.rest.is_empty();
                    if self.stream.send_data(chunk, last).is_err() || last {
                        return Poll::Ready(());
                    }
                }
                Some(Err(_)) | None => return Poll::Ready(()),
            }
        }
    }
}

/// Whether the server says it did not process the stream, so that it may
/// be sent again (RFC 9113 section 8.7): a graceful GOAWAY below its id,
/// or REFUSED_STREAM.
fn refused(err: &h2::Error) -> bool {
    err.is_remote()
        && match err.reason() {
            Some(Reason::NO_ERROR) => err.is_go_away(),
            Some(Reason::REFUSED_STREAM) => err.is_reset(),
            _ => false,
        }
}

/// A protocol violation `h2` caught is a parse error; a broken connection,
/// a reset stream or a GOAWAY from the server a read error.
fn error_kind(err: &h2::Error) -> ErrorKind {
    if err.is_library() {
        ErrorKind::Parse
    } else {
        ErrorKind::Read
    }
}

/// The connection's stream, counting the bytes read (frames and all, as
/// HTTP/1.1 counts heads and bodies).
struct Counted<S> {
    io: S,
    received: Rc<Cell<usize>>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.io).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        self.received.set(self.received.get() + read);
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
