//! The test's own forward-auth service (Traefik/Caddy semantics), over
//! raw HTTP/1.1. It decides by the `X-Forwarded-Uri` the proxy sends:
//! `/deny…` 401 with a body and headers of its own, `…/slow…` waits 2 s,
//! `/bare…` allows with no headers, anything else allows with
//! `X-Auth-User` (the request's `X-User`, default alice), `X-Auth-Role`,
//! `X-Authz-Saw` (what it was told; under `/keyed…`, the `X-Api-Key` it
//! got) and `X-Not-Trusted`. Counts requests.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use bytes::{Buf as _, BytesMut};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};

pub(super) struct AuthService {
    pub(super) addr: SocketAddr,
    pub(super) asked: Arc<AtomicU64>,
}

impl AuthService {
    pub(super) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let asked = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&asked);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&count)));
            }
        });
        Self { addr, asked }
    }

    pub(super) fn asked(&self) -> u64 {
        self.asked.load(Ordering::SeqCst)
    }
}

async fn serve(mut stream: TcpStream, asked: Arc<AtomicU64>) {
    let limits = http1::Limits {
        max_head: 64 * 1024,
        max_body: 1024 * 1024,
    };
    let mut buf = BytesMut::new();
    loop {
        let head = loop {
            if let Ok(Some(head)) = http1::parse_head(&buf, &limits) {
                break head;
            }
            if stream.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                return;
            }
        };
        asked.fetch_add(1, Ordering::SeqCst);
        let text = String::from_utf8_lossy(&buf[..head.len]).into_owned();
        let body_len = match head.framing {
            http1::Framing::Length(len) => len,
            _ => 0,
        };
        while buf.len() < head.len + body_len {
            if stream.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                return;
            }
        }
        buf.advance(head.len + body_len);
        let field = |name: &str| {
            text.lines().skip(1).find_map(|line| {
                let (n, v) = line.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        let uri = field("x-forwarded-uri").unwrap_or_default();
        let answer = if uri.starts_with("/deny") {
            let body = format!("denied for {uri}");
            format!(
                "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Basic realm=\"authz\"\r\nx-deny-reason: nope\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
        } else if uri.starts_with("/bare") {
            "HTTP/1.1 204 No Content\r\n\r\n".to_string()
        } else {
            if uri.contains("/slow") {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            let saw = if uri.starts_with("/keyed") {
                let key = field("x-api-key");
                format!("x-api-key={}", key.as_deref().unwrap_or("none"))
            } else {
                format!(
                    "{} {} proto={} host={} for={} body={}",
                    field("x-forwarded-method").unwrap_or_default(),
                    uri,
                    field("x-forwarded-proto").unwrap_or_default(),
                    field("x-forwarded-host").unwrap_or_default(),
                    field("x-forwarded-for").unwrap_or_default(),
                    body_len
                )
            };
            format!(
                "HTTP/1.1 200 OK\r\nx-auth-user: {}\r\nx-auth-role: admin\r\nx-authz-saw: {saw}\r\nx-not-trusted: leaked\r\ncontent-length: 0\r\n\r\n",
                field("x-user").unwrap_or_else(|| "alice".into())
            )
        };
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}
