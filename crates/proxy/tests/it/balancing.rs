//! Load balancing over real loopback sockets (docs/LOAD-BALANCING.md):
//! retries on resets (a GET goes again, a POST does not), `max_pending`
//! answering 503, the sticky cookie round trip, active health checks
//! taking a host out and back, and `/upstreams`.

use crate::support;

use std::{collections::HashSet, net::SocketAddr, time::Duration};

use support::{first_lines, two_hosts, Echo, Proxy};
use testkit::{closed_port, Behaviour, FakeServer, RawConn};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

/// A host that reads a request head and closes without answering.
async fn resetting_host() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_is_retried_after_a_reset_and_a_post_is_not() {
    let reset = resetting_host().await;
    let echo = Echo::start("good").await;
    let settings =
        "    retries: 1\n    retry_on: [connect_failure, reset]\n    retry_backoff: 1ms\n";
    // Round robin starts at the resetting host.
    let proxy = Proxy::start(&two_hosts(reset, echo.addr, settings));
    let response = proxy.conn().await.get("/").await;
    assert_eq!(response.status, 200);
    assert!(response.text().starts_with("upstream: good"));
    drop(proxy);

    let proxy = Proxy::start(&two_hosts(reset, echo.addr, settings));
    let response = proxy.conn().await.request("POST", "/", &[], b"hi").await;
    assert_eq!(response.status, 502, "{}", response.text());
    drop(proxy);

    // Without `reset` in retry_on, a GET is not retried either.
    let proxy = Proxy::start(&two_hosts(reset, echo.addr, "    retries: 1\n"));
    assert_eq!(proxy.conn().await.get("/").await.status, 502);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_budget_caps_retries() {
    let reset = resetting_host().await;
    let other = resetting_host().await;
    // The budget's windows are whole seconds of the plan's clock, which
    // starts with the proxy (plan/mod.rs, `epoch`): requests made before
    // the proxy is a second old share the first window, and its 2 retries.
    let started = std::time::Instant::now();
    let proxy = Proxy::start(&two_hosts(
        reset,
        other,
        "    retries: 1\n    retry_on: [reset]\n    retry_backoff: 1ms\n    retry_budget: { percent: 0, min_per_second: 2 }\n    health: { failures: 1000 }\n",
    ));
    let mut conn = proxy.conn().await;
    for _ in 0..6 {
        assert_eq!(
            RawConn::connect(proxy.addr()).await.get("/").await.status,
            502
        );
    }
    // Both hosts reset: no retry could have answered it either.
    assert_eq!(conn.get("/").await.status, 502);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the requests took the proxy past its first second: another budget window"
    );
    let metrics = RawConn::connect(proxy.admin())
        .await
        .get("/metrics")
        .await
        .text();
    // 7 requests, 2 retries: 9 failures counted against the hosts.
    let failures: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("sluice_upstream_host_failures_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(failures, 9, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_pending_answers_503_past_the_limit() {
    let silent = FakeServer::start(Behaviour::Silent);
    let proxy = Proxy::start(&format!(
        "upstreams:\n  one:\n    hosts: [\"http://{}\"]\n    max_connections: 1\n    max_pending: 0\n    timeouts: {{ request: 2s }}\nroutes:\n  - {{ path: /, upstream: one }}\n",
        silent.addr()
    ));
    let addr = proxy.addr();
    let first = tokio::spawn(async move { RawConn::connect(addr).await.get("/").await.status });
    // The first holds the one connection once the silent upstream has it.
    assert!(
        support::live::until(Duration::from_secs(5), || async { silent.requests() == 1 }).await,
        "the first request never reached the upstream"
    );
    let second = RawConn::connect(addr).await.get("/").await;
    assert_eq!(second.status, 503);
    assert_eq!(
        second.header("content-type"),
        Some("application/problem+json")
    );
    assert!(
        second
            .text()
            .contains("every connection to the upstream is in use"),
        "{}",
        second.text()
    );
    assert_eq!(first.await.unwrap(), 504);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sticky_cookie_pins_a_client_to_its_host() {
    let a = Echo::start("a").await;
    let b = Echo::start("b").await;
    let proxy = Proxy::start(&two_hosts(a.addr, b.addr, "    sticky: { cookie: lb }\n"));
    let mut conn = proxy.conn().await;
    let first = conn.get("/").await;
    let set = first.header("set-cookie").unwrap().to_string();
    assert!(set.starts_with("lb=") && set.contains("HttpOnly"), "{set}");
    let cookie = set.split(';').next().unwrap().to_string();
    let host = first.text().lines().next().unwrap().to_string();
    for _ in 0..6 {
        let again = conn
            .request("GET", "/", &[&format!("cookie: {cookie}")], b"")
            .await;
        assert_eq!(again.text().lines().next().unwrap(), host);
        assert_eq!(
            again.header("set-cookie"),
            None,
            "a valid cookie is not set again"
        );
    }
    let forged = conn.request("GET", "/", &["cookie: lb=forged"], b"").await;
    assert!(
        forged.header("set-cookie").is_some(),
        "a fresh pick sets it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_checks_take_a_host_out_and_bring_it_back() {
    let echo = Echo::start("up").await;
    let down = closed_port();
    let proxy = Proxy::start(&two_hosts(
        echo.addr,
        down,
        "    health: { active: { path: /healthz, interval: 100ms, timeout: 100ms, rise: 2, fall: 2 } }\n",
    ));
    let state = |body: &serde_json::Value, i: usize| {
        body["upstreams"]["two"]["hosts"][i]["state"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let upstreams = || async {
        RawConn::connect(proxy.admin())
            .await
            .get("/upstreams")
            .await
            .json()
    };
    // `fall` failed checks take the closed port down; `rise` passes keep the
    // echo healthy.
    let settled = support::live::until(Duration::from_secs(10), || async {
        let body = upstreams().await;
        state(&body, 0) == "healthy" && state(&body, 1) == "down"
    })
    .await;
    let body = upstreams().await;
    assert!(settled, "{body}");
    let mut conn = proxy.conn().await;
    for _ in 0..4 {
        assert!(conn.get("/").await.text().starts_with("upstream: up"));
    }
    // The host comes up: back after `rise` passes.
    let listener = TcpListener::bind(down).await.unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(support::echo(stream, "back", Default::default()));
        }
    });
    let back = support::live::until(Duration::from_secs(10), || async {
        state(&upstreams().await, 1) == "healthy"
    })
    .await;
    assert!(back, "{}", upstreams().await);
    let seen: HashSet<String> = first_lines(&mut conn, 4).await;
    assert!(seen.contains("upstream: back"), "{seen:?}");
}

/// A host that answers every request 503 (keep-alive).
async fn unavailable_host() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let mut chunk = [0u8; 4096];
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        let answer =
                            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nbusy";
                        if stream.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consecutive_5xx_eject_a_host_and_503_is_retried_elsewhere() {
    let bad = unavailable_host().await;
    let echo = Echo::start("good").await;
    let proxy = Proxy::start(&two_hosts(
        bad,
        echo.addr,
        "    retries: 0\n    health: { failures: 2, backoff: 30s }\n",
    ));
    let mut conn = proxy.conn().await;
    let statuses: Vec<u16> = futures_statuses(&mut conn, 4).await;
    assert_eq!(statuses, [503, 200, 503, 200]);
    let body = RawConn::connect(proxy.admin())
        .await
        .get("/upstreams")
        .await
        .json();
    assert_eq!(body["upstreams"]["two"]["hosts"][0]["state"], "ejected");
    assert_eq!(body["upstreams"]["two"]["hosts"][0]["ejections"], 1);
    assert_eq!(futures_statuses(&mut conn, 4).await, [200; 4]);
    drop(proxy);

    // With 503 in retry_on, a GET that got it goes to the other host.
    let proxy = Proxy::start(&two_hosts(
        bad,
        echo.addr,
        "    retries: 1\n    retry_on: [503]\n    retry_backoff: 1ms\n",
    ));
    let response = proxy.conn().await.get("/").await;
    assert_eq!(response.status, 200);
    assert!(response.text().starts_with("upstream: good"));
}

async fn futures_statuses(conn: &mut RawConn, n: usize) -> Vec<u16> {
    let mut statuses = Vec::new();
    for _ in 0..n {
        statuses.push(conn.get("/").await.status);
    }
    statuses
}
