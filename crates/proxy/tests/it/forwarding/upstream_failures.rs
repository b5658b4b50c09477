//! Upstreams that fail: a response broken off, garbage (502), silence
//! (504), dead hosts (502, then 503, then back) and connect failures
//! moving to the next host.

use std::{
    sync::{atomic::AtomicU64, Arc},
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use crate::support::{self, echo, one_upstream, Echo, Proxy};
use testkit::{closed_port, Behaviour, FakeServer, RawConn};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_breaking_off_closes_the_client_connection() {
    let fake = FakeServer::start(Behaviour::CloseMidResponse);
    let proxy = Proxy::start(&one_upstream(fake.addr(), ""));
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut seen)).await;
    assert!(closed.is_ok(), "the client connection hangs");
    let text = String::from_utf8_lossy(&seen);
    // What the upstream sent (its head and one byte of the two its
    // content-length promised) is passed on, then the connection closes:
    // a response cut short, never a complete 200 nor an empty answer.
    let head_end = text.find("\r\n\r\n").expect("a response head") + 4;
    let head = text[..head_end].to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 "), "{text}");
    assert!(head.contains("\r\ncontent-length: 2\r\n"), "{text}");
    assert_eq!(&seen[head_end..], b"o", "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_silent_upstreams_get_502_and_504() {
    let garbage = FakeServer::start(Behaviour::Malformed);
    let proxy = Proxy::start(&one_upstream(garbage.addr(), ""));
    let response = proxy.conn().await.get("/").await;
    assert_eq!(response.status, 502);
    assert_eq!(response.json()["status"], 502);
    drop(proxy);

    let silent = FakeServer::start(Behaviour::Silent);
    let proxy = Proxy::start(&one_upstream(
        silent.addr(),
        "    timeouts: { request: 300ms }\n",
    ));
    let response = proxy.conn().await.get("/").await;
    assert_eq!(response.status, 504);
    assert!(response.json()["detail"]
        .as_str()
        .unwrap()
        .contains("no response within"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_hosts_give_502_then_503_then_recover() {
    let addr = closed_port();
    let proxy = Proxy::start(&one_upstream(
        addr,
        // Without a panic threshold: the only host, ejected, gets no traffic
        // (tests/saturated.rs has it with the threshold).
        "    retries: 0\n    health: { failures: 1, backoff: 300ms, panic_threshold: 0 }\n",
    ));
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/").await.status, 502);
    let response = conn.get("/").await;
    assert_eq!(response.status, 503);
    assert!(response.json()["detail"]
        .as_str()
        .unwrap()
        .contains("no healthy host"));
    let ready = RawConn::connect(proxy.admin()).await.get("/ready").await;
    assert_eq!(ready.status, 503);

    // The host comes back; after the backoff it gets traffic again.
    let listener = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(echo(stream, "back", Arc::new(AtomicU64::new(0))));
        }
    });
    // 503 until the 300 ms backoff ends, then the host again.
    let back = support::live::until(Duration::from_secs(10), || async {
        proxy.conn().await.get("/").await.status == 200
    })
    .await;
    assert!(back, "the host never came back");
    assert!(conn.get("/").await.text().starts_with("upstream: back"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_failures_move_to_the_next_host() {
    let echo = Echo::start("alive").await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  two:\n    hosts: [\"http://{}\", \"http://{}\"]\n    retries: 1\nroutes:\n  - {{ path: /, upstream: two }}\n",
        closed_port(),
        echo.addr
    ));
    let mut conn = proxy.conn().await;
    for _ in 0..4 {
        assert_eq!(conn.get("/").await.status, 200);
    }
}
