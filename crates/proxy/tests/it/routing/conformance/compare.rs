//! The suite's `ExpectedResponse` and `CompareRoundTrip`
//! (conformance/utils/http/http.go), and its round tripper: the request
//! made as Go's client makes it (Host: the gateway's address unless the
//! case names one), over HTTP/1.1, HTTP/1.1 over TLS, or h2c.

use std::{collections::BTreeMap, net::SocketAddr, sync::Arc};

use testkit::RawConn;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How a request is made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Proto {
    #[default]
    Http,
    /// HTTPS to the name `host`, trusting the suite's CA.
    Https,
    /// HTTP/2 with prior knowledge.
    H2c,
}

/// `http.Request`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Req {
    pub host: &'static str,
    pub method: &'static str,
    pub path: String,
    pub headers: Vec<(&'static str, &'static str)>,
    /// `BackendSetResponseHeaders`.
    pub set_response: Vec<(&'static str, &'static str)>,
    pub proto: Proto,
}

/// `ExpectedResponse` (what the case says; the rest as the suite defaults it).
#[derive(Debug, Clone, Default)]
pub(crate) struct Exp {
    /// 200 when not given.
    pub status: Vec<u16>,
    pub backend: &'static str,
    /// The infrastructure namespace when not given.
    pub namespace: Option<&'static str>,
    /// `ExpectedRequest`: path, host, headers, absent headers.
    pub path: Option<String>,
    pub host: Option<&'static str>,
    pub request_headers: Option<Vec<(&'static str, &'static str)>>,
    pub request_absent: Vec<&'static str>,
    pub response_headers: Vec<(&'static str, &'static str)>,
    pub response_absent: Vec<&'static str>,
    /// `RedirectRequest`: scheme, host, port, path ("" for the defaults).
    pub redirect: Option<(&'static str, &'static str, &'static str, &'static str)>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Case {
    pub req: Req,
    pub exp: Exp,
}

/// What came back: status, fields (lower-case names, values joined
/// with `,`), and what the echo said it saw.
#[derive(Debug)]
pub(crate) struct Captured {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub echo: Option<serde_json::Value>,
}

/// `path` as a `Req` for GET.
pub(crate) fn get(path: &str) -> Req {
    Req {
        method: "GET",
        path: path.into(),
        ..Req::default()
    }
}

/// Makes the request to `gateway`.
pub(crate) async fn roundtrip(gateway: SocketAddr, req: &Req, ca: &str) -> Captured {
    let host = match req.host {
        "" => gateway.to_string(),
        host => host.to_string(),
    };
    let set = req
        .set_response
        .iter()
        .map(|(n, v)| format!("{n}:{v}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut fields: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    fields.push(("X-Echo-Set-Header".into(), set));
    let method = if req.method.is_empty() {
        "GET"
    } else {
        req.method
    };
    let (status, headers, body) = match req.proto {
        Proto::H2c => h2c(gateway, method, &host, &req.path, &fields).await,
        proto => {
            let mut head = format!(
                "{method} {} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n",
                req.path
            );
            for (n, v) in &fields {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("\r\n");
            match proto {
                Proto::Https => https(gateway, req.host, &head, ca).await,
                _ => {
                    let mut conn = RawConn::connect(gateway).await;
                    conn.send(head).await;
                    let answer = conn.read_response(method == "HEAD").await;
                    (answer.status, answer.headers, answer.body)
                }
            }
        }
    };
    let mut joined: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        match joined.get_mut(&name) {
            Some(existing) => {
                existing.push(',');
                existing.push_str(&value);
            }
            None => {
                joined.insert(name, value);
            }
        }
    }
    Captured {
        status,
        headers: joined,
        echo: serde_json::from_slice(&body).ok(),
    }
}

type Raw = (u16, Vec<(String, String)>, Vec<u8>);

async fn https(gateway: SocketAddr, name: &str, head: &str, ca: &str) -> Raw {
    let dir =
        std::env::temp_dir().join(format!("sluice-conformance-ca-{}.pem", std::process::id()));
    std::fs::write(&dir, ca).unwrap();
    let config = tls::client_config(tls::Trust::CaFile(&dir), None, &[b"http/1.1"]).unwrap();
    let connector = tls::tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(gateway).await.unwrap();
    let server = tls::rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
    let mut stream = connector.connect(server, tcp).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(testkit::IO_TIMEOUT, stream.read_to_end(&mut bytes)).await;
    parse_response(&bytes)
}

/// A whole HTTP/1.1 response read to the connection's end.
fn parse_response(bytes: &[u8]) -> Raw {
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head")
        + 4;
    let head = String::from_utf8_lossy(&bytes[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_string(), v.trim().to_string()))
        .collect();
    (status, headers, bytes[end..].to_vec())
}

async fn h2c(
    gateway: SocketAddr,
    method: &str,
    host: &str,
    path: &str,
    fields: &[(String, String)],
) -> Raw {
    let send =
        crate::support::h2_client(tokio::net::TcpStream::connect(gateway).await.unwrap()).await;
    let mut request = http::Request::builder()
        .method(method)
        .uri(format!("http://{host}{path}"));
    for (n, v) in fields {
        request = request.header(n.as_str(), v.as_str());
    }
    let (response, body, _) =
        crate::support::h2_exchange(&send, request.body(()).unwrap(), b"").await;
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    (response.status().as_u16(), headers, body)
}

/// `CompareRoundTrip`.
pub(crate) fn compare(req: &Req, exp: &Exp, got: &Captured) -> Result<(), String> {
    let statuses = if exp.status.is_empty() {
        vec![200]
    } else {
        exp.status.clone()
    };
    if !statuses.contains(&got.status) {
        return Err(format!(
            "expected status one of {statuses:?}, got {}: {got:?}",
            got.status
        ));
    }
    if got.status == 200 || got.status == 204 {
        let echo = got.echo.as_ref().ok_or("no echo in the answer")?;
        let text = |key: &str| echo[key].as_str().unwrap_or_default().to_string();
        let path = exp.path.clone().unwrap_or_else(|| req.path.clone());
        if text("path") != path {
            return Err(format!("expected path {path}, got {}", text("path")));
        }
        let host = exp.host.or((!req.host.is_empty()).then_some(req.host));
        if let Some(host) = host.filter(|h| !h.is_empty()) {
            if text("host") != host {
                return Err(format!("expected host {host}, got {}", text("host")));
            }
        }
        let method = if req.method.is_empty() {
            "GET"
        } else {
            req.method
        };
        if text("method") != method {
            return Err(format!("expected method {method}, got {}", text("method")));
        }
        let namespace = exp.namespace.unwrap_or(super::INFRA);
        if text("namespace") != namespace {
            return Err(format!(
                "expected namespace {namespace}, got {}",
                text("namespace")
            ));
        }
        let seen: BTreeMap<String, String> = echo["headers"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        let values: Vec<&str> = v
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|s| s.as_str())
                            .collect();
                        (k.to_ascii_lowercase(), values.join(","))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let wanted = exp
            .request_headers
            .clone()
            .unwrap_or_else(|| req.headers.clone());
        for (name, value) in wanted {
            match seen.get(&name.to_ascii_lowercase()) {
                Some(v) if v == value => {}
                other => {
                    return Err(format!(
                        "expected request header {name}: {value}, got {other:?}"
                    ))
                }
            }
        }
        for name in &exp.request_absent {
            if let Some(v) = seen.get(&name.to_ascii_lowercase()) {
                return Err(format!("expected no request header {name}, got {v}"));
            }
        }
        for (name, value) in &exp.response_headers {
            match got.headers.get(&name.to_ascii_lowercase()) {
                Some(v) if v == value => {}
                other => {
                    return Err(format!(
                        "expected response header {name}: {value}, got {other:?}"
                    ))
                }
            }
        }
        for name in &exp.response_absent {
            if let Some(v) = got.headers.get(&name.to_ascii_lowercase()) {
                return Err(format!("expected no response header {name}, got {v}"));
            }
        }
        if !text("pod").starts_with(exp.backend) {
            return Err(format!(
                "expected a pod of {}, got {}",
                exp.backend,
                text("pod")
            ));
        }
    } else if (300..400).contains(&got.status) {
        let Some((scheme, host, port, path)) = exp.redirect else {
            return Ok(());
        };
        let location = got.headers.get("location").ok_or("no Location")?;
        let (got_scheme, rest) = location
            .split_once("://")
            .ok_or("not an absolute Location")?;
        let (authority, got_path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let got_path = got_path.split('?').next().unwrap_or_default();
        let (got_host, got_port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (h, p),
            _ => (authority, ""),
        };
        let scheme = if scheme.is_empty() { "http" } else { scheme };
        let path = if path.is_empty() {
            req.path.split('?').next().unwrap_or_default()
        } else {
            path
        };
        if !host.is_empty() && got_host != host {
            return Err(format!("expected redirect host {host}, got {got_host}"));
        }
        let default_ok = match got_scheme {
            "http" => ["80", ""].contains(&got_port),
            "https" => ["443", ""].contains(&got_port),
            _ => true,
        };
        if (port.is_empty() && !default_ok) || (!port.is_empty() && port != got_port) {
            return Err(format!(
                "expected redirect port {port:?}, got {got_port:?} in {location}"
            ));
        }
        if got_scheme != scheme || got_path != path {
            return Err(format!("expected {scheme}://…{path}, got {location}"));
        }
    }
    Ok(())
}

/// Asks `case` of `gateway` (three times, as the suite waits for three
/// consistent answers), failing with the case's request.
pub(crate) async fn ask(gateway: SocketAddr, case: &Case, ca: &str) {
    for _ in 0..3 {
        let got = roundtrip(gateway, &case.req, ca).await;
        if let Err(why) = compare(&case.req, &case.exp, &got) {
            panic!(
                "{} {} (host {:?}): {why}",
                case.req.method, case.req.path, case.req.host
            );
        }
    }
}

/// [`ask`] for each case.
pub(crate) async fn ask_all(gateway: SocketAddr, cases: &[Case], ca: &str) {
    for case in cases {
        ask(gateway, case, ca).await;
    }
}

impl Case {
    /// A GET of `path` answered by a pod of `backend`.
    pub(crate) fn to(path: &str, backend: &'static str) -> Self {
        Self {
            req: get(path),
            exp: Exp {
                backend,
                ..Exp::default()
            },
        }
    }

    /// A GET of `path` answered with `status`.
    pub(crate) fn status(path: &str, status: u16) -> Self {
        Self {
            req: get(path),
            exp: Exp {
                status: vec![status],
                ..Exp::default()
            },
        }
    }

    pub(crate) fn host(mut self, host: &'static str) -> Self {
        self.req.host = host;
        self
    }

    pub(crate) fn method(mut self, method: &'static str) -> Self {
        self.req.method = method;
        self
    }

    pub(crate) fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.req.headers.push((name, value));
        self
    }

    pub(crate) fn namespace(mut self, namespace: &'static str) -> Self {
        self.exp.namespace = Some(namespace);
        self
    }

    pub(crate) fn proto(mut self, proto: Proto) -> Self {
        self.req.proto = proto;
        self
    }

    /// A redirect expected: scheme, host, port, path ("" for the defaults).
    pub(crate) fn redirect(
        mut self,
        status: u16,
        to: (&'static str, &'static str, &'static str, &'static str),
    ) -> Self {
        self.exp.status = vec![status];
        self.exp.redirect = Some(to);
        self
    }
}
