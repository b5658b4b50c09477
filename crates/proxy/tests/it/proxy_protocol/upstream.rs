//! `upstreams.NAME.proxy_protocol`: each connection to such an upstream
//! begins with a header naming the client it was opened for, and is
//! reused by that client only; HTTP/1.1, HTTP/2 and HTTP/3 clients alike.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use bytes::{Buf, BytesMut};
use proxy::wire::proxy_protocol::{self, Versions};
use testkit::TestCerts;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::connect_from;
use crate::{h3_support, support};

/// An upstream that reads a PROXY header at the start of each connection
/// and answers each request with what it said: `version`, `source`,
/// `destination`, and the connection's number.
async fn header_echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicU64::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let number = connections.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::spawn(serve(stream, number));
        }
    });
    addr
}

async fn serve(mut stream: TcpStream, number: u64) {
    let mut buf = BytesMut::new();
    let header = loop {
        match proxy_protocol::parse(&buf, Versions::Any) {
            Ok(Some(header)) => break header,
            Ok(None) => {}
            Err(invalid) => panic!("the proxy sent {}", invalid.detail()),
        }
        if stream.read_buf(&mut buf).await.unwrap_or(0) == 0 {
            return;
        }
    };
    buf.advance(header.len);
    let (source, destination) = header.addresses.expect("a header naming the client");
    let limits = http1::Limits {
        max_head: 64 * 1024,
        max_body: 0,
    };
    loop {
        let Some(head) = support::next_request_head(&mut stream, &mut buf, &limits).await else {
            return;
        };
        buf.advance(head.len);
        let body = format!(
            "version: {}\nsource: {source}\ndestination: {destination}\nconnection: {number}\n",
            header.version
        );
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn field<'a>(body: &'a str, name: &str) -> &'a str {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
        .unwrap_or_else(|| panic!("no {name} in {body}"))
}

fn upstreams(v1: SocketAddr, v2: SocketAddr) -> String {
    format!(
        "upstreams:\n  one:\n    hosts: [\"http://{v1}\"]\n    proxy_protocol: v1\n  two:\n    hosts: [\"http://{v2}\"]\n    proxy_protocol: v2\nroutes:\n  - {{ path: /one, upstream: one }}\n  - {{ path: /two, upstream: two }}\n"
    )
}

/// A GET on a keep-alive HTTP/1.1 connection: the answer's body.
async fn get(stream: &mut TcpStream, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nhost: test\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let text = support::read_head(stream).await;
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap()
        .parse()
        .unwrap();
    let mut body = rest.as_bytes().to_vec();
    while body.len() < length {
        let mut more = [0u8; 1024];
        let n = stream.read(&mut more).await.unwrap();
        assert!(n > 0, "closed mid-body");
        body.extend_from_slice(&more[..n]);
    }
    String::from_utf8(body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_gets_connections_of_its_own_that_name_it() {
    let (v1, v2) = (header_echo().await, header_echo().await);
    let proxy = support::Proxy::start(&upstreams(v1, v2));
    let listener = proxy.addr();
    let mut alice = connect_from("127.0.0.2", listener).await;
    let mut bob = connect_from("127.0.0.3", listener).await;
    let alice_addr = alice.local_addr().unwrap().to_string();
    let first = get(&mut alice, "/two").await;
    assert_eq!(field(&first, "version"), "2");
    assert_eq!(field(&first, "source"), alice_addr);
    assert_eq!(field(&first, "destination"), listener.to_string());
    // Her next request reuses her connection; Bob's never does.
    let again = get(&mut alice, "/two").await;
    assert_eq!(field(&again, "connection"), field(&first, "connection"));
    let his = get(&mut bob, "/two").await;
    assert_eq!(field(&his, "source"), bob.local_addr().unwrap().to_string());
    assert_ne!(field(&his, "connection"), field(&first, "connection"));
    let third = get(&mut alice, "/two").await;
    assert_eq!(field(&third, "connection"), field(&first, "connection"));
    let line = get(&mut alice, "/one").await;
    assert_eq!(field(&line, "version"), "1");
    assert_eq!(field(&line, "source"), alice_addr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_and_http3_clients_are_named_too() {
    let certs = TestCerts::generate();
    let (v1, v2) = (header_echo().await, header_echo().await);
    let proxy = h3_support::proxy(&certs, "", &upstreams(v1, v2));
    // HTTP/2 over TLS.
    let tcp = connect_from("127.0.0.2", proxy.addr()).await;
    let client = tcp.local_addr().unwrap();
    let name = tls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = certs.connector(&[b"h2"]).connect(name, tcp).await.unwrap();
    let sender = support::h2_client(tls).await;
    for path in ["/one", "/two"] {
        let request = http::Request::get(format!("https://localhost{path}"))
            .body(())
            .unwrap();
        let (response, body, _) = support::h2_exchange(&sender, request, b"").await;
        assert_eq!(response.status(), 200);
        let body = String::from_utf8(body).unwrap();
        assert_eq!(field(&body, "source"), client.to_string(), "{body}");
    }
    // HTTP/3: its UDP address.
    let mut h3 = h3_support::Client::connect(proxy.addr(), &certs).await;
    let (response, body) = h3.get("/two").await;
    assert_eq!(response.status(), 200);
    let source: SocketAddr = field(&body, "source").parse().unwrap();
    assert_eq!(source.ip().to_string(), "127.0.0.1", "{body}");
    assert_ne!(source.port(), 0, "{body}");
}
