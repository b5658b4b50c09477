//! A Redis that stalls (issue 51), not one that died: a listener that
//! accepts connections and never answers, and a real redis-server paused
//! (SIGSTOP) after it decided. A request waits `redis.timeout` (5 ms by
//! default), then `on_failure` decides: `fail_open` lets it through,
//! `fail_closed` answers 503; three timeouts in a row mark Redis down;
//! once it answers again, it decides again.

use std::{
    net::SocketAddr,
    path::Path,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use testkit::{RawConn, RawResponse, RedisServer};
use tokio::net::TcpListener;

use crate::{
    rate_limit_redis::{metric, metrics, status},
    support::{Echo, Proxy},
};

/// The redis client's own connection and response timeouts
/// (`rate_limit_redis/mod.rs`): an answer sooner is the budget's doing.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);
/// Timeouts in a row that mark Redis down (`TIMEOUTS_DOWN` there).
const TIMEOUTS_DOWN: u64 = 3;

/// Routes `/open` and `/closed` through handlers of those names (keyed
/// on `X-Key`, 1/m with a burst of 1, on the Redis at `url`, `on_failure`
/// `fail_open` and `fail_closed`), `redis.timeout` `timeout` (none: the
/// default).
fn config(echo: SocketAddr, url: &str, timeout: Option<&str>) -> String {
    let timeout = timeout.map_or(String::new(), |t| format!(", timeout: {t}"));
    let handler = |on_failure: &str| {
        format!("{{ rate_limit: {{ key: \"header:x-key\", rate: 1/m, burst: 1, store: redis, redis: {{ url: \"{url}\"{timeout}, on_failure: {on_failure} }} }} }}")
    };
    format!(
        "upstreams:\n  echo:\n    hosts: [\"http://{echo}\"]\nmiddleware:\n  open: {}\n  closed: {}\nroutes:\n  - {{ path: /open, chain: [open], upstream: echo }}\n  - {{ path: /closed, chain: [closed], upstream: echo }}\n",
        handler("fail_open"),
        handler("fail_closed")
    )
}

/// A "Redis" that accepts connections and holds them open, reading and
/// answering nothing.
async fn silent_redis() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    addr
}

/// `GET path` with `X-Key: key`, and how long its answer took.
async fn timed(conn: &mut RawConn, path: &str, key: &str) -> (RawResponse, Duration) {
    let started = Instant::now();
    let header = format!("X-Key: {key}");
    let answer = conn.request("GET", path, &[&header], b"").await;
    (answer, started.elapsed())
}

/// What `fail_closed` answers when Redis gives no decision.
fn assert_refused(answer: &RawResponse, case: &str) {
    assert_eq!(answer.status, 503, "{case}: {}", answer.text());
    assert_eq!(
        answer.header("content-type"),
        Some("application/problem+json"),
        "{case}"
    );
    assert_eq!(
        answer.json()["detail"],
        "the rate limit cannot be checked",
        "{case}"
    );
    assert!(!answer.text().contains("127.0.0.1"), "{case}");
}

/// `sluice_rate_limit_store_NAME{middleware="HANDLER"...}` in `shown`.
fn store(shown: &str, name: &str, handler: &str, extra: &str) -> u64 {
    let series = format!("sluice_rate_limit_store_{name}{{middleware=\"{handler}\"{extra}}}");
    metric(shown, &series)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_never_answers_is_decided_by_on_failure_once_the_timeout_is_out() {
    let redis = silent_redis().await;
    let echo = Echo::start("e").await;
    let budget = Duration::from_millis(50);
    let url = format!("redis://{redis}");
    let proxy = Proxy::start(&config(echo.addr, &url, Some("50ms")));
    let mut conn = proxy.conn().await;
    for path in ["/open", "/closed"] {
        for i in 0..TIMEOUTS_DOWN {
            let case = format!("{path} #{i}");
            let (answer, took) = timed(&mut conn, path, &format!("k{i}")).await;
            if path == "/open" {
                assert_eq!(answer.status, 200, "{case}: {}", answer.text());
            } else {
                assert_refused(&answer, &case);
            }
            // It waited for Redis the whole budget, and no longer.
            assert!(took >= budget, "{case} took {took:?}");
            assert!(took < CLIENT_TIMEOUT, "{case} took {took:?}");
        }
    }
    let shown = metrics(&proxy).await;
    for handler in ["open", "closed"] {
        // Each request timed out once and took on_failure; the third
        // timeout in a row marked Redis down.
        assert_eq!(store(&shown, "errors_total", handler, ""), TIMEOUTS_DOWN);
        assert_eq!(store(&shown, "fallbacks_total", handler, ""), TIMEOUTS_DOWN);
        assert_eq!(store(&shown, "up", handler, ""), 0, "{handler}");
    }
    // Only fail_open's requests reached the upstream.
    assert_eq!(echo.requests.load(Ordering::SeqCst), TIMEOUTS_DOWN);
}

/// Asks `path` with a new key each time (`KEYS1`, `KEYS2`, ...) until `decided`
/// says Redis decided (10 s at most; 50 ms between tries): the first
/// requests may run out of their budget while the connection is made.
async fn until_decided(
    proxy: &Proxy,
    conn: &mut RawConn,
    path: &str,
    keys: &str,
    decided: impl Fn(&str) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for key in 1.. {
        status(conn, path, &format!("{keys}{key}")).await;
        if decided(&metrics(proxy).await) {
            return;
        }
        assert!(Instant::now() < deadline, "Redis never decided {path}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_is_decided_by_on_failure_within_the_default_5ms() {
    let Some(redis) = RedisServer::start("a_paused_redis_is_decided_by_on_failure") else {
        return;
    };
    let echo = Echo::start("e").await;
    let yaml = config(echo.addr, &redis.url(), None);
    // No `timeout`: the budget is the default, 5 ms.
    let budget = Duration::from_millis(5);
    let whole = format!("listeners: [{{ address: 127.0.0.1:0 }}]\n{yaml}");
    let parsed = proxy::config::parse(&whole, Path::new("test.yaml"), |_| None).unwrap();
    for handler in ["open", "closed"] {
        match &parsed.middleware.0[handler] {
            proxy::config::HandlerSettings::RateLimitSettings(settings) => {
                assert_eq!(settings.redis.as_ref().unwrap().timeout, budget);
            }
            _ => panic!("{handler} is not a rate_limit"),
        }
    }
    let proxy = Proxy::start(&yaml);
    let mut conn = proxy.conn().await;
    for handler in ["open", "closed"] {
        let allowed =
            |shown: &str| store(shown, "decisions_total", handler, ",result=\"allowed\"") > 0;
        until_decided(&proxy, &mut conn, &format!("/{handler}"), "warm", allowed).await;
    }
    let before = metrics(&proxy).await;

    // Stalled: connected, and silent.
    redis.pause();
    let (open, took_open) = timed(&mut conn, "/open", "p1").await;
    let (closed, took_closed) = timed(&mut conn, "/closed", "p1").await;
    redis.unpause();
    assert_eq!(open.status, 200, "{}", open.text());
    assert_refused(&closed, "/closed while Redis is paused");
    for took in [took_open, took_closed] {
        assert!(took >= budget && took < CLIENT_TIMEOUT, "took {took:?}");
    }
    let shown = metrics(&proxy).await;
    for handler in ["open", "closed"] {
        let fallbacks = |text: &str| store(text, "fallbacks_total", handler, "");
        assert_eq!(fallbacks(&shown), fallbacks(&before) + 1, "{handler}");
        // One timeout is not three in a row: Redis is still up.
        assert_eq!(store(&shown, "up", handler, ""), 1, "{handler}");
    }

    // Going on, Redis decides again (a 200 from fail_closed is its).
    let decided_before = store(&shown, "decisions_total", "closed", ",result=\"allowed\"");
    let again = |text: &str| {
        store(text, "decisions_total", "closed", ",result=\"allowed\"") > decided_before
    };
    until_decided(&proxy, &mut conn, "/closed", "again", again).await;
}
