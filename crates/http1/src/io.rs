//! Socket helpers both servers need: listening with `SO_REUSEPORT`,
//! bounded writes, the cached `Date` value, and handing a connection
//! whose first bytes are the HTTP/2 preface on to HTTP/2 (`Prefaced`).

use std::{
    cell::RefCell,
    future::poll_fn,
    io::{self, IoSlice},
    net::{SocketAddr, TcpListener},
    pin::Pin,
    task::{Context, Poll},
    time::{Duration, SystemTime},
};

use bytes::Bytes;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Backlog for each listener; the kernel caps it at `net.core.somaxconn`.
const LISTEN_BACKLOG: i32 = 8192;

/// A non-blocking listener that other workers may bind too (`SO_REUSEPORT`),
/// so the kernel spreads connections across them.
pub fn bind_shared(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// Writes (and flushes) all of `bytes`, giving up on a peer that takes
/// nothing for `timeout`. Usually one non-blocking attempt suffices and
/// no timer is armed. Any stream: TCP, TLS or in-memory.
pub async fn write_bounded<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
    timeout: Duration,
) -> bool {
    // Not through `write_within`: its layer would cost every write.
    let mut written = 0;
    let attempt = poll_fn(|cx| Poll::Ready(try_write_all(stream, bytes, &mut written, cx))).await;
    if let Some(done) = attempt {
        return done;
    }
    Box::pin(write_rest(stream, &bytes[written..], timeout)).await == WriteEnd::Written
}

/// How a bounded write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteEnd {
    Written,
    /// The stream failed or was closed.
    Failed,
    /// The peer took no byte for the whole timeout (it stopped reading).
    Stalled,
}

/// The rest of a write, each step bounded by `timeout`: a slow reader
/// that keeps taking bytes is served, one that takes none is not.
pub(crate) async fn write_rest<S: AsyncWrite + Unpin>(
    stream: &mut S,
    mut rest: &[u8],
    timeout: Duration,
) -> WriteEnd {
    while !rest.is_empty() {
        match tokio::time::timeout(timeout, stream.write(rest)).await {
            Err(_) => return WriteEnd::Stalled,
            Ok(Ok(0) | Err(_)) => return WriteEnd::Failed,
            Ok(Ok(n)) => rest = &rest[n..],
        }
    }
    match tokio::time::timeout(timeout, stream.flush()).await {
        Err(_) => WriteEnd::Stalled,
        Ok(Err(_)) => WriteEnd::Failed,
        Ok(Ok(())) => WriteEnd::Written,
    }
}

/// One pass of writes and a flush: `Some(ok)` when finished either way,
/// `None` when the stream would block (with `written` bytes taken).
pub(crate) fn try_write_all<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
    written: &mut usize,
    cx: &mut Context<'_>,
) -> Option<bool> {
    while *written < bytes.len() {
        match Pin::new(&mut *stream).poll_write(cx, &bytes[*written..]) {
            Poll::Ready(Ok(0) | Err(_)) => return Some(false),
            Poll::Ready(Ok(n)) => *written += n,
            Poll::Pending => return None,
        }
    }
    match Pin::new(&mut *stream).poll_flush(cx) {
        Poll::Ready(result) => Some(result.is_ok()),
        Poll::Pending => None,
    }
}

/// After an error answer, unread input is drained this long so that the
/// close is a FIN, not a reset that could destroy the answer in flight.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_MAX_BYTES: usize = 1024 * 1024;

/// Reads and discards what the peer still sends, for up to a second or
/// 1 MiB, after the write side was shut down.
pub async fn linger<S: AsyncRead + Unpin>(stream: &mut S) {
    let deadline = tokio::time::Instant::now() + LINGER;
    let mut drained = 0;
    // On the heap: inline, it would make every connection's future 4 KiB larger.
    let mut scratch = vec![0u8; 4096];
    while drained < LINGER_MAX_BYTES {
        match tokio::time::timeout_at(deadline, stream.read(&mut scratch)).await {
            Ok(Ok(n)) if n > 0 => drained += n,
            _ => return,
        }
    }
}

/// What a client sends first on an HTTP/2 connection (RFC 9113 3.4):
/// servers that take HTTP/1.1 and h2c on one port look for it.
pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the first bytes of a connection say about [`H2_PREFACE`]: the one
/// decision of every server that takes HTTP/1.1 and h2c on one port (the
/// proxy's listeners and idle connections, the backends), each reading
/// more while it is `Partial`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preface {
    /// The whole preface: HTTP/2.
    Complete,
    /// A beginning of it (nothing read yet included): read more.
    Partial,
    /// Bytes that cannot begin it: HTTP/1.1 parses them.
    Absent,
}

/// Where `received` stands against [`H2_PREFACE`].
pub fn preface(received: &[u8]) -> Preface {
    let len = received.len().min(H2_PREFACE.len());
    if received[..len] != H2_PREFACE[..len] {
        Preface::Absent
    } else if len == H2_PREFACE.len() {
        Preface::Complete
    } else {
        Preface::Partial
    }
}

/// A stream whose first bytes were already read (by an HTTP/1.1
/// connection, looking for [`H2_PREFACE`]); reads return those bytes first.
#[derive(Debug)]
pub struct Prefaced<S> {
    read: Bytes,
    stream: S,
}

impl<S> Prefaced<S> {
    pub fn new(read: Bytes, stream: S) -> Self {
        Self { read, stream }
    }

    /// Whether bytes read before remain to be returned.
    pub fn has_read(&self) -> bool {
        !self.read.is_empty()
    }

    pub fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefaced<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.read.is_empty() {
            return Pin::new(&mut this.stream).poll_read(cx, buf);
        }
        let len = this.read.len().min(buf.remaining());
        buf.put_slice(&this.read.split_to(len));
        if this.read.is_empty() {
            // An empty slice would still hold the whole first read's buffer
            // for the connection's life.
            this.read = Bytes::new();
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefaced<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

thread_local! {
    /// The `Date` value, formatted once per second per thread.
    static DATE: RefCell<(u64, Vec<u8>)> = const { RefCell::new((u64::MAX, Vec::new())) };
}

/// Calls `f` with the current `Date` field value.
pub fn with_date(f: impl FnOnce(&[u8])) {
    let now = SystemTime::now();
    let second = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with_borrow_mut(|(cached, text)| {
        if *cached != second {
            *cached = second;
            *text = httpdate::fmt_http_date(now).into_bytes();
        }
        f(text);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preface_is_complete_partial_or_absent() {
        assert_eq!(preface(b""), Preface::Partial);
        assert_eq!(preface(b"PRI * HTTP/2.0\r\n"), Preface::Partial);
        assert_eq!(preface(H2_PREFACE), Preface::Complete);
        // Frames may follow the preface in the same read.
        assert_eq!(
            preface(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04"),
            Preface::Complete
        );
        assert_eq!(preface(b"GET / HTTP/1.1\r\n"), Preface::Absent);
        assert_eq!(preface(b"PRI * HTTP/1.1"), Preface::Absent);
        assert_eq!(preface(b"P"), Preface::Partial);
        assert_eq!(preface(b"X"), Preface::Absent);
    }

    #[tokio::test]
    async fn prefaced_reads_the_read_bytes_first() {
        use tokio::io::AsyncReadExt;
        let mut stream = Prefaced::new(Bytes::from_static(b"abc"), &b"def"[..]);
        let mut small = [0u8; 2];
        stream.read_exact(&mut small).await.unwrap();
        assert_eq!(&small, b"ab");
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"cdef");
    }
}
