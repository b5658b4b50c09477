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
    /// Every way a lenient framework could resolve its path (and the
    /// path in `X-Original-URL` or `X-Rewrite-URL`, as IIS and old
    /// Symfony take it).
    pub(crate) resolved: Vec<String>,
    /// Its path decoded twice: a backend out of the default model (see
    /// `paths.double_encoding`).
    pub(crate) double_decoded: String,
    /// The path and method override fields it carried, by name.
    pub(crate) overrides: Vec<String>,
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

    pub(crate) fn all(&self) -> Vec<Received> {
        self.seen.lock().unwrap().clone()
    }

    /// The test's invariant: nothing that resolves to a guarded path
    /// (`/admin`, `/keys`), compared with or without case, got here.
    pub(crate) fn assert_admin_never_reached(&self) {
        for received in self.seen.lock().unwrap().iter() {
            for path in &received.resolved {
                assert!(
                    !is_guarded(path),
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
        let mut resolved = resolutions(&target);
        let overrides: Vec<String> = OVERRIDES
            .into_iter()
            .filter(|name| field(name).is_some())
            .map(String::from)
            .collect();
        for name in ["x-original-url", "x-rewrite-url"] {
            resolved.extend(field(name).iter().flat_map(|path| resolutions(path)));
        }
        let received = Received {
            resolved,
            double_decoded: {
                let once = String::from_utf8_lossy(&decode(path_of(&target))).into_owned();
                dots(&String::from_utf8_lossy(&decode(&once)))
            },
            overrides,
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

/// The fields some frameworks take a path or method from: the model's own
/// list, so that a name dropped from the proxy's shows here.
pub(crate) const OVERRIDES: [&str; 5] = [
    "x-original-url",
    "x-rewrite-url",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// The paths the guarded routes of [`ADMIN_ROUTES`] cover.
const GUARDED: [&str; 2] = ["/admin", "/keys"];

/// Whether `path` is under a guarded path, for a backend that compares
/// paths as sent, ignoring case as Java's `equalsIgnoreCase` does (simple
/// case mappings, char by char: `ı` is `i`, the Kelvin sign is `k`), or
/// after full Unicode case folding (Python's `casefold`: `ß` is `ss`).
fn is_guarded(path: &str) -> bool {
    let simple: String = path
        .chars()
        .map(|c| {
            let mut upper = c.to_uppercase();
            let upper = match (upper.next(), upper.next()) {
                (Some(u), None) => u,
                _ => c,
            };
            upper.to_lowercase().next().unwrap_or(upper)
        })
        .collect();
    let full = path.to_lowercase().to_uppercase().to_lowercase();
    [path.to_string(), simple, full].iter().any(|path| {
        GUARDED
            .iter()
            .any(|g| path == g || path.starts_with(&format!("{g}/")))
    })
}

/// Whether some lenient framework of the model serves `target` from a
/// guarded path: what the model must see in each bypass it is to catch.
pub(crate) fn resolves_to_guarded(target: &str) -> bool {
    resolutions(target).iter().any(|path| is_guarded(path))
}

/// How lenient frameworks resolve a target's path: a servlet container
/// (path parameters dropped from the raw path, then decoded, `\` as `/`);
/// a decode-first router (everything decoded, `%2F` a separator); one
/// that decodes, then drops path parameters (so `%3B` is `;`); and a
/// legacy UTF-8 decoder that takes overlong forms (`%C0%AE` is `.`).
fn resolutions(target: &str) -> Vec<String> {
    let path = path_of(target);
    let servlet: Vec<&str> = path
        .split('/')
        .map(|s| s.split(';').next().unwrap_or_default())
        .collect();
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).replace('\\', "/");
    let servlet = text(decode(&servlet.join("/")));
    let decoded = text(decode(path));
    let stripped: Vec<&str> = decoded
        .split('/')
        .map(|s| s.split(';').next().unwrap_or_default())
        .collect();
    let legacy = legacy_utf8(&decode(path)).replace('\\', "/");
    vec![
        dots(&servlet),
        dots(&decoded),
        dots(&stripped.join("/")),
        dots(&legacy),
    ]
}

/// A target's path: origin-form, or after an absolute-form authority.
fn path_of(target: &str) -> &str {
    let path = match target.find("://") {
        Some(scheme) => {
            let rest = &target[scheme + 3..];
            &rest[rest.find('/').unwrap_or(rest.len())..]
        }
        None => target,
    };
    path.split(['?', '#']).next().unwrap_or_default()
}

/// Bytes as a UTF-8 decoder from before RFC 3629 read them (Tomcat before
/// CVE-2008-2938, IIS 4 and 5): a sequence's payload bits taken whatever
/// its length, so overlong forms decode (`C0 AE` is `.`, `C0 AF` is `/`).
fn legacy_utf8(bytes: &[u8]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let (len, bits) = match bytes[i] {
            b @ 0xC0..=0xDF => (2, b & 0x1F),
            b @ 0xE0..=0xEF => (3, b & 0x0F),
            b => (1, b),
        };
        let tail = bytes.get(i + 1..i + len).unwrap_or_default();
        if len > 1 && tail.len() == len - 1 && tail.iter().all(|&c| c & 0xC0 == 0x80) {
            let code = tail
                .iter()
                .fold(u32::from(bits), |code, &c| code << 6 | u32::from(c & 0x3F));
            out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
            i += len;
        } else {
            out.push(match bytes[i] {
                b @ 0..=0x7F => char::from(b),
                _ => char::REPLACEMENT_CHARACTER,
            });
            i += 1;
        }
    }
    out
}

fn decode(path: &str) -> Vec<u8> {
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
    out
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

pub(crate) const ADMIN_ROUTES: &str = "  - { path: /admin, chain: [deny_all], upstream: app }\n  - { path: /keys, chain: [deny_all], upstream: app }\n  - { path: /nows, upgrades: [], upstream: app }\n  - { path: /, upstream: app }\n";

/// The admin listener's answer to `GET path`, as text.
pub(crate) async fn admin_text(proxy: &Proxy, path: &str) -> String {
    super::live::admin_get(proxy.admin(), path).await.text()
}
