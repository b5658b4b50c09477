//! The waits of an HTTP/1.1 client's request, each watching the client
//! too: more of the request body, the upstream's bytes (while earlier
//! pipelined answers leave when the batch window closes), a connection or
//! a host slot, a future of an HTTP/2 upstream. A client that closes its
//! connection while its answer is awaited cancels the exchange.

use std::{
    future::{poll_fn, Future},
    pin::pin,
    task::Poll,
    time::Duration,
};

use http::StatusCode;
use http1::conn::ServerConnection;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite},
    time::timeout,
};

use crate::session::attempts::to_upstream::ClientSide;
use crate::session::{Failure, Session, BATCH_WINDOW, CLIENT_CLOSED, READ_RESERVE};
use crate::telemetry::Event;
use crate::upstream::pool::UpstreamConn;
use crate::wire::{
    fields::Fields,
    interim::{self, Interim, TooMany},
};

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Reads more of a request body from the client.
    /// 408 when the client stalls past `idle_timeout`, 400 when it goes away.
    pub(in crate::session) async fn read_body_part(&mut self) -> Result<(), Failure> {
        let closed = || Failure {
            body_unread: true,
            ..Failure::new(StatusCode::BAD_REQUEST, "client closed mid-body")
        };
        if !self.conn.flush().await {
            return Err(closed());
        }
        let idle = self.plan.idle_timeout;
        let conn = &mut self.conn;
        conn.rbuf.reserve(READ_RESERVE);
        match timeout(idle, conn.stream.read_buf(&mut conn.rbuf)).await {
            Ok(Ok(0) | Err(_)) => Err(closed()),
            Ok(Ok(_)) => Ok(()),
            Err(_) => Err(Failure {
                body_unread: true,
                ..Failure::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "request body not received in time",
                )
            }),
        }
    }

    /// Limits for the current request's body.
    pub(in crate::session) fn body_limits(&self) -> http1::Limits {
        http1::Limits {
            max_head: self.plan.limits.max_head,
            max_body: self.max_body,
        }
    }

    /// Runs `work` (a wait before the upstream exchange: a host slot, a
    /// connection) unless the client closes its connection first: then
    /// 499, and nothing goes upstream.
    pub(in crate::session) async fn unless_client_gone<F: Future>(
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
    pub(in crate::session) async fn read_upstream(
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

    /// Awaits `future` for at most `timeout`; answers already waiting for
    /// the client are written first if it is not ready at once. With
    /// `watch_client` (while the answer's head is awaited), a client that
    /// closes its connection ends the wait, as in `read_upstream`.
    pub(in crate::session) async fn wait<F: std::future::Future + Unpin>(
        &mut self,
        mut future: F,
        timeout: Duration,
        watch_client: bool,
    ) -> Waited<F::Output> {
        let polled = poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut future).poll(cx))).await;
        if let Poll::Ready(output) = polled {
            return Waited::Done(output);
        }
        if !self.conn.flush().await {
            return Waited::ClientGone;
        }
        let max_buffered = self.plan.limits.max_head;
        let client = &mut self.conn;
        let watched = poll_fn(|cx| {
            if watch_client && poll_client_gone(client, max_buffered, cx).is_ready() {
                return Poll::Ready(None);
            }
            std::pin::Pin::new(&mut future).poll(cx).map(Some)
        });
        match tokio::time::timeout(timeout, watched).await {
            Ok(Some(output)) => Waited::Done(output),
            Ok(None) => Waited::ClientGone,
            Err(_) => Waited::TimedOut,
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> ClientSide for Session<S> {
    /// The clock the connection read when the head came (no read more).
    fn now(&self) -> std::time::Instant {
        self.conn.last_active().into_std()
    }

    fn unless_gone<F: Future + Send>(
        &mut self,
        work: F,
    ) -> impl Future<Output = Result<F::Output, Failure>> + Send {
        self.unless_client_gone(work)
    }

    /// Its status line and fields, after the answers already waiting;
    /// an HTTP/1.0 client gets none.
    fn interim(&mut self, status: StatusCode, fields: Fields<'_>) -> Result<(), TooMany> {
        match self.interim.classify(status) {
            Ok(Interim::Forward) => interim::interim_head(&mut self.conn.wbuf, status, fields),
            Ok(_) => {}
            Err(TooMany) => {
                self.worker.metrics().event(Event::InterimFlood);
                return Err(TooMany);
            }
        }
        Ok(())
    }
}

/// How waiting for upstream bytes ended.
pub(in crate::session) enum UpstreamRead {
    Done(std::io::Result<usize>),
    TimedOut,
    /// Flushing waiting answers found the client gone.
    ClientGone,
    /// The client closed its connection while the upstream was awaited.
    ClientClosed,
}

/// How a wait for the upstream ended.
pub(in crate::session) enum Waited<T> {
    Done(T),
    TimedOut,
    /// The client closed its connection (or a flush to it failed).
    ClientGone,
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
pub(in crate::session) fn poll_client_gone<S: AsyncRead + Unpin>(
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
