//! Bodies and messages as they come: large bodies both ways, pipelining,
//! `Expect: 100-continue` and HEAD, WebSocket tunnels, and answers that
//! are not held back.

use std::{sync::Arc, time::Duration};

use backends::Backend;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use crate::support::{assert_tunnel_echoes, one_upstream, read_head, Echo, Proxy};
use testkit::{serve_with, test_options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_large_bodies_both_ways() {
    const SIZE: usize = 32 << 20;
    let echo = Echo::start("e").await;
    let options = backends::ServeOptions {
        static_size: SIZE,
        ..test_options()
    };
    let big = serve_with(Backend::Static, options);
    let proxy = Proxy::start(&format!(
        "upstreams:\n  echo: {{ hosts: [\"http://{}\"] }}\n  big: {{ hosts: [\"http://{}\"] }}\nroutes:\n  - {{ path: /up, upstream: echo }}\n  - {{ path: /down, upstream: big }}\nlimits: {{ max_body_bytes: 64MiB }}\n",
        echo.addr,
        big.addr()
    ));
    // Upload, chunked, in 1 MiB chunks written one at a time.
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    stream
        .write_all(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..SIZE >> 20 {
        stream.write_all(b"100000\r\n").await.unwrap();
        stream.write_all(&chunk).await.unwrap();
        stream.write_all(b"\r\n").await.unwrap();
    }
    stream.write_all(b"0\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    while !String::from_utf8_lossy(&answer).contains("body-bytes: ")
        || !answer.ends_with(SIZE.to_string().as_bytes())
    {
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&answer).contains("transfer-encoding: chunked\r\n"));

    // Download through the proxy.
    let mut conn = proxy.conn().await;
    let response = conn.get("/down").await;
    assert_eq!(response.status, 200);
    assert_eq!(response.body.len(), SIZE);
    big.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order() {
    let echo = Echo::start("e").await;
    let proxy = Proxy::start(&one_upstream(echo.addr, ""));
    let mut conn = proxy.conn().await;
    let mut batch = Vec::new();
    for i in 0..20 {
        batch.extend_from_slice(format!("GET /{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    }
    batch.extend_from_slice(b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabcGET /last HTTP/1.1\r\nHost: t\r\n\r\n");
    conn.send(&batch).await;
    for i in 0..20 {
        let text = conn.read_response(false).await.text();
        assert!(text.contains(&format!("GET /{i} HTTP/1.1")), "{i}: {text}");
    }
    assert!(conn
        .read_response(false)
        .await
        .text()
        .contains("body-bytes: 3"));
    assert!(conn
        .read_response(false)
        .await
        .text()
        .contains("GET /last "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_continue_and_head() {
    let echo = Echo::start("e").await;
    let proxy = Proxy::start(&one_upstream(echo.addr, ""));
    let mut conn = proxy.conn().await;
    conn.send("POST /c HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        .await;
    let interim = conn.read_response(true).await;
    assert_eq!(interim.status, 100);
    conn.send("body").await;
    let response = conn.read_response(false).await;
    assert!(response.text().contains("body-bytes: 4"));
    assert!(!response.text().to_ascii_lowercase().contains("expect"));
    let head = conn.request("HEAD", "/h", &[], b"").await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(conn.get("/after-head").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_upgrades_are_tunnelled() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let mut seen = Vec::new();
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            seen.extend_from_slice(&buf[..n]);
        }
        assert!(String::from_utf8_lossy(&seen).contains("Upgrade: websocket"));
        stream
            .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
            .await
            .unwrap();
        // Echo frames (any bytes) back, upper-cased.
        loop {
            let n = stream.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            let upper = buf[..n].to_ascii_uppercase();
            stream.write_all(&upper).await.unwrap();
        }
    });
    let proxy = Proxy::start(&one_upstream(addr, ""));
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    stream
        .write_all(
            b"GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        )
        .await
        .unwrap();
    let head = read_head(&mut stream).await.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: websocket") && head.contains("connection: upgrade"));
    assert_tunnel_echoes(&mut stream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_pipelined_request_does_not_hold_back_earlier_answers() {
    // The upstream answers /2 only once the client has the answer to /1:
    // a proxy that held the first back would never deliver either.
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let released = Arc::new(tokio::sync::Mutex::new(Some(released)));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let released = Arc::clone(&released);
            tokio::spawn(async move {
                let mut seen = Vec::new();
                loop {
                    let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
                        if stream.read_buf(&mut seen).await.unwrap_or(0) == 0 {
                            return;
                        }
                        continue;
                    };
                    let head: Vec<u8> = seen.drain(..end + 4).collect();
                    if head.starts_with(b"GET /2 ") {
                        if let Some(released) = released.lock().await.take() {
                            let _ = released.await;
                        }
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if stream.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let proxy = Proxy::start(&one_upstream(addr, ""));
    let mut conn = proxy.conn().await;
    conn.send("GET /1 HTTP/1.1\r\nHost: t\r\n\r\nGET /2 HTTP/1.1\r\nHost: t\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 200);
    release.send(()).unwrap();
    assert_eq!(conn.read_response(false).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dribbling_response_body_reaches_the_client_as_it_comes() {
    // Server-sent events and long polls: what the upstream has sent must
    // not wait in the proxy for the rest of the body.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // The rest comes only once the client has the first event.
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let _ = stream.read(&mut buf).await.unwrap();
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\nfirst\n\r\n")
            .await
            .unwrap();
        let _ = released.await;
        stream.write_all(b"5\r\nlast\n\r\n0\r\n\r\n").await.unwrap();
    });
    let proxy = Proxy::start(&one_upstream(addr, ""));
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    stream
        .write_all(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    let first = tokio::time::timeout(Duration::from_secs(10), async {
        while !String::from_utf8_lossy(&seen).contains("first") {
            assert_ne!(stream.read_buf(&mut seen).await.unwrap(), 0);
        }
    })
    .await;
    assert!(
        first.is_ok(),
        "the first event was held back: {:?}",
        String::from_utf8_lossy(&seen)
    );
    release.send(()).unwrap();
    while !String::from_utf8_lossy(&seen).ends_with("0\r\n\r\n") {
        assert_ne!(stream.read_buf(&mut seen).await.unwrap(), 0);
    }
    assert!(String::from_utf8_lossy(&seen).contains("last"));
}
