//! The `fault` handler: injected delays and aborts.

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use super::proxy_with;
use crate::support::Echo;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_delays_and_aborts() {
    let echo = Echo::start("e").await;
    let middleware = "middleware:\n  slow: { fault: { delay: { duration: 200ms, percent: 100 } } }\n  broken: { fault: { abort: { status: 503, percent: 100 } } }\n";
    let proxy = proxy_with(
        echo.addr,
        middleware,
        "  - { path: /slow, chain: [slow], upstream: echo }\n  - { path: /broken, chain: [broken], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    let started = Instant::now();
    assert_eq!(conn.get("/slow").await.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(200));
    let aborted = conn.get("/broken").await;
    assert_eq!(aborted.status, 503);
    assert!(aborted.json()["detail"].as_str().unwrap().contains("fault"));
    assert_eq!(echo.requests.load(Ordering::SeqCst), 1);
}
