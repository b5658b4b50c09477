//! Live configuration (issue 18) in process: `POST /reload` swaps routes
//! for new requests on a kept-alive connection, keeps the pools of the
//! hosts that stay, keeps the configuration in use when the file is bad;
//! discovery follows a host name whose address changes.
//! (SIGHUP and `--watch` under load: crates/sluice/tests/it/proxy_reload.rs.)

use crate::support;

use std::{net::SocketAddr, sync::atomic::Ordering, time::Duration};

use support::live::{admin_get, reload, scratch, start, until, Counted, HEAD};
use testkit::RawConn;
use tokio::io::AsyncReadExt;

#[tokio::test]
async fn a_reload_moves_a_route_for_new_requests_and_keeps_the_pools_of_hosts_that_stay() {
    let one = Counted::start("one", "127.0.0.1:0").await;
    let two = Counted::start("two", "127.0.0.1:0").await;
    let dir = scratch("moves");
    let file = dir.join("sluice.yaml");
    let upstreams = format!(
        "upstreams:\n  one: {{ hosts: [\"http://{}\"] }}\n  two: {{ hosts: [\"http://{}\"] }}\n",
        one.addr, two.addr
    );
    std::fs::write(
        &file,
        format!("{HEAD}{upstreams}routes:\n  - {{ path: /x, upstream: one }}\n  - {{ path: /y, upstream: two }}\n"),
    )
    .unwrap();
    let proxy = start(&file);
    let mut client = RawConn::connect(proxy.listeners[0]).await;
    for _ in 0..3 {
        assert!(client.get("/y").await.text().contains("upstream: two"));
    }
    assert!(client.get("/x").await.text().contains("upstream: one"));
    assert_eq!(two.accepted.load(Ordering::SeqCst), 1);

    // /x moves to `two`; `two` itself does not change.
    std::fs::write(
        &file,
        format!("{HEAD}{upstreams}limits: {{ max_body_bytes: 1MiB }}\nroutes:\n  - {{ path: /x, upstream: two }}\n  - {{ path: /y, upstream: two }}\n"),
    )
    .unwrap();
    let answer = reload(proxy.admin.unwrap()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["generation"], 1);

    // A new request on the connection kept alive takes the new plan.
    assert!(client.get("/x").await.text().contains("upstream: two"));
    assert!(client.get("/y").await.text().contains("upstream: two"));
    assert_eq!(
        two.accepted.load(Ordering::SeqCst),
        1,
        "the pooled connection to `two` survived the reload"
    );
    let config = admin_get(proxy.admin.unwrap(), "/config").await.json();
    assert_eq!(config["reload"]["generation"], 1);
    assert_eq!(config["routes"][0]["upstream"], "two");
    assert_eq!(config["reload"]["sha256"].as_str().unwrap().len(), 64);
    let metrics = admin_get(proxy.admin.unwrap(), "/metrics").await.text();
    // Counters are kept by route name across the reload.
    assert!(
        metrics.contains("sluice_requests_total{route=\"/y\",status=\"200\"} 4"),
        "{metrics}"
    );
    assert!(metrics.contains("sluice_config_reloads_total{result=\"success\"} 1"));
    drop(client);
    proxy.shutdown();
}

#[tokio::test]
async fn a_broken_file_keeps_the_configuration_in_use_and_config_shows_why() {
    let one = Counted::start("one", "127.0.0.1:0").await;
    let dir = scratch("broken");
    let file = dir.join("sluice.yaml");
    let good = format!("{HEAD}{}", support::one_upstream(one.addr, ""));
    std::fs::write(&file, &good).unwrap();
    let proxy = start(&file);
    let admin = proxy.admin.unwrap();
    let before = admin_get(admin, "/config").await.json();

    std::fs::write(&file, good.replace("hosts:", "hostz:")).unwrap();
    let answer = reload(admin).await;
    assert_eq!(answer.status, 422, "{}", answer.text());
    assert!(answer.text().contains("sluice.yaml:"), "{}", answer.text());
    let mut client = RawConn::connect(proxy.listeners[0]).await;
    assert!(client.get("/").await.text().contains("upstream: one"));
    let config = admin_get(admin, "/config").await.json();
    assert_eq!(config["reload"]["generation"], 0);
    assert_eq!(config["reload"]["sha256"], before["reload"]["sha256"]);
    let error = config["reload"]["last_error"]["message"].as_str().unwrap();
    assert!(
        error.contains("sluice.yaml:6:5: upstreams.echo.hostz") && error.contains("hostz"),
        "{error}"
    );
    assert!(config["reload"]["last_error"]["at"].is_string());
    let metrics = admin_get(admin, "/metrics").await.text();
    assert!(metrics.contains("sluice_config_reloads_total{result=\"error\"} 1"));

    // A file that validates but cannot compile (a host that does not resolve) fails the same way.
    std::fs::write(
        &file,
        good.replace(&one.addr.to_string(), "no-such-host.invalid:80"),
    )
    .unwrap();
    assert_eq!(reload(admin).await.status, 422);
    assert!(client.get("/").await.text().contains("upstream: one"));

    std::fs::write(&file, &good).unwrap();
    assert_eq!(reload(admin).await.status, 200);
    let config = admin_get(admin, "/config").await.json();
    assert_eq!(config["reload"]["generation"], 1);
    assert!(config["reload"]["last_error"].is_null());
    drop(client);
    proxy.shutdown();
}

#[tokio::test]
async fn a_proxy_started_without_a_file_answers_409_to_a_reload() {
    let one = Counted::start("one", "127.0.0.1:0").await;
    let proxy = support::Proxy::start(&support::one_upstream(one.addr, ""));
    assert_eq!(reload(proxy.admin()).await.status, 409);
    let mut conn = RawConn::connect(proxy.admin()).await;
    assert_eq!(conn.get("/reload").await.status, 405);
}

#[tokio::test]
async fn discovery_follows_a_name_whose_addresses_change_and_drains_the_removed_host() {
    let first = Counted::start("first", "127.0.0.1:0").await;
    let port = first.addr.port();
    // The same port on another loopback address.
    let second = Counted::start("second", &format!("127.0.0.2:{port}")).await;
    let dir = scratch("discovery");
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, "127.0.0.1 svc.test\n").unwrap();
    let config = format!(
        "{HEAD}discovery: {{ min_interval: 100ms, max_interval: 300ms, hosts_file: {} }}\nupstreams:\n  svc: {{ hosts: [\"http://svc.test:{port}\"] }}\nroutes: [{{ path: /, upstream: svc }}]\n",
        hosts.display()
    );
    let proxy = support::Proxy::start_yaml(&config);
    let mut client = proxy.conn().await;
    assert!(client.get("/").await.text().contains("upstream: first"));
    assert_eq!(first.open.load(Ordering::SeqCst), 1, "pooled");

    // The name moves: new requests reach the new address within max_interval.
    std::fs::write(&hosts, "127.0.0.2 svc.test\n").unwrap();
    let proxy = &proxy;
    let moved = until(Duration::from_secs(3), || async move {
        proxy
            .conn()
            .await
            .get("/")
            .await
            .text()
            .contains("upstream: second")
    })
    .await;
    assert!(moved, "never reached the new address");
    // The removed host's pooled connection was closed.
    let open = &first.open;
    let drained = until(Duration::from_secs(2), || async move {
        open.load(Ordering::SeqCst) == 0
    })
    .await;
    assert!(drained, "the removed host still has a connection");

    // Two addresses: two hosts, both used.
    std::fs::write(&hosts, "127.0.0.1 svc.test\n127.0.0.2 svc.test\n").unwrap();
    let both = until(Duration::from_secs(3), || async move {
        let mut seen = (false, false);
        let mut client = proxy.conn().await;
        for _ in 0..4 {
            let text = client.get("/").await.text();
            seen.0 |= text.contains("upstream: first");
            seen.1 |= text.contains("upstream: second");
        }
        seen == (true, true)
    })
    .await;
    assert!(both, "both addresses of the name serve");
    let config = admin_get(proxy.admin(), "/config").await.json();
    let resolved = &config["reload"]["resolved"][format!("http://svc.test:{port}")];
    assert_eq!(resolved.as_array().map(Vec::len), Some(2), "{config}");
    assert!(second.accepted.load(Ordering::SeqCst) > 0);
    drop(client);
}

/// Two loopback ports that nothing listens on (bound together, then released).
fn two_free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

/// What a listener answers to the HTTP/2 connection preface: the first bytes.
async fn answer_to_preface(addr: SocketAddr) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    let mut first = vec![0; 9];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut first))
        .await
        .unwrap()
        .unwrap();
    first
}

#[tokio::test]
async fn a_reload_adds_changes_and_removes_listeners_and_the_removed_ones_drain() {
    let slow = testkit::FakeServer::start(testkit::Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(800),
    });
    let (removed, added) = two_free_ports();
    let dir = scratch("listeners");
    let file = dir.join("sluice.yaml");
    let rest = format!(
        "admin: {{ address: 127.0.0.1:0 }}\nupstreams:\n  slow: {{ hosts: [\"http://{}\"] }}\nroutes: [{{ path: /, upstream: slow }}]\n",
        slow.addr()
    );
    std::fs::write(
        &file,
        format!("workers: 2\nlisteners: [{{ address: 127.0.0.1:0 }}, {{ address: 127.0.0.1:{removed} }}]\n{rest}"),
    )
    .unwrap();
    let proxy = start(&file);
    let (kept, removed) = (proxy.listeners[0], proxy.listeners[1]);
    // Served as HTTP/2 (a SETTINGS frame) while both versions are on.
    assert_ne!(&answer_to_preface(kept).await[..5], b"HTTP/");

    // An idle connection on the listener about to go, parked by now (it
    // has sent nothing for over a second: crates/proxy/src/session/park.rs).
    let mut parked = tokio::net::TcpStream::connect(removed).await.unwrap();
    let admin = proxy.admin.unwrap();
    let is_parked = until(Duration::from_secs(10), || async {
        let metrics = admin_get(admin, "/metrics").await.text();
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("sluice_parked_connections "))
            .is_some_and(|v| v.trim().parse::<i64>().unwrap_or(0) >= 1)
    })
    .await;
    assert!(is_parked, "the idle connection was never parked");
    // A slow request in flight on the listener about to go.
    let mut in_flight = RawConn::connect(removed).await;
    in_flight.send("GET / HTTP/1.1\r\nhost: app\r\n\r\n").await;
    let requests = || slow.requests();
    assert!(
        until(Duration::from_secs(3), || async { requests() == 1 }).await,
        "the slow request never reached the upstream"
    );

    // One listener goes, one comes, one serves HTTP/1.1 only from now on.
    std::fs::write(
        &file,
        format!("workers: 2\nlisteners: [{{ address: 127.0.0.1:0, protocols: [http1] }}, {{ address: 127.0.0.1:{added} }}]\n{rest}"),
    )
    .unwrap();
    let answer = reload(proxy.admin.unwrap()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());

    let added: SocketAddr = format!("127.0.0.1:{added}").parse().unwrap();
    assert_eq!(RawConn::connect(added).await.get("/").await.status, 200);
    // Refused on every worker's socket, not only on one.
    for _ in 0..8 {
        let refused = tokio::net::TcpStream::connect(removed).await;
        assert!(refused.is_err(), "the removed listener still accepts");
    }
    // The parked connection is closed with its listener.
    let mut scratch = [0u8; 8];
    let closed = tokio::time::timeout(Duration::from_secs(3), parked.read(&mut scratch)).await;
    assert!(matches!(closed, Ok(Ok(0))), "parked connection: {closed:?}");
    // The request in flight finishes, then its connection closes.
    let finished = in_flight.read_response(false).await;
    assert_eq!(finished.status, 200);
    assert!(in_flight.is_closed_by_peer().await);
    // The kept listener is the same port, now HTTP/1.1 only: the preface
    // is an HTTP/1.1 request it refuses.
    assert_eq!(&answer_to_preface(kept).await[..5], b"HTTP/");
    assert_eq!(RawConn::connect(kept).await.get("/").await.status, 200);
    proxy.shutdown();
}

#[tokio::test]
async fn a_listener_that_cannot_be_bound_fails_the_reload_and_changes_nothing() {
    let one = Counted::start("one", "127.0.0.1:0").await;
    let dir = scratch("bind-fails");
    let file = dir.join("sluice.yaml");
    let good = format!("{HEAD}{}", support::one_upstream(one.addr, ""));
    std::fs::write(&file, &good).unwrap();
    let proxy = start(&file);
    let admin = proxy.admin.unwrap();
    // Held without SO_REUSEPORT: the proxy cannot share it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap();
    let listeners = format!("listeners: [{{ address: {taken_addr} }}]");
    std::fs::write(
        &file,
        good.replace("listeners: [{ address: 127.0.0.1:0 }]", &listeners),
    )
    .unwrap();
    let answer = reload(admin).await;
    assert_eq!(answer.status, 422, "{}", answer.text());
    assert!(
        answer
            .text()
            .contains(&format!("cannot listen on {taken_addr}")),
        "{}",
        answer.text()
    );
    // The listener the file dropped still serves.
    let mut client = RawConn::connect(proxy.listeners[0]).await;
    assert!(client.get("/").await.text().contains("upstream: one"));
    let config = admin_get(admin, "/config").await.json();
    assert_eq!(config["reload"]["generation"], 0);
    let error = config["reload"]["last_error"]["message"].as_str().unwrap();
    assert!(error.contains("cannot listen on"), "{error}");
    let metrics = admin_get(admin, "/metrics").await.text();
    assert!(metrics.contains("sluice_config_reloads_total{result=\"error\"} 1"));
    drop(taken);
    proxy.shutdown();
}
