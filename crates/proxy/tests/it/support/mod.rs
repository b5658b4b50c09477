//! What the integration tests of the proxy share: a proxy started from
//! YAML and an upstream that echoes what it received.

// Helpers below panic on any failure: that is what a test wants.
#![allow(clippy::unwrap_used, dead_code)]

pub(crate) mod h2raw;
pub(crate) mod interim;
pub(crate) mod lenient;
pub(crate) mod live;
pub(crate) mod peers;

use std::{
    net::SocketAddr,
    path::Path,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, Request, Response};
use testkit::RawConn;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// The `.rs` files under `dir`, at any depth.
pub(crate) fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)
        .expect("read a source directory")
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            found.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found
}

/// The JSON lines of the access log at `path`, once it has at least `n`
/// (its writer thread flushes when its queue runs dry; 5 s at most).
pub(crate) async fn access_log_lines(path: &Path, n: usize) -> Vec<serde_json::Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let text = loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= n || std::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A proxy started from YAML (listener and admin on ephemeral ports), stopped on drop.
pub(crate) struct Proxy(Option<proxy::RunningProxy>);

impl Proxy {
    pub(crate) fn start(upstreams_and_routes: &str) -> Self {
        Self::start_with("workers: 1", upstreams_and_routes)
    }

    /// With `settings` (top-level keys such as `workers`) in front. The
    /// admin listener answers the name `test`, the `Host` testkit's
    /// `RawConn` sends (it answers IP literals, localhost and
    /// `admin.hosts` only).
    pub(crate) fn start_with(settings: &str, upstreams_and_routes: &str) -> Self {
        Self::start_yaml(&format!(
            "{settings}\nlisteners: [{{ address: 127.0.0.1:0 }}]\nadmin: {{ address: 127.0.0.1:0, hosts: [test] }}\n{upstreams_and_routes}"
        ))
    }

    /// From a whole configuration.
    pub(crate) fn start_yaml(yaml: &str) -> Self {
        let config = proxy::config::parse(yaml, Path::new("test.yaml"), |_| None)
            .unwrap_or_else(|err| panic!("{err}\n{yaml}"));
        Self(Some(proxy::start(&config).expect("start the proxy")))
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.0.as_ref().unwrap().listeners[0]
    }

    /// Every listener's address, in the configuration's order.
    pub(crate) fn addrs(&self) -> Vec<SocketAddr> {
        self.0.as_ref().unwrap().listeners.clone()
    }

    /// The address of the `i`th listener of the configuration.
    pub(crate) fn listener(&self, i: usize) -> SocketAddr {
        self.0.as_ref().unwrap().listeners[i]
    }

    pub(crate) fn admin(&self) -> SocketAddr {
        self.0.as_ref().unwrap().admin.unwrap()
    }

    pub(crate) async fn conn(&self) -> RawConn {
        RawConn::connect(self.addr()).await
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(proxy) = self.0.take() {
            proxy.shutdown();
        }
    }
}

/// Upstream `two` with hosts `a` and `b` (then `extra`, its further
/// keys, each line indented by four spaces) and a catch-all route.
pub(crate) fn two_hosts(a: SocketAddr, b: SocketAddr, extra: &str) -> String {
    format!(
        "upstreams:\n  two:\n    hosts: [\"http://{a}\", \"http://{b}\"]\n{extra}routes:\n  - {{ path: /, upstream: two }}\n"
    )
}

/// The first line of the answers to `n` GETs of `/` on `conn` (with
/// [`Echo`], which upstream answered).
pub(crate) async fn first_lines(conn: &mut RawConn, n: usize) -> std::collections::HashSet<String> {
    let mut seen = std::collections::HashSet::new();
    for _ in 0..n {
        let text = conn.get("/").await.text();
        seen.insert(text.lines().next().unwrap_or_default().to_string());
    }
    seen
}

/// One upstream `echo` at `addr` with a catch-all route.
pub(crate) fn one_upstream(addr: SocketAddr, extra: &str) -> String {
    format!("upstreams:\n  echo:\n    hosts: [\"http://{addr}\"]\n{extra}routes:\n  - {{ path: /, upstream: echo }}\n")
}

/// An upstream answering every request with the request head it received,
/// then `body-bytes: N` (the decoded body length). Counts requests.
pub(crate) struct Echo {
    pub(crate) addr: SocketAddr,
    pub(crate) requests: Arc<AtomicU64>,
}

impl Echo {
    pub(crate) async fn start(name: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&requests);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(echo(stream, name, Arc::clone(&counter)));
            }
        });
        Self { addr, requests }
    }
}

/// The next request head at the start of `buf`, reading more from
/// `stream` until it is whole; `None` when the stream ends (or fails) first.
pub(crate) async fn next_request_head(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    limits: &http1::Limits,
) -> Option<http1::Head> {
    loop {
        if let Ok(Some(head)) = http1::parse_head(buf, limits) {
            return Some(head);
        }
        if stream.read_buf(buf).await.unwrap_or(0) == 0 {
            return None;
        }
    }
}

pub(crate) async fn echo(mut stream: TcpStream, name: &'static str, requests: Arc<AtomicU64>) {
    let limits = http1::Limits {
        max_head: 64 * 1024,
        max_body: usize::MAX,
    };
    let mut buf = BytesMut::new();
    loop {
        let Some(head) = next_request_head(&mut stream, &mut buf, &limits).await else {
            return;
        };
        requests.fetch_add(1, Ordering::SeqCst);
        let text = String::from_utf8_lossy(&buf[..head.len]).into_owned();
        buf.advance(head.len);
        let mut body_bytes = 0usize;
        // Trailer field lines of a chunked body, echoed back one per line.
        let mut trailers = String::new();
        match head.framing {
            http1::Framing::Empty => {}
            http1::Framing::Length(mut left) => loop {
                let take = left.min(buf.len());
                buf.advance(take);
                body_bytes += take;
                left -= take;
                if left == 0 {
                    break;
                }
                if stream.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
            },
            http1::Framing::Chunked => {
                let mut decoder = http1::ChunkedDecoder::default();
                loop {
                    let decoded = decoder
                        .decode_parts(&buf, &limits, |part| {
                            if let http1::Part::Trailer(line) = part {
                                trailers.push_str("trailer: ");
                                trailers.push_str(&String::from_utf8_lossy(line));
                                trailers.push('\n');
                            }
                        })
                        .unwrap();
                    buf.advance(decoded.consumed);
                    if decoded.done {
                        break;
                    }
                    if stream.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                        return;
                    }
                }
                body_bytes = decoder.data_len();
            }
        }
        let body = format!("upstream: {name}\n{text}{trailers}body-bytes: {body_bytes}");
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: keep-alive\r\nx-upstream-hop: 1\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// An HTTP/2 client connection over `io`.
pub(crate) async fn h2_client<T>(io: T) -> h2::client::SendRequest<Bytes>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = h2::client::handshake(io).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender
}

/// Sends a request and reads the whole answer: status, headers, body, trailers.
pub(crate) async fn h2_exchange(
    sender: &h2::client::SendRequest<Bytes>,
    request: Request<()>,
    body: &[u8],
) -> (Response<()>, Vec<u8>, Option<HeaderMap>) {
    let mut sender = sender.clone().ready().await.unwrap();
    let (response, mut stream) = sender.send_request(request, body.is_empty()).unwrap();
    if !body.is_empty() {
        // The proxy may answer before it reads the body (a 503 or 502 the
        // upstream's state decides) and close the stream; then the body
        // cannot be sent (InactiveStreamId) and the answer is what counts.
        let _ = stream.send_data(Bytes::copy_from_slice(body), true);
    }
    let (parts, mut received) = response.await.unwrap().into_parts();
    let mut bytes = Vec::new();
    while let Some(data) = received.data().await {
        let data = data.unwrap();
        let _ = received.flow_control().release_capacity(data.len());
        bytes.extend_from_slice(&data);
    }
    let trailers = received.trailers().await.unwrap();
    (Response::from_parts(parts, ()), bytes, trailers)
}

/// Reads from `stream` until a response head has ended; what was read.
pub(crate) async fn read_head<R: AsyncRead + Unpin>(stream: &mut R) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before the end of a head");
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// Through a tunnel to an upstream that echoes upper-cased: `hello` comes back `HELLO`.
pub(crate) async fn assert_tunnel_echoes(stream: &mut TcpStream) {
    stream.write_all(b"hello").await.unwrap();
    let mut echoed = [0u8; 5];
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_exact(&mut echoed),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(&echoed, b"HELLO");
}
