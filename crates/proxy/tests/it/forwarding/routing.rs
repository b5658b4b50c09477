//! Routing by path, method and host; header rewriting; the admin API's
//! view of the traffic; the multi-thread runtime serving the same.

use std::sync::atomic::Ordering;

use crate::support::{one_upstream, Echo, Proxy};
use testkit::RawConn;

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

/// HTTP/1.0 may leave Host out; the HTTP/1.1 request upstream must carry
/// one (RFC 9112 3.2): the host's `host:port` as configured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http10_request_without_host_reaches_the_upstream_with_one() {
    let echo = Echo::start("e").await;
    let proxy = Proxy::start(&one_upstream(echo.addr, ""));
    let mut conn = proxy.conn().await;
    conn.send("GET /old HTTP/1.0\r\n\r\n").await;
    let response = conn.read_response(false).await;
    assert_eq!(response.status, 200, "{}", response.text());
    let seen = response.text();
    assert!(seen.contains("GET /old HTTP/1.1\r\n"), "{seen}");
    assert_eq!(
        seen.matches("host: ").count() + seen.matches("Host: ").count(),
        1,
        "{seen}"
    );
    assert!(seen.contains(&format!("host: {}\r\n", echo.addr)), "{seen}");
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

/// The answers of the proxy's own to a request that reaches no route are
/// one rule for every client protocol (`session::local::Unrouted`): 404
/// and 405 (with the routes' methods as `Allow`) as problem+json, 400 for
/// a refused target, alike over HTTP/1.1 and HTTP/2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrouted_requests_get_the_same_answers_over_http11_and_http2() {
    use crate::support::{h2_client, h2_exchange};
    let pets = Echo::start("pets").await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  pets: {{ hosts: [\"http://{}\"] }}\nroutes:\n\
         - {{ path: /v1/pets, methods: [GET, POST], upstream: pets }}\n",
        pets.addr
    ));
    let cases = [
        ("GET", "/nowhere", 404, None),
        ("DELETE", "/v1/pets/1", 405, Some("GET, POST")),
        ("GET", "/v1/pets/..%2fadmin", 400, None),
    ];
    let mut conn = proxy.conn().await;
    let sender = h2_client(tokio::net::TcpStream::connect(proxy.addr()).await.unwrap()).await;
    for (method, path, status, allow) in cases {
        let h1 = conn.request(method, path, &[], b"").await;
        let request = http::Request::builder()
            .method(method)
            .uri(format!("http://pets.test{path}"))
            .body(())
            .unwrap();
        let (h2, body, _) = h2_exchange(&sender, request, b"").await;
        let h2_json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(h1.status, status, "HTTP/1.1 {method} {path}");
        assert_eq!(h2.status().as_u16(), status, "HTTP/2 {method} {path}");
        assert_eq!(h1.json(), h2_json, "{method} {path}: the same problem body");
        assert_eq!(h2_json["status"], status);
        let h2_allow = h2.headers().get("allow").map(|v| v.to_str().unwrap());
        assert_eq!(h1.header("allow"), allow, "HTTP/1.1 {method} {path}");
        assert_eq!(h2_allow, allow, "HTTP/2 {method} {path}");
        let h2_type = h2
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap());
        assert_eq!(h2_type, Some("application/problem+json"));
        assert_eq!(h1.header("content-type"), h2_type);
        if status == 400 {
            // A refused HTTP/1.1 request ends its connection.
            conn = proxy.conn().await;
        }
    }
    assert_eq!(pets.requests.load(Ordering::SeqCst), 0);
}
