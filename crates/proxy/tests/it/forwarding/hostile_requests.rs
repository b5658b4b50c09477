//! Requests the proxy refuses before any upstream sees them: smuggling
//! vectors (400) and the limits (413, 431, 408).

use std::sync::atomic::Ordering;

use crate::support::{one_upstream, Echo, Proxy};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smuggling_vectors_get_400_and_never_reach_the_upstream() {
    let echo = Echo::start("e").await;
    let proxy = Proxy::start(&one_upstream(echo.addr, ""));
    let vectors: [&[u8]; 9] = [
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3, 3\r\n\r\nabc",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: +3\r\n\r\nabc",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\nX: y\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX: a\rb\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    ];
    for vector in vectors {
        let mut conn = proxy.conn().await;
        conn.send(vector).await;
        let response = conn.read_response(false).await;
        assert_eq!(response.status, 400, "{}", String::from_utf8_lossy(vector));
        assert_eq!(response.header("connection"), Some("close"));
        assert!(conn.is_closed_by_peer().await);
    }
    assert_eq!(echo.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_answer_413_431_and_408() {
    let echo = Echo::start("e").await;
    let proxy = Proxy::start(&format!(
        "{}limits: {{ max_body_bytes: 1KiB, max_header_bytes: 2KiB, header_read_timeout: 300ms }}\n",
        one_upstream(echo.addr, "")
    ));
    let mut conn = proxy.conn().await;
    let response = conn.request("POST", "/", &[], &[b'x'; 2048]).await;
    assert_eq!(response.status, 413);
    let mut conn = proxy.conn().await;
    let long = format!("X-Long: {}", "a".repeat(4096));
    assert_eq!(conn.request("GET", "/", &[&long], b"").await.status, 431);
    let mut conn = proxy.conn().await;
    conn.send("GET / HTTP/1.1\r\nHost: slow\r\n").await;
    assert_eq!(conn.read_response(false).await.status, 408);
    assert_eq!(echo.requests.load(Ordering::SeqCst), 0);
}
