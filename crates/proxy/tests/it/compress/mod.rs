//! The `compress` handler through the proxy: curl `--compressed` and
//! Python's `gzip`, `brotli` and `zstandard` decoders get the exact bytes
//! for each coding, over HTTP/1.1, HTTP/2 and HTTP/3, from HTTP/1.1 and
//! h2c upstreams; a streamed response arrives event by event; the memory
//! budget sends responses past it uncompressed and counts them.

mod clients;
mod streaming;

use std::{net::SocketAddr, sync::Arc};

use bytes::Bytes;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
};

/// The body every route serves: JSON-like text, 200 KB.
pub(crate) fn body() -> Vec<u8> {
    let mut out = Vec::with_capacity(200_064);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut i = 0u64;
    while out.len() < 200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let line = format!(
            "{{\"id\":{i},\"name\":\"pet{}\",\"tag\":\"{}\",\"weight\":{}}},\n",
            x % 1000,
            ["cat", "dog", "bird"][(x % 3) as usize],
            x % 100_000
        );
        out.extend_from_slice(line.as_bytes());
        i += 1;
    }
    out.truncate(200_000);
    out
}

/// What the body upstreams answer for a path ending in:
/// - `/json`: the body with its Content-Length;
/// - `/chunked`: the body without a length (HTTP/1.1 chunked, or HTTP/2
///   DATA frames without `content-length`), in 16 KiB pieces;
/// - `/events`: server-sent events, the second only once `release` has a
///   permit for it (taken).
#[derive(Clone)]
pub(crate) struct Upstreams {
    pub h1: SocketAddr,
    pub h2c: SocketAddr,
    pub release: Arc<Semaphore>,
}

impl Upstreams {
    pub(crate) async fn start() -> Self {
        let release = Arc::new(Semaphore::new(0));
        let h1 = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let h2c = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstreams = Self {
            h1: h1.local_addr().unwrap(),
            h2c: h2c.local_addr().unwrap(),
            release: Arc::clone(&release),
        };
        let released = Arc::clone(&release);
        tokio::spawn(async move {
            while let Ok((stream, _)) = h1.accept().await {
                tokio::spawn(serve_h1(stream, Arc::clone(&released)));
            }
        });
        tokio::spawn(async move {
            while let Ok((stream, _)) = h2c.accept().await {
                tokio::spawn(serve_h2c(stream, Arc::clone(&release)));
            }
        });
        upstreams
    }

    /// Upstreams `h1` and `h2c`, and a route `/{upstream}/{name}` to each
    /// through the chain `[name]` for each of `handlers` (`name: settings`).
    pub(crate) fn config(&self, handlers: &[(&str, &str)]) -> String {
        let mut yaml = format!(
            "upstreams:\n  h1:\n    hosts: [\"http://{}\"]\n  h2c:\n    hosts: [\"http://{}\"]\n    protocol: h2c\nmiddleware:\n",
            self.h1, self.h2c
        );
        for (name, settings) in handlers {
            yaml.push_str(&format!("  {name}: {{ compress: {settings} }}\n"));
        }
        yaml.push_str("routes:\n");
        for upstream in ["h1", "h2c"] {
            for (name, _) in handlers {
                yaml.push_str(&format!(
                    "  - {{ path: /{upstream}/{name}, chain: [{name}], upstream: {upstream} }}\n"
                ));
            }
        }
        yaml
    }
}

const EVENT_ONE: &[u8] = b"data: one\n\n";
const EVENT_TWO: &[u8] = b"data: two\n\n";

async fn serve_h1(mut stream: TcpStream, release: Arc<Semaphore>) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let mut more = [0u8; 4096];
            match stream.read(&mut more).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&more[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        buf.drain(..head_end);
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        let body = body();
        let written = if path.ends_with("/json") {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\netag: \"v1\"\r\n\r\n",
                body.len()
            );
            stream.write_all(&[head.as_bytes(), &body].concat()).await
        } else if path.ends_with("/chunked") {
            let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
            for piece in body.chunks(16 * 1024) {
                out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
            stream.write_all(&out).await
        } else {
            let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            let chunk = |event: &[u8]| {
                [format!("{:x}\r\n", event.len()).as_bytes(), event, b"\r\n"].concat()
            };
            let first = stream
                .write_all(&[&head[..], &chunk(EVENT_ONE)].concat())
                .await;
            if first.is_err() {
                return;
            }
            if let Ok(permit) = release.acquire().await {
                permit.forget();
            }
            stream
                .write_all(&[&chunk(EVENT_TWO)[..], b"0\r\n\r\n"].concat())
                .await
        };
        if written.is_err() {
            return;
        }
    }
}

async fn serve_h2c(stream: TcpStream, release: Arc<Semaphore>) {
    let Ok(mut connection) = h2::server::handshake(stream).await else {
        return;
    };
    while let Some(Ok((request, mut respond))) = connection.accept().await {
        let release = Arc::clone(&release);
        tokio::spawn(async move {
            let path = request.uri().path().to_string();
            let body = body();
            let events = path.ends_with("/events");
            let mut head = http::Response::builder().status(200).header(
                "content-type",
                if events {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            );
            if path.ends_with("/json") {
                head = head
                    .header("content-length", body.len())
                    .header("etag", "\"v1\"");
            }
            let Ok(mut send) = respond.send_response(head.body(()).unwrap(), false) else {
                return;
            };
            if events {
                let _ = send.send_data(Bytes::from_static(EVENT_ONE), false);
                if let Ok(permit) = release.acquire().await {
                    permit.forget();
                }
                let _ = send.send_data(Bytes::from_static(EVENT_TWO), true);
                return;
            }
            let pieces: Vec<&[u8]> = body.chunks(16 * 1024).collect();
            for (i, piece) in pieces.iter().enumerate() {
                send.reserve_capacity(piece.len());
                let last = i + 1 == pieces.len();
                if send.send_data(Bytes::copy_from_slice(piece), last).is_err() {
                    return;
                }
            }
        });
    }
}

/// One compress instance per coding, each offering only it.
pub(crate) const EACH_CODING: [(&str, &str); 3] = [
    ("gzip", "{ algorithms: [gzip] }"),
    ("br", "{ algorithms: [br] }"),
    ("zstd", "{ algorithms: [zstd] }"),
];
