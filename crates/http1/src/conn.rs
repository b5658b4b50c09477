//! The server side of one HTTP/1 connection, shared by the proxy's client
//! sessions and the backends: read and write buffering, waiting for the
//! next request with no buffer held, reading a head within its deadlines,
//! batched writes, and a polite close.
//!
//! An idle keep-alive connection holds no buffer: it waits for the socket
//! to become readable ([`ReadReady`]), and only then takes a read buffer
//! (and a write buffer) from the thread's spares. When the request has
//! been answered and nothing is left to read, both go back. A worker's
//! spares are as many as its connections busy at once, not its
//! connections, so 10,000 idle clients cost their sockets and a few
//! hundred bytes each, not 32 KiB.

use std::{
    cell::RefCell,
    future::{poll_fn, Future},
    io,
    pin::{pin, Pin},
    task::{ready, Context, Poll},
    time::Duration,
};

use bytes::BytesMut;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
    sync::watch,
    time::{sleep_until, Instant, Sleep},
};

use crate::io::{try_write_all, write_rest, Prefaced, WriteEnd};

/// What a read asks the buffer to have room for.
pub const READ_RESERVE: usize = 16 * 1024;
/// Buffers grown past this by one large message are replaced afterwards.
pub const SHRINK_ABOVE: usize = 64 * 1024;
/// A peer that takes nothing of a pending write for this long is dropped.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Spare buffers a thread keeps of each kind (16 KiB each): enough for the
/// connections of a worker that are busy at the same moment; more come
/// from the allocator.
const MAX_SPARE: usize = 64;
/// A part of a message at most this long waits for the rest in a buffer
/// of its own size (a slow client holds its bytes, not a spare's 32 KiB).
const COMPACT_MAX: usize = 4096;

/// A stream that can say when a read would find something, without a
/// buffer to read into: what an idle connection waits on.
pub trait ReadReady {
    /// Ready when a read may make progress (data, end of stream or an
    /// error); may be ready spuriously, never pending when it would not.
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
}

impl ReadReady for TcpStream {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        TcpStream::poll_read_ready(self, cx)
    }
}

impl<S: ReadReady> ReadReady for Prefaced<S> {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.has_read() {
            return Poll::Ready(Ok(()));
        }
        self.stream_mut().poll_read_ready(cx)
    }
}

impl<S: ReadReady> ReadReady for tokio_rustls::server::TlsStream<S> {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let (stream, tls) = self.get_mut();
        // Decrypted bytes or a close_notify waiting: a read finds them.
        if !tls.wants_read() {
            return Poll::Ready(Ok(()));
        }
        stream.poll_read_ready(cx)
    }
}

/// How long a connection may wait: for the first byte of a request
/// (`idle`, from the last read or answer: [`ServerConnection::answered`]),
/// and for the rest of it (`request`, from its first byte).
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    pub idle: Duration,
    pub request: Duration,
}

/// Why reading stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadEnd {
    /// The peer closed, or the connection failed.
    Closed,
    /// The idle or request deadline passed.
    TimedOut,
    /// Shutdown was signalled while the connection was idle.
    Shutdown,
    /// An idle connection read nothing before the `quiet` instant of
    /// [`ServerConnection::read_until`]; it stays open.
    Quiet,
}

thread_local! {
    /// Read and write buffers of this thread's idle connections.
    static SPARE: RefCell<Vec<(BytesMut, Vec<u8>)>> = const { RefCell::new(Vec::new()) };
    /// Read buffers of this thread's idle client connections (the proxy's
    /// pooled upstream connections).
    static SPARE_READ: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// Makes `buf`'s storage a spare of this thread if it is empty and of the
/// usual size (else it is freed), leaving `buf` without one: for a
/// connection that goes idle.
pub fn spare_read_buffer(buf: &mut BytesMut) {
    if !buf.is_empty() || buf.capacity() == 0 {
        return;
    }
    // Consumed bytes still count against the capacity until this
    // reclaims them (without allocating, when nothing else shares them).
    buf.reserve(READ_RESERVE);
    if buf.capacity() > SHRINK_ABOVE {
        *buf = BytesMut::new();
        return;
    }
    let spare = std::mem::take(buf);
    let _ = SPARE_READ.try_with(|spares| {
        let mut spares = spares.borrow_mut();
        if spares.len() < MAX_SPARE {
            spares.push(spare);
        }
    });
}

/// A spare read buffer of this thread, or a new empty one.
pub fn read_buffer() -> BytesMut {
    SPARE_READ
        .try_with(|spares| spares.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// `time` in whole milliseconds, at most `u32::MAX` (49 days).
fn millis(time: Duration) -> u32 {
    u32::try_from(time.as_millis()).unwrap_or(u32::MAX)
}

/// One HTTP/1 server connection: the stream, its buffers, its timer.
pub struct ServerConnection<S> {
    pub stream: S,
    /// Bytes read and not yet used; no allocation while idle.
    pub rbuf: BytesMut,
    /// Answers not yet written; no allocation while idle.
    pub wbuf: Vec<u8>,
    shutdown: watch::Receiver<bool>,
    /// Fires no later than the current read deadline; moved lazily,
    /// because re-arming a timer per read costs more than the read.
    timer: Pin<Box<Sleep>>,
    /// When the connection last did something: a read that returned
    /// bytes, or the answer to its request (see [`Self::answered`]).
    last_active: Instant,
    /// When the first byte of the request being read arrived.
    request_started: Option<Instant>,
    /// Since when answers have waited in `wbuf` for a later one of their
    /// batch (pipelined answers leave together); reset by each flush.
    waiting_since: Option<Instant>,
    /// A peer that takes nothing of a pending write for this many
    /// milliseconds is dropped (milliseconds: an idle connection's future
    /// holds this struct, and is kept small).
    send_timeout_ms: u32,
    /// A write was given up because the peer stopped reading.
    stalled: bool,
}

impl<S: std::fmt::Debug> std::fmt::Debug for ServerConnection<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConnection")
            .field("stream", &self.stream)
            .field("buffered", &self.rbuf.len())
            .field("pending", &self.wbuf.len())
            .finish_non_exhaustive()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> ServerConnection<S> {
    /// A connection on `stream`, whose first bytes (read while telling
    /// HTTP/1.1 from HTTP/2) are `received`, idle for at most `idle`.
    pub fn new(
        stream: S,
        received: BytesMut,
        shutdown: watch::Receiver<bool>,
        idle: Duration,
    ) -> Self {
        let now = Instant::now();
        Self {
            stream,
            rbuf: received,
            wbuf: Vec::new(),
            shutdown,
            timer: Box::pin(sleep_until(now + idle)),
            last_active: now,
            request_started: None,
            waiting_since: None,
            send_timeout_ms: millis(WRITE_TIMEOUT),
            stalled: false,
        }
    }

    /// How long a write may wait for a peer that takes nothing (default
    /// [`WRITE_TIMEOUT`]).
    pub fn set_send_timeout(&mut self, timeout: Duration) {
        self.send_timeout_ms = millis(timeout);
    }

    /// Whether a flush failed because the peer stopped reading.
    pub fn stalled(&self) -> bool {
        self.stalled
    }

    /// The stream, what was read and not used, and the shutdown signal:
    /// for a connection that turns out to be HTTP/2.
    pub fn into_parts(self) -> (S, BytesMut, watch::Receiver<bool>) {
        (self.stream, self.rbuf, self.shutdown)
    }

    /// Whether shutdown has been signalled.
    pub fn shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// The request being read has been read: the next one's time starts
    /// with its first byte.
    pub fn request_read(&mut self) {
        self.request_started = None;
    }

    /// When the connection last did something: its idle time (the
    /// keep-alive deadline, and a server's quiet time) counts from here.
    pub fn last_active(&self) -> Instant {
        self.last_active
    }

    /// The request read last has its answer (sent, or in `wbuf` to go
    /// out with the next flush): the connection is idle from now. Its idle
    /// time must not count from the request's last byte, or an exchange
    /// longer than the idle timeout would find the connection past its
    /// deadline the moment it is answered (nginx's `keepalive_timeout`
    /// also starts after the response).
    pub fn answered(&mut self) {
        self.last_active = Instant::now();
    }

    /// The connection's one timer, for other waits of a request: arm it
    /// with [`Self::arm_timer`]; it may fire early.
    pub fn timer(&mut self) -> Pin<&mut Sleep> {
        self.timer.as_mut()
    }

    /// Makes the timer fire no later than `deadline`. A later deadline
    /// leaves it where it is (re-arming per request costs more than the
    /// request's reads); whoever it wakes early checks the time.
    pub fn arm_timer(&mut self, deadline: Instant) {
        if deadline < self.timer.deadline() || self.timer.is_elapsed() {
            self.timer.as_mut().reset(deadline);
        }
    }

    /// When the answers in `wbuf` must leave, at the latest, for the
    /// batch they wait in to end `window` after the first wait for a later
    /// answer began; `None` with nothing to write.
    pub fn batch_ends(&mut self, window: Duration) -> Option<Instant> {
        if self.wbuf.is_empty() {
            return None;
        }
        Some(*self.waiting_since.get_or_insert_with(Instant::now) + window)
    }

    /// Writes what `wbuf` holds; false if the peer is gone or stalled.
    pub async fn flush(&mut self) -> bool {
        self.waiting_since = None;
        if self.wbuf.is_empty() {
            return true;
        }
        // `write_bounded`'s two steps, inline here: one non-blocking
        // attempt (usually all), the rest boxed (a stalled peer).
        let (stream, wbuf) = (&mut self.stream, &self.wbuf);
        let mut written = 0;
        let attempt =
            poll_fn(|cx| Poll::Ready(try_write_all(stream, wbuf, &mut written, cx))).await;
        let end = match attempt {
            Some(true) => WriteEnd::Written,
            Some(false) => WriteEnd::Failed,
            None => {
                let send_timeout = Duration::from_millis(u64::from(self.send_timeout_ms));
                Box::pin(write_rest(stream, &wbuf[written..], send_timeout)).await
            }
        };
        self.wbuf.clear();
        self.stalled = end == WriteEnd::Stalled;
        end == WriteEnd::Written
    }

    /// A connection that once carried a large message must not keep its
    /// buffers: they are replaced (and so never become spares).
    pub fn release_large_buffers(&mut self) {
        if self.rbuf.is_empty() && self.rbuf.capacity() > SHRINK_ABOVE {
            self.rbuf = BytesMut::new();
        }
        if self.wbuf.is_empty() && self.wbuf.capacity() > SHRINK_ABOVE {
            self.wbuf = Vec::new();
        }
    }

    /// Flushes and half-closes. With `linger`, drains unread input for a
    /// moment, so that the peer reads the last answer instead of a reset.
    pub async fn close(&mut self, linger: bool) {
        if !self.flush().await || self.stream.shutdown().await.is_err() || !linger {
            return;
        }
        crate::io::linger(&mut self.stream).await;
    }
}

impl<S: AsyncRead + AsyncWrite + ReadReady + Unpin> ServerConnection<S> {
    /// Flushes pending answers, then reads at least one byte. An idle
    /// connection (nothing buffered) waits for readability with its
    /// buffers given back, and ends at once on shutdown.
    /// (Not an `async fn`: it is [`Self::read_until`]'s future itself,
    /// not one that holds it.)
    pub fn read_more(
        &mut self,
        deadlines: Deadlines,
    ) -> impl Future<Output = Result<(), ReadEnd>> + '_ {
        self.read_until(deadlines, None)
    }

    /// [`Self::read_more`]; with `quiet`, an idle connection that has read
    /// nothing by then ends the wait with [`ReadEnd::Quiet`] (its server
    /// may then put its request state away).
    pub async fn read_until(
        &mut self,
        deadlines: Deadlines,
        quiet: Option<Instant>,
    ) -> Result<(), ReadEnd> {
        if !self.flush().await {
            return Err(ReadEnd::Closed);
        }
        let idle = self.rbuf.is_empty();
        if !idle && self.request_started.is_none() {
            // Part of a pipelined head: its time starts now, not when it arrived.
            self.request_started = Some(Instant::now());
        }
        if idle && self.shutting_down() {
            return Err(ReadEnd::Shutdown);
        }
        let quiet = quiet.filter(|_| idle);
        let deadline = match self.request_started {
            Some(started) => started + deadlines.request,
            None => self.last_active + deadlines.idle,
        };
        let wake = quiet.map_or(deadline, |quiet| quiet.min(deadline));
        self.arm_timer(wake);
        loop {
            let read =
                poll_fn(|cx| poll_read(&mut self.stream, &mut self.rbuf, &mut self.wbuf, cx));
            tokio::select! {
                biased;
                read = read => return match read {
                    Ok(0) | Err(_) => Err(ReadEnd::Closed),
                    Ok(_) => {
                        self.last_active = Instant::now();
                        if self.request_started.is_none() {
                            self.request_started = Some(self.last_active);
                        }
                        Ok(())
                    }
                },
                // Built per wait (a few words), not kept: kept, it would
                // cost every idle connection an allocation.
                _ = self.shutdown.changed(), if idle => return Err(ReadEnd::Shutdown),
                () = self.timer.as_mut() => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(ReadEnd::TimedOut);
                    }
                    if quiet.is_some_and(|quiet| now >= quiet) {
                        return Err(ReadEnd::Quiet);
                    }
                    self.timer.as_mut().reset(wake.max(now).min(deadline));
                }
            }
        }
    }
}

/// Reads into `rbuf`. With nothing buffered either way, the buffers are
/// spares while the stream is not readable.
fn poll_read<S: AsyncRead + ReadReady + Unpin>(
    stream: &mut S,
    rbuf: &mut BytesMut,
    wbuf: &mut Vec<u8>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    let idle = rbuf.is_empty() && wbuf.is_empty();
    if idle {
        give_back(rbuf, wbuf);
        ready!(stream.poll_read_ready(cx))?;
        take_spares(rbuf, wbuf);
    }
    rbuf.reserve(READ_RESERVE);
    let read = pin!(stream.read_buf(rbuf)).poll(cx);
    if read.is_pending() {
        if idle {
            // Readable was stale: the wait goes on, without the buffers.
            give_back(rbuf, wbuf);
        } else if rbuf.len() <= COMPACT_MAX && rbuf.capacity() >= READ_RESERVE && wbuf.is_empty() {
            // A head arriving slowly keeps only its bytes while it waits.
            let small = BytesMut::from(&rbuf[..]);
            let mut spare = std::mem::replace(rbuf, small);
            spare.clear();
            give_back(&mut spare, wbuf);
        }
    }
    read
}

/// Makes the empty `rbuf` and `wbuf` spares of this thread (up to
/// [`MAX_SPARE`] pairs; past it they are freed).
fn give_back(rbuf: &mut BytesMut, wbuf: &mut Vec<u8>) {
    if !rbuf.is_empty() || !wbuf.is_empty() || rbuf.capacity() == 0 {
        return;
    }
    let pair = (std::mem::take(rbuf), std::mem::take(wbuf));
    // A thread-local that is gone (the thread is ending) frees the pair.
    let _ = SPARE.try_with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < MAX_SPARE {
            spare.push(pair);
        }
    });
}

/// Gives an empty `rbuf` and `wbuf` the storage of a spare pair, if the
/// thread has one (else they allocate when first used).
fn take_spares(rbuf: &mut BytesMut, wbuf: &mut Vec<u8>) {
    if rbuf.capacity() > 0 {
        return;
    }
    if let Ok(Some((read, write))) = SPARE.try_with(|spare| spare.borrow_mut().pop()) {
        *rbuf = read;
        *wbuf = write;
    }
}

#[cfg(test)]
mod tests;
