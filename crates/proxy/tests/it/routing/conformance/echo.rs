//! The conformance suite's backend (`echo-basic`), as the tables read
//! it: a JSON echo of the request (`path` as the request-target,
//! `host`, `method`, `proto`, `headers`, `namespace`, `pod`), response
//! fields from `X-Echo-Set-Header`, `?delay=`, `/status/NNN`, and the
//! flaky `/retry/` of the retry test; every request target logged, as
//! the suite reads mirrored requests from the pods' logs. HTTP/1.1 on
//! one port, HTTP/2 with prior knowledge on another.

use std::{
    collections::{BTreeMap, HashMap},
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use bytes::{Buf, Bytes, BytesMut};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// One pod: its identity, its ports, and what it was asked.
#[derive(Clone)]
pub(crate) struct Pod {
    pub(crate) namespace: &'static str,
    pub(crate) name: String,
    pub(crate) http: SocketAddr,
    pub(crate) h2c: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    attempts: Arc<Mutex<HashMap<String, u32>>>,
}

/// A request as the echo reads it.
struct Asked {
    method: String,
    target: String,
    host: String,
    proto: &'static str,
    headers: Vec<(String, String)>,
}

impl Pod {
    pub(crate) async fn start(namespace: &'static str, name: String) -> Self {
        let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let h2c = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let pod = Self {
            namespace,
            name,
            http: http.local_addr().unwrap(),
            h2c: h2c.local_addr().unwrap(),
            log: Arc::default(),
            attempts: Arc::default(),
        };
        let serving = pod.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = http.accept().await {
                tokio::spawn(serving.clone().serve_h1(stream));
            }
        });
        let serving = pod.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = h2c.accept().await {
                tokio::spawn(serving.clone().serve_h2c(stream));
            }
        });
        pod
    }

    /// The request targets it was asked for, in order.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    async fn serve_h1(self, mut stream: TcpStream) {
        let limits = http1::Limits {
            max_head: 64 * 1024,
            max_body: 1 << 20,
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
            let text = String::from_utf8_lossy(&buf[..head.len]).into_owned();
            buf.advance(head.len);
            if let http1::Framing::Length(mut left) = head.framing {
                while left > 0 {
                    if buf.is_empty() && stream.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let take = left.min(buf.len());
                    buf.advance(take);
                    left -= take;
                }
            }
            let asked = parse(&text);
            let Some((status, fields, body)) = self.answer(&asked).await else {
                // The retry test's connection failure: a reset.
                let _ = stream.set_zero_linger();
                return;
            };
            let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
            for (name, value) in fields {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
            out.push_str("\r\n");
            let mut bytes = out.into_bytes();
            bytes.extend_from_slice(&body);
            if stream.write_all(&bytes).await.is_err() {
                return;
            }
        }
    }

    async fn serve_h2c(self, stream: TcpStream) {
        let Ok(mut conn) = h2::server::handshake(stream).await else {
            return;
        };
        while let Some(Ok((request, mut respond))) = conn.accept().await {
            let pod = self.clone();
            tokio::spawn(async move {
                let (parts, _) = request.into_parts();
                let asked = Asked {
                    method: parts.method.to_string(),
                    target: parts
                        .uri
                        .path_and_query()
                        .map_or("/".into(), |pq| pq.to_string()),
                    host: parts
                        .uri
                        .authority()
                        .map(|a| a.to_string())
                        .unwrap_or_default(),
                    proto: "HTTP/2.0",
                    headers: parts
                        .headers
                        .iter()
                        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
                        .collect(),
                };
                let Some((status, fields, body)) = pod.answer(&asked).await else {
                    return;
                };
                let mut response = http::Response::builder().status(status);
                for (name, value) in fields {
                    response = response.header(name, value);
                }
                if let Ok(mut send) = respond.send_response(response.body(()).unwrap(), false) {
                    let _ = send.send_data(Bytes::from(body), true);
                }
            });
        }
    }

    /// Status, fields and body; `None` for a connection to reset.
    async fn answer(&self, asked: &Asked) -> Option<(u16, Vec<(String, String)>, Vec<u8>)> {
        let (path, query) = asked.target.split_once('?').unwrap_or((&asked.target, ""));
        let param = |name: &str| {
            query
                .split('&')
                .find_map(|p| p.strip_prefix(&format!("{name}=")))
                .map(str::to_string)
        };
        if let Some(code) = path.strip_prefix("/status/") {
            return Some((code.parse().unwrap_or(400), Vec::new(), Vec::new()));
        }
        if path.starts_with("/retry/") {
            let uuid = param("uuid").unwrap_or_default();
            let succeed_after: u32 = param("succeedAfter")?.parse().ok()?;
            let failing = {
                let mut attempts = self.attempts.lock().unwrap();
                let seen = attempts.entry(uuid).or_default();
                let failing = *seen < succeed_after;
                *seen += u32::from(failing);
                failing
            };
            if failing {
                let code: u16 = param("responseCode")?.parse().ok()?;
                return Some((code, Vec::new(), Vec::new()));
            }
        }
        self.log.lock().unwrap().push(asked.target.clone());
        if let Some(delay) = param("delay").and_then(|d| humantime::parse_duration(&d).ok()) {
            tokio::time::sleep(delay).await;
        }
        let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in &asked.headers {
            headers
                .entry(canonical(name))
                .or_default()
                .push(value.clone());
        }
        let body = serde_json::json!({
            "path": asked.target,
            "host": asked.host,
            "method": asked.method,
            "proto": asked.proto,
            "headers": headers,
            "namespace": self.namespace,
            "pod": self.name,
        });
        let mut fields = vec![("content-type".to_string(), "application/json".to_string())];
        for (name, value) in &asked.headers {
            if !name.eq_ignore_ascii_case("x-echo-set-header") {
                continue;
            }
            for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
                let (n, v) = pair.trim().split_once(':').unwrap_or((pair.trim(), ""));
                fields.push((n.to_string(), v.trim().to_string()));
            }
        }
        Some((200, fields, body.to_string().into_bytes()))
    }
}

/// Go's canonical form of a header name (`x-header-set` is `X-Header-Set`).
fn canonical(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => {
                    first.to_ascii_uppercase().to_string() + &chars.as_str().to_ascii_lowercase()
                }
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// An HTTP/1.1 head's request line and fields.
fn parse(text: &str) -> Asked {
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let target = first.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_string(), v.trim().to_string()))
        .collect();
    let host = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let headers = headers
        .into_iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("host"))
        .collect();
    Asked {
        method,
        target,
        host,
        proto: "HTTP/1.1",
        headers,
    }
}
