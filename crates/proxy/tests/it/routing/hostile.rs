//! Routing against hostile input: a redirect or rewrite never writes a
//! line break into a header nor a path that escapes normalisation, a
//! regex route costs time linear in the request, and a mirror that
//! hangs holds at most its `max_in_flight` connections and never holds
//! back the client's answer.

use std::{
    net::SocketAddr,
    path::Path,
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    time::Duration,
};

use tokio::{io::AsyncReadExt, net::TcpListener};

use crate::support::{Echo, Proxy};

fn upstreams(a: SocketAddr) -> String {
    format!("upstreams:\n  a: {{ hosts: [\"http://{a}\"] }}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_and_rewrites_keep_line_breaks_and_dot_segments_out() {
    let echo = Echo::start("a").await;
    let proxy = Proxy::start(&format!(
        "{}routes:\n  - {{ path: /go, redirect: {{ hostname: example.org }} }}\n  - {{ path: /api, rewrite: {{ path: {{ prefix: /internal }} }}, upstream: a }}\n  - {{ path: /, upstream: a }}\n",
        upstreams(echo.addr)
    ));
    let mut conn = proxy.conn().await;
    // Escaped line breaks stay escaped: no field is added to the answer.
    let answer = conn.get("/go/x?next=%0D%0ASet-Cookie:%20stolen=1").await;
    assert_eq!(answer.status, 302);
    assert_eq!(
        answer.header("location"),
        Some("http://example.org/go/x?next=%0D%0ASet-Cookie:%20stolen=1")
    );
    assert!(answer.header("set-cookie").is_none());
    // A raw one never gets that far: the request is refused.
    conn.send("GET /go/x?a=\r\nSet-Cookie: x HTTP/1.1\r\nHost: test\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 400);
    // A rewrite starts from the normal path: `..` cannot climb out of
    // the route's prefix into another route's.
    let mut conn = proxy.conn().await;
    let text = conn.get("/api/x").await.text();
    assert!(text.contains("GET /internal/x HTTP/1.1"), "{text}");
    let text = conn.get("/api/%2e%2e/secret").await.text();
    assert!(
        text.contains("GET /secret HTTP/1.1"),
        "normalised before routing: {text}"
    );
    let text = conn.get("/api/x/../../secret").await.text();
    assert!(text.contains("GET /secret HTTP/1.1"), "{text}");
    assert_eq!(conn.get("/api/..%2f..%2fsecret").await.status, 400);
}

#[test]
fn rewrites_and_redirects_that_are_not_in_normal_form_fail_the_load() {
    for (bad, key) in [
        (
            "{ path: /a, rewrite: { path: { prefix: /b/../c } }, upstream: a }",
            "rewrite.path",
        ),
        (
            "{ path: /a, rewrite: { path: { full: 'x' } }, upstream: a }",
            "rewrite.path",
        ),
        (
            "{ path: /a, rewrite: { hostname: \"h\\r\\nx: y\" }, upstream: a }",
            "rewrite.hostname",
        ),
        (
            "{ path: /a, redirect: { hostname: \"evil.example\\r\\nSet-Cookie: x\" } }",
            "redirect.hostname",
        ),
        (
            "{ path: /a, redirect: { path: { full: '/%0d%0a' } } }",
            "redirect.path",
        ),
    ] {
        let yaml = format!(
            "listeners: [{{ address: 127.0.0.1:0 }}]\n{}routes:\n  - {bad}\n",
            upstreams("127.0.0.1:9".parse().unwrap())
        );
        let config = proxy::config::parse(&yaml, Path::new("t.yaml"), |_| None).unwrap();
        let err = proxy::check(&config).unwrap_err().to_string();
        assert!(
            err.contains("routes[0]") && err.contains(key),
            "{bad}: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regex_route_costs_the_request_linear_time() {
    let echo = Echo::start("a").await;
    let proxy = Proxy::start_with(
        "workers: 1\nlimits: { max_header_bytes: 64KiB }",
        &format!(
            "{}routes:\n  - {{ path: '/(a|aa)*(a|aa)*c', match: regex, upstream: a }}\n  - {{ path: /, headers: [{{ name: x-id, regex: '(x+x+)+y' }}], upstream: a }}\n",
            upstreams(echo.addr)
        ),
    );
    // Inputs that take a backtracking engine exponential time: answered
    // (404) as soon as any request, whatever their length.
    let path = format!("/{}", "a".repeat(30_000));
    let value = "x".repeat(30_000);
    let mut conn = proxy.conn().await;
    let head = format!("GET {path} HTTP/1.1\r\nHost: test\r\nx-id: {value}\r\n\r\n");
    let answered = tokio::time::timeout(Duration::from_secs(20), async {
        conn.send(head).await;
        conn.read_response(false).await
    })
    .await
    .expect("a backtracking engine would still be at it");
    assert_eq!(answered.status, 404);
}

/// An upstream that takes requests and never answers, counting the
/// connections it has open and the most it had at once.
struct Hanging {
    addr: SocketAddr,
    open: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl Hanging {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (open, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let hanging = Self {
            addr: listener.local_addr().unwrap(),
            open: Arc::clone(&open),
            most: Arc::clone(&most),
        };
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let now = open.fetch_add(1, SeqCst) + 1;
                most.fetch_max(now, SeqCst);
                let open = Arc::clone(&open);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while stream.read(&mut buf).await.is_ok_and(|n| n > 0) {}
                    open.fetch_sub(1, SeqCst);
                });
            }
        });
        hanging
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_that_hangs_holds_its_limit_of_connections_and_delays_nobody() {
    let echo = Echo::start("a").await;
    let hanging = Hanging::start().await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  a: {{ hosts: [\"http://{}\"] }}\n  shadow:\n    hosts: [\"http://{}\"]\n    timeouts: {{ request: 30s }}\nroutes:\n  - {{ path: /, upstream: a, mirror: [{{ upstream: shadow, max_in_flight: 4 }}] }}\n",
        echo.addr, hanging.addr
    ));
    let mut conn = proxy.conn().await;
    // Each answer comes while the copies wait out their 30 s.
    for i in 0..50 {
        let answer = tokio::time::timeout(Duration::from_secs(5), conn.get(&format!("/{i}")))
            .await
            .expect("the client's answer is not held back by its copy");
        assert_eq!(answer.status, 200);
    }
    let four = || async { hanging.open.load(SeqCst) == 4 };
    assert!(crate::support::live::until(Duration::from_secs(10), four).await);
    assert_eq!(
        hanging.most.load(SeqCst),
        4,
        "no more than max_in_flight copies out"
    );
    let metrics = crate::support::live::admin_get(proxy.admin(), "/metrics")
        .await
        .text();
    assert!(
        metrics.contains("sluice_mirror_requests_total{result=\"dropped\"} 46"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_end_with_their_upstreams_timeout_and_are_counted() {
    let echo = Echo::start("a").await;
    let hanging = Hanging::start().await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  a: {{ hosts: [\"http://{}\"] }}\n  shadow:\n    hosts: [\"http://{}\"]\n    timeouts: {{ connect: 100ms, request: 200ms }}\nroutes:\n  - {{ path: /, upstream: a, mirror: [{{ upstream: shadow, max_in_flight: 2 }}] }}\n",
        echo.addr, hanging.addr
    ));
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/").await.status, 200);
    // The copy gives up after its timeout and closes its connection.
    let closed = || async { hanging.most.load(SeqCst) == 1 && hanging.open.load(SeqCst) == 0 };
    assert!(crate::support::live::until(Duration::from_secs(10), closed).await);
    let metrics = crate::support::live::admin_get(proxy.admin(), "/metrics")
        .await
        .text();
    assert!(
        metrics.contains("sluice_mirror_requests_total{result=\"failed\"} 1"),
        "{metrics}"
    );
}
