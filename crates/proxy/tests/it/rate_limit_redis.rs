//! `rate_limit` with `store: redis`, against a real `redis-server` on a
//! free port (testkit::RedisServer): one count shared by two proxies,
//! `fail_open` and `fail_closed` while Redis is down and decisions again
//! once it is back, TLS to Redis, and the configuration's errors.

use crate::support;

use std::{
    path::Path,
    time::{Duration, Instant},
};

use support::{Echo, Proxy};
use testkit::{RawConn, RedisServer, TestCerts};

/// Routes `/a` and `/b` through handler `limit` (settings `settings`,
/// keyed on `X-Key`) and `/closed` through `closed` (the same, with
/// `on_failure: fail_closed`).
fn config(echo: std::net::SocketAddr, redis: &str) -> String {
    format!(
        "upstreams:\n  echo:\n    hosts: [\"http://{echo}\"]\n\
         middleware:\n\
         \x20 limit: {{ rate_limit: {{ key: \"header:x-key\", rate: 1/m, burst: 2, store: redis, redis: {{ {redis}, timeout: 500ms }} }} }}\n\
         \x20 closed: {{ rate_limit: {{ key: \"header:x-key\", rate: 1/m, burst: 1, store: redis, redis: {{ {redis}, timeout: 500ms, on_failure: fail_closed }} }} }}\n\
         routes:\n\
         \x20 - {{ path: /a, chain: [limit], upstream: echo }}\n\
         \x20 - {{ path: /b, chain: [limit], upstream: echo }}\n\
         \x20 - {{ path: /closed, chain: [closed], upstream: echo }}\n"
    )
}

pub(crate) async fn status(conn: &mut RawConn, path: &str, key: &str) -> u16 {
    let header = format!("X-Key: {key}");
    conn.request("GET", path, &[&header], b"").await.status
}

pub(crate) async fn metrics(proxy: &Proxy) -> String {
    RawConn::connect(proxy.admin())
        .await
        .get("/metrics")
        .await
        .text()
}

/// The value of the metric line that starts with `series`.
pub(crate) fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_share_one_count_and_answer_429_like_the_local_limiter() {
    let Some(redis) = RedisServer::start("two_proxies_share_one_count") else {
        return;
    };
    let echo = Echo::start("e").await;
    let yaml = config(echo.addr, &format!("url: \"{}\"", redis.url()));
    let (one, two) = (Proxy::start(&yaml), Proxy::start(&yaml));
    let (mut first, mut second) = (one.conn().await, two.conn().await);
    let before = Instant::now();

    // The burst of 2 is spent across both proxies and both routes.
    assert_eq!(status(&mut first, "/a", "k").await, 200);
    assert_eq!(status(&mut second, "/b", "k").await, 200);
    let limited = second.request("GET", "/a", &["X-Key: k"], b"").await;
    assert_eq!(limited.status, 429, "{}", limited.text());
    let taken = before.elapsed();
    // 1/m with a burst of 2 (GCRA): the third request may go 60 s after
    // the first, which was `taken` ago at most; whole seconds, rounded up.
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    let soonest = 60 - taken.as_secs().min(59);
    assert!((soonest..=60).contains(&retry), "{retry} after {taken:?}");
    assert_eq!(limited.header("ratelimit-limit"), Some("1"));
    assert_eq!(limited.header("ratelimit-remaining"), Some("0"));
    assert_eq!(
        limited.header("ratelimit-reset"),
        Some(retry.to_string().as_str())
    );
    assert_eq!(status(&mut first, "/a", "k").await, 429);
    // Another key is another count.
    assert_eq!(status(&mut first, "/a", "other").await, 200);

    // The key, under the handler's default prefix, expires by itself.
    // It expires when the bucket is full again: 120 s (2 × 60 s) after
    // the first request, at most `read` ago (PTTL rounds down a ms).
    let ttl = redis.command(&["PTTL", "sluice:rate:limit:k"]);
    let read = i64::try_from(before.elapsed().as_millis()).unwrap();
    let ttl: i64 = ttl.trim_start_matches(':').trim().parse().unwrap();
    assert!(
        (120_000 - read - 1..=120_000).contains(&ttl),
        "PTTL {ttl} after {read} ms"
    );

    let shown = metrics(&one).await;
    assert_eq!(
        metric(&shown, "sluice_rate_limit_store_up{middleware=\"limit\"}"),
        1
    );
    assert_eq!(
        metric(
            &shown,
            "sluice_rate_limit_store_decisions_total{middleware=\"limit\",result=\"allowed\"}"
        ),
        2
    );
    assert_eq!(
        metric(
            &shown,
            "sluice_rate_limit_store_decisions_total{middleware=\"limit\",result=\"limited\"}"
        ),
        1
    );
    assert_eq!(
        metric(
            &shown,
            "sluice_rate_limit_store_fallbacks_total{middleware=\"limit\"}"
        ),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_redis_is_down_on_failure_decides_and_decisions_resume_when_it_is_back() {
    let Some(mut redis) = RedisServer::start("while_redis_is_down") else {
        return;
    };
    let echo = Echo::start("e").await;
    let proxy = Proxy::start(&config(echo.addr, &format!("url: \"{}\"", redis.url())));
    let mut conn = proxy.conn().await;
    assert_eq!(status(&mut conn, "/closed", "c").await, 200);
    assert_eq!(status(&mut conn, "/closed", "c").await, 429);

    redis.stop();
    // fail_open: through, as if unlimited; fail_closed: 503 problem.
    for _ in 0..5 {
        assert_eq!(status(&mut conn, "/a", "c").await, 200);
    }
    let refused = conn.request("GET", "/closed", &["X-Key: d"], b"").await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(
        refused.header("content-type"),
        Some("application/problem+json")
    );
    let detail = refused.json()["detail"].as_str().unwrap().to_string();
    assert_eq!(detail, "the rate limit cannot be checked");
    assert!(!refused.text().contains("127.0.0.1"), "{}", refused.text());
    let shown = metrics(&proxy).await;
    assert_eq!(
        metric(&shown, "sluice_rate_limit_store_up{middleware=\"limit\"}"),
        0
    );
    assert!(
        metric(
            &shown,
            "sluice_rate_limit_store_fallbacks_total{middleware=\"limit\"}"
        ) >= 5
    );
    assert!(
        metric(
            &shown,
            "sluice_rate_limit_store_errors_total{middleware=\"closed\"}"
        ) >= 1
    );

    // Back (empty: nothing was saved): Redis decides again, without a
    // restart of the proxy; a new key gets its burst of 1, then 429.
    redis.resume();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut statuses = Vec::new();
    loop {
        let answered = status(&mut conn, "/closed", "e").await;
        statuses.push(answered);
        if answered == 429 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Redis did not decide again within 15 s: {statuses:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Before Redis answered: 503s; then exactly one 200 (the burst), then 429.
    let decided: Vec<u16> = statuses.iter().copied().filter(|s| *s != 503).collect();
    assert_eq!(decided, [200, 429], "{statuses:?}");
    let shown = metrics(&proxy).await;
    assert_eq!(
        metric(&shown, "sluice_rate_limit_store_up{middleware=\"closed\"}"),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_with_a_private_ca() {
    let certs = TestCerts::generate();
    let Some(redis) = RedisServer::start_tls("rediss_with_a_private_ca", &certs) else {
        return;
    };
    let echo = Echo::start("e").await;
    let settings = format!(
        "url: \"{}\", ca_file: \"{}\"",
        redis.tls_url(),
        certs.ca_path.display()
    );
    let proxy = Proxy::start(&config(echo.addr, &settings));
    let mut conn = proxy.conn().await;
    assert_eq!(status(&mut conn, "/closed", "t").await, 200);
    assert_eq!(status(&mut conn, "/closed", "t").await, 429);
    // The count is in the TLS server's Redis.
    assert!(redis
        .command(&["EXISTS", "sluice:rate:closed:t"])
        .starts_with(":1"));
}

/// What `proxy::start` says of a configuration, which must fail.
fn refused(yaml: &str) -> String {
    let config = proxy::config::parse(yaml, Path::new("t.yaml"), |_| None).unwrap();
    match proxy::start(&config) {
        Ok(_) => panic!("started with a configuration that must be refused:\n{yaml}"),
        Err(err) => format!("{err:#}"),
    }
}

#[test]
fn the_configuration_errors_name_the_handler_and_never_the_password() {
    let with = |limit: &str| {
        format!(
            "listeners: [{{ address: 127.0.0.1:0 }}]\nupstreams:\n  u: {{ hosts: [\"http://127.0.0.1:1\"] }}\nmiddleware:\n  shared: {{ rate_limit: {{ rate: 5/s, {limit} }} }}\nroutes:\n  - {{ path: /, chain: [shared], upstream: u }}\n"
        )
    };
    let shown = refused(&with("store: redis"));
    assert!(
        shown.contains("middleware.shared") && shown.contains("needs a `redis` section"),
        "{shown}"
    );
    let shown = refused(&with("redis: { url: \"redis://127.0.0.1\" }"));
    assert!(shown.contains("add `store: redis`"), "{shown}");
    let shown = refused(&with(
        "store: redis, redis: { url: \"http://:hunter2@127.0.0.1\" }",
    ));
    assert!(
        shown.contains("redis.url") && !shown.contains("hunter2"),
        "{shown}"
    );
    let shown = refused(&with(
        "store: redis, redis: { url: \"redis://:hunter2@127.0.0.1\", ca_file: /nonexistent.pem }",
    ));
    assert!(
        shown.contains("redis.ca_file") && !shown.contains("hunter2"),
        "{shown}"
    );
    let shown = refused(&with(
        "store: redis, redis: { url: \"redis://127.0.0.1\", password_file: /nonexistent/secret }",
    ));
    assert!(shown.contains("redis.password_file"), "{shown}");
    let shown = refused(&with(
        "store: redis, redis: { url: \"redis://127.0.0.1\", timeout: 0s }",
    ));
    assert!(shown.contains("redis.timeout"), "{shown}");
}
