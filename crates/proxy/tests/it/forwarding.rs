//! The proxy over real loopback sockets: routing, header rewriting,
//! streaming, pipelining, upstream failures, smuggling and the admin API.

use crate::support;

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use backends::Backend;
use support::{assert_tunnel_echoes, echo, one_upstream, read_head, Echo, Proxy};
use testkit::{closed_port, serve_with, test_options, Behaviour, FakeServer, RawConn};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_by_path_method_and_host() {
    let pets = Echo::start("pets").await;
    let other = Echo::start("other").await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  pets: {{ hosts: [\"http://{}\"] }}\n  other: {{ hosts: [\"http://{}\"] }}\nroutes:\n\
         - {{ path: /v1/pets, methods: [GET, POST], upstream: pets }}\n\
         - {{ path: /v1/pets/special, match: exact, upstream: other }}\n\
         - {{ path: /v1, host: api.example, upstream: other }}\n",
        pets.addr, other.addr
    ));
    let mut conn = proxy.conn().await;
    let cases = [
        ("/v1/pets", "pets"),
        ("/v1/pets/1?x=y", "pets"),
        ("/v1/pets/special", "other"),
    ];
    for (path, upstream) in cases {
        let response = conn.get(path).await;
        assert_eq!(response.status, 200, "{path}");
        assert!(
            response
                .text()
                .starts_with(&format!("upstream: {upstream}\n")),
            "{path}: {}",
            response.text()
        );
    }
    conn.send("GET /v1/x HTTP/1.1\r\nHost: API.example:8080\r\n\r\n")
        .await;
    let response = conn.read_response(false).await;
    assert!(
        response.text().starts_with("upstream: other"),
        "{}",
        response.text()
    );

    let response = conn.get("/v1/petstore").await;
    assert_eq!(response.status, 404);
    assert_eq!(
        response.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(response.json()["status"], 404);
    let response = conn.request("DELETE", "/v1/pets/1", &[], b"").await;
    assert_eq!(response.status, 405);
    assert_eq!(response.header("allow"), Some("GET, POST"));
    // The connection survives the errors.
    assert_eq!(conn.get("/v1/pets").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewrites_hop_by_hop_and_forwarded_headers() {
    let echo = Echo::start("e").await;
    let proxy = Proxy::start(&one_upstream(echo.addr, ""));
    let mut conn = proxy.conn().await;
    let response = conn
        .request(
            "GET",
            "/h?q=1",
            &[
                "Connection: keep-alive, X-Private",
                "X-Private: secret",
                "Keep-Alive: timeout=5",
                "TE: trailers",
                "X-Forwarded-For: 6.6.6.6",
                "X-Kept: yes",
            ],
            b"",
        )
        .await;
    let seen = response.text();
    assert!(seen.contains("GET /h?q=1 HTTP/1.1\r\n"), "{seen}");
    assert!(seen.contains("X-Kept: yes\r\n"));
    assert!(seen.contains("x-forwarded-for: 127.0.0.1\r\n"), "{seen}");
    assert!(seen.contains("x-forwarded-proto: http\r\n"));
    for gone in ["X-Private", "Keep-Alive", "TE:", "6.6.6.6", "Connection"] {
        assert!(!seen.contains(gone), "{gone} forwarded: {seen}");
    }
    // The upstream's hop-by-hop fields do not reach the client either.
    assert_eq!(response.header("connection"), None);
    assert_eq!(response.header("content-type"), Some("text/plain"));

    drop(proxy);
    let trusting = Proxy::start(&format!(
        "{}forwarded: {{ trust: true }}\n",
        one_upstream(echo.addr, "    host_header: backend.internal\n")
    ));
    let mut conn = trusting.conn().await;
    let seen = conn
        .request("GET", "/", &["X-Forwarded-For: 6.6.6.6"], b"")
        .await
        .text();
    assert!(
        seen.contains("x-forwarded-for: 6.6.6.6, 127.0.0.1\r\n"),
        "{seen}"
    );
    assert!(seen.contains("host: backend.internal\r\n"), "{seen}");
}

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
    // Either nothing or a response cut short: never a complete 200.
    if let Some(head_end) = text.find("\r\n\r\n") {
        let length: usize = text
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(|v| v.trim().parse().unwrap())
            })
            .unwrap_or(usize::MAX);
        assert!(seen.len() - head_end - 4 < length, "{text}");
    }
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
async fn admin_api_reports_health_metrics_and_config() {
    let echo = Echo::start("e").await;
    let proxy = Proxy::start(&one_upstream(echo.addr, ""));
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/a").await.status, 200);
    let admin = proxy.admin();
    let health = RawConn::connect(admin).await.get("/health").await;
    assert_eq!(health.status, 200);
    assert_eq!(
        RawConn::connect(admin).await.get("/ready").await.status,
        200
    );
    let metrics = RawConn::connect(admin).await.get("/metrics").await.text();
    for expected in [
        "sluice_requests_total{route=\"/\",status=\"200\"} 1",
        "sluice_upstream_response_seconds_count{upstream=\"echo\"} 1",
        "sluice_open_connections 1",
        "sluice_pool_idle_connections{upstream=\"echo\"} 1",
        "sluice_upstream_healthy_hosts{upstream=\"echo\"} 1",
    ] {
        assert!(metrics.contains(expected), "{expected} missing:\n{metrics}");
    }
    let config = RawConn::connect(admin).await.get("/config").await.json();
    assert_eq!(config["upstreams"]["echo"]["retries"], 2);
    assert_eq!(config["limits"]["max_body_bytes"], 10 * 1024 * 1024);
    assert_eq!(RawConn::connect(admin).await.get("/nope").await.status, 404);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_multi_thread_runtime_serves_the_same() {
    let echo = Echo::start("e").await;
    let proxy = Proxy::start_with(
        "workers: 2\nruntime: multi_thread",
        &one_upstream(echo.addr, ""),
    );
    let mut conns = Vec::new();
    for _ in 0..8 {
        conns.push(proxy.conn().await);
    }
    for round in 0..3 {
        for conn in &mut conns {
            let response = conn.get(&format!("/r{round}")).await;
            assert_eq!(response.status, 200);
            assert!(response.text().contains(&format!("GET /r{round} HTTP/1.1")));
        }
    }
    assert_eq!(echo.requests.load(Ordering::SeqCst), 24);
    let config = RawConn::connect(proxy.admin())
        .await
        .get("/config")
        .await
        .json();
    assert_eq!(config["runtime"], "multi_thread");
}
