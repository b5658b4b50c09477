//! An upstream that resolves paths as leniently as common frameworks do,
//! and records what it received, for the gateway-integrity tests (issue
//! 15: no route guard can be walked around).

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use bytes::BytesMut;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::Proxy;

/// What a request received by the lenient upstream was.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) target: String,
    pub(crate) host: String,
    /// Every way a lenient framework could resolve its path.
    pub(crate) resolved: Vec<String>,
    pub(crate) upgrade: Option<String>,
    pub(crate) http2_settings: bool,
}

/// An upstream that records each request and answers with its target
/// (then a line with its Host). A websocket upgrade with
/// `Sec-WebSocket-Version: 13` is switched (then bytes are echoed
/// upper-cased), any other websocket offer gets 426; an `h2c` offer would
/// be switched too (a vulnerable backend); `/sneaky-101` is answered 101
/// whatever was asked.
pub(crate) struct Lenient {
    pub(crate) addr: SocketAddr,
    seen: Arc<Mutex<Vec<Received>>>,
}

impl Lenient {
    pub(crate) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&record)));
            }
        });
        Self { addr, seen }
    }

    pub(crate) fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    pub(crate) fn last(&self) -> Received {
        self.seen.lock().unwrap().last().cloned().unwrap()
    }

    /// The test's invariant: nothing that resolves to `/admin` got here.
    pub(crate) fn assert_admin_never_reached(&self) {
        for received in self.seen.lock().unwrap().iter() {
            for path in &received.resolved {
                let admin = path == "/admin" || path.starts_with("/admin/");
                assert!(
                    !admin,
                    "the upstream resolved {received:?} to the guarded {path}"
                );
            }
        }
    }
}

async fn serve(mut stream: TcpStream, seen: Arc<Mutex<Vec<Received>>>) {
    let limits = http1::Limits {
        max_head: 64 * 1024,
        max_body: 0,
    };
    let mut buf = BytesMut::new();
    loop {
        let mut fields = Vec::new();
        let head = loop {
            fields.clear();
            if let Ok(Some(head)) = http1::parse_head_into(&buf, &limits, &mut fields) {
                break head;
            }
            if stream.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                return;
            }
        };
        let text = |r: std::ops::Range<usize>| String::from_utf8_lossy(&buf[r]).into_owned();
        let field = |name: &str| {
            fields
                .iter()
                .find(|(n, _)| buf[n.clone()].eq_ignore_ascii_case(name.as_bytes()))
                .map(|(_, v)| text(v.clone()))
        };
        let target = text(head.target.clone());
        let received = Received {
            resolved: resolutions(&target),
            host: field("host").unwrap_or_default(),
            upgrade: field("upgrade"),
            http2_settings: field("http2-settings").is_some(),
            target,
        };
        let version = field("sec-websocket-version");
        let _ = buf.split_to(head.len);
        let switch = match received.upgrade.as_deref() {
            Some("websocket") => version.as_deref() == Some("13"),
            Some(offer) => offer.contains("h2c"),
            None => false,
        } || received.target == "/sneaky-101";
        let refuse = received.upgrade.as_deref() == Some("websocket") && !switch;
        let body = format!("{}\n{}", received.target, received.host);
        seen.lock().unwrap().push(received);
        if switch {
            let _ = stream
                .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
                .await;
            let mut chunk = [0u8; 1024];
            loop {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        let upper = chunk[..n].to_ascii_uppercase();
                        if stream.write_all(&upper).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
        let status = if refuse {
            "426 Upgrade Required"
        } else {
            "200 OK"
        };
        let answer = format!(
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// How lenient frameworks resolve a target's path: a servlet container
/// (path parameters dropped from the raw path, then decoded, `\` as `/`),
/// and a decode-first router (everything decoded, `%2F` a separator).
fn resolutions(target: &str) -> Vec<String> {
    let path = match target.find("://") {
        Some(scheme) => {
            let rest = &target[scheme + 3..];
            &rest[rest.find('/').unwrap_or(rest.len())..]
        }
        None => target,
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let servlet: Vec<&str> = path
        .split('/')
        .map(|s| s.split(';').next().unwrap_or_default())
        .collect();
    let servlet = decode(&servlet.join("/")).replace('\\', "/");
    vec![dots(&servlet), dots(&decode(path).replace('\\', "/"))]
}

fn decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Dot segments resolved (clamped at the root) and empty segments merged.
fn dots(path: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                kept.pop();
            }
            s => kept.push(s),
        }
    }
    format!("/{}", kept.join("/"))
}

pub(crate) const DENY_ALL: &str =
    "middleware:\n  deny_all: { ip_filter: { deny: [0.0.0.0/0, \"::/0\"] } }\n";

pub(crate) fn guarded(upstream: SocketAddr, routes: &str) -> Proxy {
    Proxy::start(&format!(
        "{DENY_ALL}upstreams:\n  app: {{ hosts: [\"http://{upstream}\"] }}\nroutes:\n{routes}"
    ))
}

pub(crate) const ADMIN_ROUTES: &str = "  - { path: /admin, chain: [deny_all], upstream: app }\n  - { path: /nows, upgrades: [], upstream: app }\n  - { path: /, upstream: app }\n";

/// The admin listener's answer to `GET path`.
pub(crate) async fn admin_get(proxy: &Proxy, path: &str) -> String {
    let mut conn = testkit::RawConn::connect(proxy.admin()).await;
    conn.get(path).await.text()
}
