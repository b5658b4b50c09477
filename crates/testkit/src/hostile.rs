//! A scripted HTTP/1.1 upstream that says exactly the bytes a test gives
//! it: interim answers, floods, trailers, answers that never come. It
//! records every request as received (head, body and trailers, raw), the
//! bytes received (of requests whole or not) and how many of its
//! connections are open, so that a test can check what reached the
//! upstream and whether the proxy closed its connection.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{watch, Semaphore},
};

/// One step of an answer.
#[derive(Debug, Clone)]
pub enum Step {
    /// These bytes, as they are.
    Write(Vec<u8>),
    /// Nothing for this long.
    Wait(Duration),
    /// Nothing until the test adds a permit to this semaphore (which the
    /// step takes): the answer goes on when the test says.
    Hold(Arc<Semaphore>),
    /// Close the connection.
    Close,
}

/// The script: the steps that answer a request (given raw, head and body).
pub type Script = dyn Fn(&[u8]) -> Vec<Step> + Send + Sync;

/// A running scripted upstream on 127.0.0.1; stops when dropped.
pub struct HostileUpstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
    open: Arc<AtomicU64>,
    accepted: Arc<AtomicU64>,
    received: Arc<AtomicU64>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for HostileUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostileUpstream")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl HostileUpstream {
    /// Answers each request on each connection with `script`'s steps.
    pub fn start(script: impl Fn(&[u8]) -> Vec<Step> + Send + Sync + 'static) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the upstream");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("its address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let open = Arc::new(AtomicU64::new(0));
        let accepted = Arc::new(AtomicU64::new(0));
        let received = Arc::new(AtomicU64::new(0));
        let (stop, stop_rx) = watch::channel(false);
        let shared = Shared {
            script: Arc::new(script),
            seen: Arc::clone(&seen),
            open: Arc::clone(&open),
            received: Arc::clone(&received),
        };
        let counted = Arc::clone(&accepted);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("upstream runtime");
            runtime.block_on(accept_loop(listener, shared, counted, stop_rx));
        });
        Self {
            addr,
            seen,
            open,
            accepted,
            received,
            stop,
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far, raw (head, body, chunked trailers).
    pub fn requests(&self) -> Vec<Vec<u8>> {
        self.seen
            .lock()
            .map(|seen| seen.clone())
            .unwrap_or_default()
    }

    /// Connections open now (accepted and not yet closed by either side).
    pub fn open_connections(&self) -> u64 {
        self.open.load(Ordering::SeqCst)
    }

    /// Bytes received so far on all connections, of whole requests or not.
    pub fn bytes_received(&self) -> u64 {
        self.received.load(Ordering::SeqCst)
    }

    /// Connections accepted since the start.
    pub fn connections(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for HostileUpstream {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[derive(Clone)]
struct Shared {
    script: Arc<Script>,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
    open: Arc<AtomicU64>,
    received: Arc<AtomicU64>,
}

async fn accept_loop(
    listener: std::net::TcpListener,
    shared: Shared,
    accepted: Arc<AtomicU64>,
    mut stop: watch::Receiver<bool>,
) {
    let listener = TcpListener::from_std(listener).expect("register the listener");
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            conn = listener.accept() => {
                let Ok((stream, _)) = conn else { continue };
                accepted.fetch_add(1, Ordering::SeqCst);
                shared.open.fetch_add(1, Ordering::SeqCst);
                let shared = shared.clone();
                tokio::spawn(async move {
                    serve(stream, &shared).await;
                    shared.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        }
    }
}

/// Serves requests until either side closes. While an answer waits, the
/// connection is watched, so that a proxy closing it is seen at once.
async fn serve(mut stream: TcpStream, shared: &Shared) {
    let mut buf = Vec::new();
    loop {
        let Some(len) = read_request(&mut stream, &mut buf, &shared.received).await else {
            return;
        };
        let request: Vec<u8> = buf.drain(..len).collect();
        if let Ok(mut seen) = shared.seen.lock() {
            seen.push(request.clone());
        }
        for step in (shared.script)(&request) {
            match step {
                Step::Write(bytes) => {
                    if stream.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                Step::Wait(time) => {
                    let until = tokio::time::sleep(time);
                    if watching(&mut stream, &mut buf, &shared.received, until).await
                        == Heard::Closed
                    {
                        return;
                    }
                }
                Step::Hold(permits) => loop {
                    let until = async {
                        if let Ok(permit) = permits.acquire().await {
                            permit.forget();
                        }
                    };
                    match watching(&mut stream, &mut buf, &shared.received, until).await {
                        Heard::Closed => return,
                        Heard::Done => break,
                        Heard::Bytes => {}
                    }
                },
                Step::Close => return,
            }
        }
    }
}

/// What [`watching`] saw first.
#[derive(Debug, PartialEq, Eq)]
enum Heard {
    /// Its future ended.
    Done,
    /// Bytes from the proxy (kept).
    Bytes,
    /// The proxy closed the connection.
    Closed,
}

/// Waits for `until` while watching the connection, so that a proxy
/// closing it is seen at once; what it sends meanwhile is kept in `buf`.
async fn watching(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    received: &AtomicU64,
    until: impl std::future::Future<Output = ()>,
) -> Heard {
    let mut scratch = [0; 1024];
    tokio::select! {
        () = until => Heard::Done,
        read = stream.read(&mut scratch) => match read {
            Ok(0) | Err(_) => Heard::Closed,
            Ok(n) => {
                received.fetch_add(n as u64, Ordering::SeqCst);
                buf.extend_from_slice(&scratch[..n]);
                Heard::Bytes
            }
        },
    }
}

/// Reads until `buf` holds a whole request (head, then a body framed by
/// Content-Length or chunked, trailers included); its length. Counts
/// what it reads in `received`.
async fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    received: &AtomicU64,
) -> Option<usize> {
    loop {
        if let Some(len) = request_len(buf) {
            return Some(len);
        }
        let mut chunk = [0; 16 * 1024];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => {
                received.fetch_add(n as u64, Ordering::SeqCst);
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// The length of the request at the start of `buf`, if it is all there.
fn request_len(buf: &[u8]) -> Option<usize> {
    let head = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let text = String::from_utf8_lossy(&buf[..head]).to_ascii_lowercase();
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    if field("transfer-encoding").is_some_and(|te| te.contains("chunked")) {
        // Chunks up to the last one, then trailers up to a blank line.
        let mut at = head;
        loop {
            let line_end = buf[at..].windows(2).position(|w| w == b"\r\n")? + at;
            let size_text = String::from_utf8_lossy(&buf[at..line_end]).to_string();
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            at = line_end + 2;
            if size == 0 {
                let end = buf[at - 2..].windows(4).position(|w| w == b"\r\n\r\n")? + at + 2;
                return (end <= buf.len()).then_some(end);
            }
            at += size + 2;
            if at > buf.len() {
                return None;
            }
        }
    }
    let length: usize = field("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    (buf.len() >= head + length).then_some(head + length)
}

#[cfg(test)]
mod tests {
    use super::request_len;

    #[test]
    fn requests_are_framed_by_length_or_chunks_with_trailers() {
        assert_eq!(
            request_len(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET"),
            Some(27)
        );
        let post = b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcX";
        assert_eq!(request_len(post), Some(post.len() - 1));
        assert_eq!(
            request_len(b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nab"),
            None
        );
        let chunked =
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx-t: 1\r\n\r\n";
        assert_eq!(request_len(chunked), Some(chunked.len()));
        let bare = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(request_len(bare), Some(bare.len()));
        assert_eq!(request_len(&chunked[..chunked.len() - 2]), None);
    }
}
