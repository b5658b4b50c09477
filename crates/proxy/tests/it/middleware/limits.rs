//! Handlers that cap what gets through: `body_limit` (413),
//! `concurrency_limit` (503) and `rate_limit` (429, by client, header or
//! verified claim).

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use super::{claims, proxy_with, write_jwks};
use crate::support::{self, Echo};
use testkit::{Behaviour, FakeServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_limit_answers_413_before_the_upstream_sees_anything() {
    let echo = Echo::start("e").await;
    let proxy = proxy_with(
        echo.addr,
        "middleware:\n  small: { body_limit: { max: 1KiB } }\n",
        "  - { path: /, chain: [small], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    assert_eq!(
        conn.request("POST", "/", &[], &[b'a'; 1024]).await.status,
        200
    );
    let response = conn.request("POST", "/", &[], &[b'a'; 1025]).await;
    assert_eq!(response.status, 413);
    assert_eq!(response.json()["status"], 413);

    // A chunked body is cut off once it passes the limit.
    let mut conn = proxy.conn().await;
    conn.send(format!(
        "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n{}\r\n400\r\n{}\r\n0\r\n\r\n",
        "a".repeat(1024),
        "b".repeat(1024)
    ))
    .await;
    assert_eq!(conn.read_response(false).await.status, 413);
    assert_eq!(
        echo.requests.load(Ordering::SeqCst),
        1,
        "only the first POST"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_limit_answers_503_past_the_limit() {
    let slow = FakeServer::start(Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_secs(2),
    });
    let proxy = proxy_with(
        slow.addr(),
        "middleware:\n  one: { concurrency_limit: { max: 1 } }\n",
        "  - { path: /, chain: [one], upstream: echo }\n",
    );
    let mut first = proxy.conn().await;
    first.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n").await;
    // The first holds the slot once the upstream has it (for 2 s).
    assert!(
        support::live::until(Duration::from_secs(5), || async { slow.requests() == 1 }).await,
        "the first request never reached the upstream"
    );
    let mut second = proxy.conn().await;
    let refused = second.get("/").await;
    assert_eq!(refused.status, 503);
    assert!(refused.json()["detail"]
        .as_str()
        .unwrap()
        .contains("in flight"));
    assert_eq!(first.read_response(false).await.status, 200);
    // The slot is free again once the first request is done.
    assert_eq!(second.get("/").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_answers_429_with_retry_after() {
    let echo = Echo::start("e").await;
    let proxy = proxy_with(
        echo.addr,
        "middleware:\n  rate_limit: { rate: 2/m, burst: 2 }\n  by_key: { rate_limit: { key: \"header:x-api-key\", rate: 1/m } }\n",
        "  - { path: /ip, chain: [rate_limit], upstream: echo }\n  - { path: /key, chain: [by_key], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    let before = Instant::now();
    assert_eq!(conn.get("/ip").await.status, 200);
    assert_eq!(conn.get("/ip").await.status, 200);
    let limited = conn.get("/ip").await;
    let taken = before.elapsed();
    assert_eq!(limited.status, 429);
    // 2/m: a token every 30 s, the bucket emptied `taken` ago at most;
    // whole seconds, rounded up. 30 unless the three took a second or more.
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    let soonest = 30 - taken.as_secs().min(29);
    assert!((soonest..=30).contains(&retry), "{retry} after {taken:?}");
    assert_eq!(limited.header("ratelimit-limit"), Some("2"));
    assert_eq!(limited.header("ratelimit-remaining"), Some("0"));

    // Keys are separate buckets.
    assert_eq!(
        conn.request("GET", "/key", &["X-Api-Key: a"], b"")
            .await
            .status,
        200
    );
    assert_eq!(
        conn.request("GET", "/key", &["X-Api-Key: b"], b"")
            .await
            .status,
        200
    );
    assert_eq!(
        conn.request("GET", "/key", &["X-Api-Key: a"], b"")
            .await
            .status,
        429
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_can_key_on_a_verified_claim() {
    let echo = Echo::start("e").await;
    let key = jwt::generate_key(jwt::Algorithm::ES256, "k").unwrap();
    let jwks = std::env::temp_dir().join(format!("sluice-jwks-claim-{}.json", std::process::id()));
    write_jwks(&jwks, &[&key]);
    let middleware = format!(
        "middleware:\n  jwt: {{ jwks: \"{}\", algorithms: [ES256] }}\n  per_user: {{ rate_limit: {{ key: \"claim:sub\", rate: 1/m }} }}\n",
        jwks.display()
    );
    let proxy = proxy_with(
        echo.addr,
        &middleware,
        "  - { path: /, chain: [jwt, per_user], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    let token_for = |sub: &str| {
        let mut claims = claims("", 600);
        claims["sub"] = sub.into();
        format!("Authorization: Bearer {}", key.sign(&claims).unwrap())
    };
    let (alice, bob) = (token_for("alice"), token_for("bob"));
    assert_eq!(conn.request("GET", "/", &[&alice], b"").await.status, 200);
    assert_eq!(conn.request("GET", "/", &[&bob], b"").await.status, 200);
    // A second token of alice's shares her bucket: the key is the claim, not the token.
    let alice_again = token_for("alice");
    assert_eq!(
        conn.request("GET", "/", &[&alice_again], b"").await.status,
        429
    );
    let _ = std::fs::remove_file(&jwks);
}
