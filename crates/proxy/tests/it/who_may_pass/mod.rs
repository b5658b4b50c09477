//! The handlers that decide who may pass besides `jwt` (issue 48):
//! `api_key`, `basic_auth`, `ext_authz` (HTTP and gRPC) and `oidc`, each
//! against a real counterpart, over HTTP/1.1, HTTP/2 and HTTP/3 clients
//! of one TLS listener. What the modules share is here.

mod api_key;
mod auth_service;
mod basic_auth;
mod ext_authz_grpc;
mod ext_authz_http;
mod oidc;

use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, Request};
use testkit::TestCerts;
use tokio::{io::AsyncWriteExt, net::TcpStream};

use crate::{
    h3_support,
    support::{h2_client, h2_exchange, Echo, Proxy},
};

/// A proxy with a TLS listener for `[h2, http1, h3]`, one `echo`
/// upstream, the `middleware` section and `routes` lines.
fn proxy(certs: &TestCerts, echo: SocketAddr, middleware: &str, routes: &str) -> Proxy {
    h3_support::proxy(
        certs,
        "",
        &format!(
            "upstreams:\n  echo:\n    hosts: [\"http://{echo}\"]\n{middleware}routes:\n{routes}"
        ),
    )
}

/// One answer, whichever protocol carried it.
#[derive(Debug)]
struct Reply {
    protocol: &'static str,
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The value of `name` in the head the echo upstream received.
    fn upstream_saw(&self, name: &str) -> Option<String> {
        crate::middleware::upstream_saw(&self.body, name)
    }
}

/// The client protocols a test sends with.
const PROTOCOLS: [&str; 3] = ["HTTP/1.1", "HTTP/2", "HTTP/3"];

/// The same request sent as HTTP/1.1 and HTTP/2 over TLS and as HTTP/3.
async fn each_protocol(
    addr: SocketAddr,
    certs: &TestCerts,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<Reply> {
    let mut replies = Vec::new();
    for protocol in PROTOCOLS {
        replies.push(send(protocol, addr, certs, method, path, headers, body).await);
    }
    replies
}

/// One request over a new connection of `protocol` (one of [`PROTOCOLS`]).
async fn send(
    protocol: &'static str,
    addr: SocketAddr,
    certs: &TestCerts,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut builder = Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"));
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = builder.body(()).unwrap();
    let alpn: &[u8] = match protocol {
        "HTTP/1.1" => b"http/1.1",
        "HTTP/2" => b"h2",
        _ => {
            let mut h3 = h3_support::Client::connect(addr, certs).await;
            let (response, text) = h3.exchange(request, body).await;
            return Reply {
                protocol,
                status: response.status().as_u16(),
                headers: response.headers().clone(),
                body: text,
            };
        }
    };
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = certs
        .connector(&[alpn])
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap();
    if protocol == "HTTP/1.1" {
        return h1_exchange(tls, method, path, headers, body).await;
    }
    let client = h2_client(tls).await;
    let (response, bytes, _) = h2_exchange(&client, request, body).await;
    Reply {
        protocol,
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// One HTTP/1.1 exchange on `io` (closed after it), read with hyper.
async fn h1_exchange<T>(
    io: T,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::{BodyExt as _, Full};
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
            .await
            .unwrap();
    tokio::spawn(connection);
    let mut builder = Request::builder().method(method).uri(path);
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        builder = builder.header("host", "localhost");
    }
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = builder
        .body(Full::new(Bytes::copy_from_slice(body)))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let (parts, incoming) = response.into_parts();
    let bytes = incoming.collect().await.unwrap().to_bytes();
    Reply {
        protocol: "HTTP/1.1",
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// Starts the echo upstream, the test CA and a proxy.
async fn setup(middleware: &str, routes: &str) -> (Echo, TestCerts, Proxy) {
    let echo = Echo::start("e").await;
    let certs = TestCerts::generate();
    let proxy = proxy(&certs, echo.addr, middleware, routes);
    (echo, certs, proxy)
}

/// The body of `GET path` on `proxy`'s admin listener.
async fn admin_get(proxy: &Proxy, path: &str) -> String {
    let mut conn = TcpStream::connect(proxy.admin()).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut conn, &mut out)
        .await
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// What `/config` shows.
async fn config_doc(proxy: &Proxy) -> String {
    admin_get(proxy, "/config").await
}
