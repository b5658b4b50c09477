//! Load balancing across plans and over time (issue 19): a sticky
//! cookie still pins after a reload, a name with two addresses gives two
//! distinct metric series, and active health checks against a health
//! path that answers 503, against h2c hosts, and once per process with
//! two workers.

use crate::support;

use std::{
    collections::HashSet,
    net::SocketAddr,
    sync::{
        atomic::{AtomicU16, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use support::{
    first_lines,
    live::{admin_get, reload, scratch, start, until, HEAD},
    two_hosts, Echo, Proxy,
};
use testkit::{H2Server, RawConn};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sticky_cookie_without_a_key_still_pins_after_a_reload() {
    let a = Echo::start("a").await;
    let b = Echo::start("b").await;
    let dir = scratch("sticky");
    let file = dir.join("sluice.yaml");
    let upstreams = two_hosts(a.addr, b.addr, "    sticky: { cookie: lb }\n");
    std::fs::write(&file, format!("{HEAD}{upstreams}")).unwrap();
    let proxy = start(&file);
    let mut conn = RawConn::connect(proxy.listeners[0]).await;
    let first = conn.get("/").await;
    let set = first.header("set-cookie").unwrap().to_string();
    let cookie = set.split(';').next().unwrap().to_string();
    let host = first.text().lines().next().unwrap().to_string();

    // A changed file: the upstreams are compiled anew.
    std::fs::write(
        &file,
        format!("{HEAD}limits: {{ max_body_bytes: 1MiB }}\n{upstreams}"),
    )
    .unwrap();
    let answer = reload(proxy.admin.unwrap()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    for _ in 0..4 {
        let again = conn
            .request("GET", "/", &[&format!("cookie: {cookie}")], b"")
            .await;
        assert_eq!(again.text().lines().next().unwrap(), host);
        assert_eq!(again.header("set-cookie"), None, "the cookie still holds");
    }
    proxy.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_with_two_addresses_gives_two_distinct_metric_series() {
    let dir = scratch("series");
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, "127.0.0.1 svc.test\n127.0.0.2 svc.test\n").unwrap();
    let proxy = Proxy::start_yaml(&format!(
        "{HEAD}discovery: {{ hosts_file: {} }}\nupstreams:\n  svc: {{ hosts: [\"http://svc.test:9\"] }}\nroutes: [{{ path: /, upstream: svc }}]\n",
        hosts.display()
    ));
    let metrics = admin_get(proxy.admin(), "/metrics").await.text();
    for family in [
        "sluice_upstream_host_requests_total{",
        "sluice_upstream_host_healthy{",
        "sluice_upstream_host_weight{",
    ] {
        let labels: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with(family))
            .map(|l| l.rsplit_once(' ').unwrap().0)
            .collect();
        assert_eq!(labels.len(), 2, "{metrics}");
        let unique: HashSet<&str> = labels.iter().copied().collect();
        assert_eq!(unique.len(), 2, "{labels:?}");
        assert!(labels[0].contains("host=\"svc.test:9\""), "{labels:?}");
        assert!(unique.iter().any(|l| l.contains("address=\"127.0.0.2:9\"")));
    }
}

/// An HTTP/1.1 host whose `/healthz` answers the status in `health`
/// (counting the checks in `checks`); other paths answer 200
/// `upstream: NAME`.
struct Checked {
    addr: SocketAddr,
    health: Arc<AtomicU16>,
    checks: Arc<AtomicU64>,
}

impl Checked {
    async fn start(name: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let health = Arc::new(AtomicU16::new(200));
        let checks = Arc::new(AtomicU64::new(0));
        let (h, c) = (Arc::clone(&health), Arc::clone(&checks));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (h, c) = (Arc::clone(&h), Arc::clone(&c));
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    loop {
                        let Ok(n @ 1..) = stream.read(&mut buf).await else {
                            return;
                        };
                        head.extend_from_slice(&buf[..n]);
                        let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                            continue;
                        };
                        let text = String::from_utf8_lossy(&head[..end]).to_string();
                        head.drain(..end + 4);
                        let (status, body) = if text.split(' ').nth(1) == Some("/healthz") {
                            c.fetch_add(1, Ordering::SeqCst);
                            (h.load(Ordering::SeqCst), String::new())
                        } else {
                            (200, format!("upstream: {name}\n"))
                        };
                        let answer = format!(
                            "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self {
            addr,
            health,
            checks,
        }
    }
}

async fn host_states(proxy: &Proxy, upstream: &str) -> Vec<String> {
    let body = RawConn::connect(proxy.admin())
        .await
        .get("/upstreams")
        .await
        .json();
    body["upstreams"][upstream]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["state"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_path_answering_503_takes_the_host_out_until_it_answers_200() {
    let good = Checked::start("good").await;
    let sick = Checked::start("sick").await;
    sick.health.store(503, Ordering::SeqCst);
    let proxy = Proxy::start(&two_hosts(
        good.addr,
        sick.addr,
        "    health: { active: { path: /healthz, interval: 100ms, timeout: 500ms, rise: 2, fall: 2 } }\n",
    ));
    let proxy = &proxy;
    let down = until(Duration::from_secs(3), || async move {
        host_states(proxy, "two").await == ["healthy", "down"]
    })
    .await;
    assert!(down, "{:?}", host_states(proxy, "two").await);
    assert!(sick.checks.load(Ordering::SeqCst) >= 2);
    let mut conn = proxy.conn().await;
    for _ in 0..4 {
        assert!(conn.get("/").await.text().starts_with("upstream: good"));
    }
    sick.health.store(200, Ordering::SeqCst);
    let back = until(Duration::from_secs(3), || async move {
        host_states(proxy, "two").await == ["healthy", "healthy"]
    })
    .await;
    assert!(back, "{:?}", host_states(proxy, "two").await);
    let seen = first_lines(&mut conn, 4).await;
    assert!(seen.contains("upstream: sick"), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_checks_speak_h2c_to_h2c_upstreams() {
    let up = H2Server::start();
    let sick = H2Server::start();
    let upstream = |name: &str, server: &H2Server, path: &str| {
        format!(
            "  {name}:\n    hosts: [\"http://{}\"]\n    protocol: h2c\n    health: {{ active: {{ path: {path}, interval: 100ms, timeout: 500ms, rise: 1, fall: 2 }} }}\n",
            server.addr()
        )
    };
    let proxy = Proxy::start(&format!(
        "upstreams:\n{}{}routes:\n  - {{ path: /up, upstream: up }}\n  - {{ path: /sick, upstream: sick }}\n",
        upstream("up", &up, "/ok"),
        upstream("sick", &sick, "/status/503"),
    ));
    let proxy = &proxy;
    let settled = until(Duration::from_secs(3), || async move {
        host_states(proxy, "up").await == ["healthy"]
            && host_states(proxy, "sick").await == ["down"]
    })
    .await;
    assert!(settled, "{:?}", host_states(proxy, "sick").await);
    // No client sent anything: the requests are the checks, over h2c.
    assert!(up.requests() >= 2 && sick.requests() >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_check_each_host_once_per_interval() {
    let host = Checked::start("one").await;
    let proxy = Proxy::start_with(
        "workers: 2",
        &support::one_upstream(
            host.addr,
            "    health: { active: { path: /healthz, interval: 200ms, timeout: 500ms } }\n",
        ),
    );
    const INTERVAL: Duration = Duration::from_millis(200);
    assert!(
        until(Duration::from_secs(5), || async {
            host.checks.load(Ordering::SeqCst) > 0
        })
        .await,
        "no health check reached the host"
    );
    let (before, started) = (host.checks.load(Ordering::SeqCst), Instant::now());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let checks = host.checks.load(Ordering::SeqCst) - before;
    let window = started.elapsed();
    // One checker starts its rounds at least INTERVAL apart
    // (server/health_checks.rs: no burst after a stall), so the window
    // holds at most one check per INTERVAL plus one at each edge, however
    // busy the machine: a slow machine only makes fewer. A checker per worker would make twice as many, about 20
    // in 2 s, over this bound of 12.
    let most = u64::try_from(window.as_millis() / INTERVAL.as_millis()).unwrap() + 2;
    assert!(
        (1..=most).contains(&checks),
        "{checks} checks in {window:?}: at most {most} from one checker"
    );
    drop(proxy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_client_get_is_retried_on_503_and_a_post_is_not() {
    // `/healthz` of `bad` answers 503; `good` answers anything 200.
    let bad = Checked::start("bad").await;
    bad.health.store(503, Ordering::SeqCst);
    let good = Echo::start("good").await;
    let proxy = Proxy::start(&two_hosts(
        bad.addr,
        good.addr,
        "    retries: 1\n    retry_on: [reset, 503]\n    retry_backoff: 1ms\n",
    ));
    let client = support::h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = |method: &str| h2_request(method, "http://lb.test/healthz");
    // Round robin: bad, good, bad.
    let (post, _, _) = support::h2_exchange(&client, request("POST"), b"").await;
    assert_eq!(post.status(), 503, "a POST is not retried");
    assert_eq!(bad.checks.load(Ordering::SeqCst), 1);
    for _ in 0..2 {
        let (get, body, _) = support::h2_exchange(&client, request("GET"), b"").await;
        assert_eq!(get.status(), 200);
        assert!(body.starts_with(b"upstream: good"));
    }
    assert_eq!(
        bad.checks.load(Ordering::SeqCst),
        2,
        "the second GET went to bad first"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_client_get_is_retried_after_a_reset_and_a_post_is_not() {
    // A host that reads a request head and closes without answering.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let reset = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.read(&mut [0u8; 4096]).await;
        }
    });
    let good = Echo::start("good").await;
    let proxy = Proxy::start(&two_hosts(
        reset,
        good.addr,
        "    retries: 1\n    retry_on: [reset]\n    retry_backoff: 1ms\n",
    ));
    let client = support::h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = |method: &str| h2_request(method, "http://lb.test/");
    // Round robin: reset, good, reset.
    let (post, _, _) = support::h2_exchange(&client, request("POST"), b"").await;
    assert_eq!(post.status(), 502, "a POST is not retried");
    for _ in 0..2 {
        let (get, body, _) = support::h2_exchange(&client, request("GET"), b"").await;
        assert_eq!(get.status(), 200);
        assert!(body.starts_with(b"upstream: good"));
    }
}

fn h2_request(method: &str, uri: &str) -> http::Request<()> {
    http::Request::builder()
        .method(method)
        .uri(uri)
        .body(())
        .unwrap()
}
