//! The admin `/metrics` text, checked by Prometheus's own parser and
//! linter (`promtool check metrics`) after traffic that fills every kind
//! of family: two upstream hosts, two `metrics` handlers (one family from
//! two instances), a local and a Redis `rate_limit` that refuse, and h2c.
//!
//! Without promtool (Debian package `prometheus`) the test prints a SKIP
//! line; `SLUICE_REQUIRE_PROMTOOL=1` (set by .ci/run when it installed
//! it) makes that a failure.

use crate::support;

use std::{io::Write as _, process::Command};

use http::Request;
use support::{h2_client, h2_exchange, Echo, Proxy};
use testkit::{RawConn, RedisServer};
use tokio::net::TcpStream;

/// Whether `promtool` runs; else a SKIP line for `test` (or a panic when
/// it is required).
fn promtool(test: &str) -> bool {
    let found = Command::new("promtool").arg("--version").output().is_ok();
    if !found {
        testkit::skip(
            test,
            testkit::Need::Promtool,
            "promtool is not installed (apt-get install prometheus)",
        );
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_accepts_the_metrics_after_traffic() {
    let test = "promtool_accepts_the_metrics_after_traffic";
    if !promtool(test) {
        return;
    }
    let (a, b) = (Echo::start("a").await, Echo::start("b").await);
    // The Redis limiter when redis-server is there (RedisServer says SKIP
    // otherwise); the rest of the check runs either way.
    let redis = RedisServer::start(test);
    let shared = redis.as_ref().map_or(String::new(), |redis| {
        format!(
            "  shared: {{ rate_limit: {{ rate: 1/m, burst: 1, store: redis, redis: {{ url: \"{}\" }} }} }}\n",
            redis.url()
        )
    });
    let proxy = Proxy::start_with(
        "workers: 2",
        &format!(
            "upstreams:\n  two:\n    hosts: [\"http://{}\", \"http://{}\"]\n\
             middleware:\n  local: {{ rate_limit: {{ rate: 1/m, burst: 1 }} }}\n  timings: {{ metrics: {{}} }}\n{shared}\
             routes:\n\
             \x20 - {{ path: /limited, chain: [metrics, local], upstream: two }}\n\
             \x20 - {{ path: /shared, chain: [timings{}], upstream: two }}\n\
             \x20 - {{ path: /, chain: [metrics], upstream: two }}\n",
            a.addr,
            b.addr,
            if redis.is_some() { ", shared" } else { "" }
        ),
    );
    let mut conn = proxy.conn().await;
    for path in ["/", "/", "/missing/x", "/shared"] {
        conn.get(path).await;
    }
    // Burst 1: the second request Redis decides is limited. Until the
    // proxy's connection to Redis is up the limiter decides without it, so
    // this asks until the first 429 (the one `limited` counted below).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while conn.get("/shared").await.status != 429 && redis.is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "Redis never limited /shared"
        );
    }
    assert_eq!(conn.get("/limited").await.status, 200);
    assert_eq!(conn.get("/limited").await.status, 429);
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = Request::get("http://svc.test/h2").body(()).unwrap();
    let (response, _, _) = h2_exchange(&sender, request, b"").await;
    assert_eq!(response.status(), 200);

    let text = RawConn::connect(proxy.admin())
        .await
        .get("/metrics")
        .await
        .text();
    for series in [
        "sluice_requests_total{route=\"/limited\",status=\"429\"} 1",
        "sluice_h2_streams_total 1",
        "sluice_upstream_host_requests_total{upstream=\"two\"",
        "sluice_http_request_duration_seconds_count{route=\"/shared\"",
        "sluice_http_request_duration_seconds_count{route=\"/\"",
    ] {
        assert!(text.contains(series), "no {series} in\n{text}");
    }
    if redis.is_some() {
        assert!(
            text.contains("sluice_rate_limit_store_decisions_total{middleware=\"shared\",result=\"limited\"} 1"),
            "{text}"
        );
    }
    let help = "# HELP sluice_http_request_duration_seconds ";
    assert_eq!(text.matches(help).count(), 1, "{text}");

    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics: {}\n{}{}\n--- the text:\n{text}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
