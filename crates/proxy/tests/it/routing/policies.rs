//! A route's own timeouts and retries over its upstream's, for each
//! client protocol pair's loop (`exchange::run`): `retries` replaces the
//! upstream's attempts and statuses, `timeouts.backend_request` one
//! attempt's wait, `timeouts.request` the wait of all of them.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering::SeqCst},
        Arc,
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

use crate::support::{h2_client, h2_exchange, Proxy};

/// An upstream that answers its first `failing` requests 503 and every
/// request after `delay`; counts them.
async fn upstream(failing: u64, delay: Duration) -> (SocketAddr, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    buf.drain(..end);
                    let n = seen.fetch_add(1, SeqCst);
                    tokio::time::sleep(delay).await;
                    let status = if n < failing { "503 Busy" } else { "200 OK" };
                    let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 2\r\n\r\nok");
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, count)
}

/// The status an HTTP/1.1 and an HTTP/2 client get for `GET path`.
async fn both(proxy: &Proxy, path: &str) -> [u16; 2] {
    let h1 = proxy.conn().await.get(path).await.status;
    let send = h2_client(tokio::net::TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = http::Request::get(format!("http://test{path}"))
        .body(())
        .unwrap();
    let (response, _, _) = h2_exchange(&send, request, b"").await;
    [h1, response.status().as_u16()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_retries_as_it_says_not_as_its_upstream_does() {
    // Two 503s per pair of clients: the route's 3 attempts get past them,
    // the upstream's own (none on 503) would not.
    let (addr, count) = upstream(2, Duration::ZERO).await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  a: {{ hosts: [\"http://{addr}\"], retries: 0 }}\nroutes:\n  - {{ path: /retried, upstream: a, retries: {{ attempts: 3, on: [503], backoff: 1ms }} }}\n  - {{ path: /, upstream: a }}\n"
    ));
    assert_eq!(proxy.conn().await.get("/retried").await.status, 200);
    assert_eq!(count.load(SeqCst), 3, "two 503s, then the answer");
    let (addr, _) = upstream(1, Duration::ZERO).await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  a: {{ hosts: [\"http://{addr}\"], retries: 0 }}\nroutes:\n  - {{ path: /, upstream: a }}\n"
    ));
    assert_eq!(
        proxy.conn().await.get("/").await.status,
        503,
        "the upstream's rules"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routes_timeouts_bound_an_attempt_and_all_of_them() {
    let (addr, _) = upstream(0, Duration::from_millis(400)).await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  a: {{ hosts: [\"http://{addr}\"], timeouts: {{ request: 10s }} }}\nroutes:\n  - {{ path: /attempt, upstream: a, timeouts: {{ backend_request: 100ms }} }}\n  - {{ path: /whole, upstream: a, timeouts: {{ request: 100ms }} }}\n  - {{ path: /off, upstream: a, timeouts: {{ request: 0s, backend_request: 0s }} }}\n"
    ));
    assert_eq!(both(&proxy, "/attempt").await, [504, 504]);
    assert_eq!(both(&proxy, "/whole").await, [504, 504]);
    assert_eq!(both(&proxy, "/off").await, [200, 200]);
    // Retries of a slow upstream stop at the route's deadline.
    let (addr, count) = upstream(100, Duration::from_millis(50)).await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  a: {{ hosts: [\"http://{addr}\"] }}\nroutes:\n  - {{ path: /, upstream: a, timeouts: {{ request: 120ms }}, retries: {{ attempts: 10, on: [503], backoff: 1ms }} }}\n"
    ));
    assert_eq!(proxy.conn().await.get("/").await.status, 504);
    let attempts = count.load(SeqCst);
    assert!(
        (2..10).contains(&attempts),
        "cut short by the deadline: {attempts}"
    );
}
