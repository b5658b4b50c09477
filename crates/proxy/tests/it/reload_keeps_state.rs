//! What a reload keeps and what it lets finish (issue 18): a host's
//! ejection, rate-limit buckets and JWKS key sets of unchanged handlers,
//! the last good answer of a name that stops resolving (counted), new
//! streams on an open HTTP/2 connection, a slow request to a removed host.

use crate::support;

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use http::Request;
use support::live::{admin_get, reload, scratch, start, until, Counted, HEAD};
use testkit::RawConn;

/// Writes `text` to `file` and reloads it; the new generation.
async fn reload_with(proxy: &proxy::RunningProxy, file: &std::path::Path, text: &str) -> u64 {
    std::fs::write(file, text).unwrap();
    let answer = reload(proxy.admin.unwrap()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()["generation"].as_u64().unwrap()
}

/// The value of an unlabelled counter on /metrics.
async fn counter(admin: SocketAddr, name: &str) -> u64 {
    let metrics = admin_get(admin, "/metrics").await.text();
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ejected_host_stays_ejected_after_a_reload_that_does_not_touch_it() {
    let good = Counted::start("good", "127.0.0.1:0").await;
    let refused = testkit::closed_port();
    let dir = scratch("ejected");
    let file = dir.join("sluice.yaml");
    let upstream = format!(
        "upstreams:\n  two:\n    hosts: [\"http://{refused}\", \"http://{}\"]\n    retries: 0\n    health: {{ failures: 2, backoff: 30s }}\n",
        good.addr
    );
    let routes = "routes:\n  - { path: /, upstream: two }\n";
    std::fs::write(&file, format!("{HEAD}{upstream}{routes}")).unwrap();
    let proxy = start(&file);
    let admin = proxy.admin.unwrap();
    let mut client = RawConn::connect(proxy.listeners[0]).await;
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(client.get("/").await.status);
    }
    assert_eq!(statuses, [502, 200, 502, 200]);
    let state = |body: &serde_json::Value| body["upstreams"]["two"]["hosts"][0].clone();
    let before = state(&admin_get(admin, "/upstreams").await.json());
    assert_eq!(before["state"], "ejected", "{before}");

    // A reload that changes something else.
    let more = format!("{routes}  - {{ path: /other, upstream: two }}\n");
    assert_eq!(
        reload_with(&proxy, &file, &format!("{HEAD}{upstream}{more}")).await,
        1
    );
    let after = state(&admin_get(admin, "/upstreams").await.json());
    assert_eq!(after["state"], "ejected", "{after}");
    assert_eq!(after["ejections"], 1, "{after}");
    for _ in 0..4 {
        assert_eq!(
            client.get("/").await.status,
            200,
            "the ejected host was tried"
        );
    }
    drop(client);
    proxy.shutdown();
}

#[tokio::test]
async fn rate_limit_buckets_survive_a_reload_that_keeps_their_settings() {
    let one = Counted::start("one", "127.0.0.1:0").await;
    let dir = scratch("rate-limit");
    let file = dir.join("sluice.yaml");
    let config = |rate: &str, routes: &str| {
        format!(
            "{HEAD}middleware:\n  limited: {{ rate_limit: {{ rate: {rate}, burst: 2 }} }}\nupstreams:\n  one: {{ hosts: [\"http://{}\"] }}\nroutes:\n  - {{ path: /, chain: [limited], upstream: one }}\n{routes}",
            one.addr
        )
    };
    std::fs::write(&file, config("2/m", "")).unwrap();
    let proxy = start(&file);
    let mut client = RawConn::connect(proxy.listeners[0]).await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(client.get("/").await.status);
    }
    assert_eq!(statuses, [200, 200, 429]);

    // Another route, the same handler settings: the bucket stays empty.
    let other = "  - { path: /other, upstream: one }\n";
    reload_with(&proxy, &file, &config("2/m", other)).await;
    assert_eq!(client.get("/").await.status, 429, "the bucket was refilled");
    assert_eq!(client.get("/other").await.status, 200);

    // New settings make a new handler with a full bucket.
    reload_with(&proxy, &file, &config("3/m", other)).await;
    assert_eq!(client.get("/").await.status, 200);
    drop(client);
    proxy.shutdown();
}

/// A JWKS endpoint serving `body`, counting its fetches.
async fn jwks_server(body: String) -> (SocketAddr, Arc<AtomicU64>) {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let fetches = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&fetches);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            support::read_head(&mut stream).await;
            counted.fetch_add(1, Ordering::SeqCst);
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    (addr, fetches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_jwt_handler_does_not_fetch_its_keys_again() {
    let one = Counted::start("one", "127.0.0.1:0").await;
    let key = jwt::generate_key(jwt::Algorithm::EdDSA, "reload-key").unwrap();
    let (jwks, fetches) = jwks_server(key.jwks_json()).await;
    let dir = scratch("jwks");
    let file = dir.join("sluice.yaml");
    let config = |refresh: &str, routes: &str| {
        format!(
            "{HEAD}middleware:\n  jwt: {{ jwks_url: \"http://{jwks}/jwks.json\", algorithms: [EdDSA], refresh: {refresh} }}\nupstreams:\n  one: {{ hosts: [\"http://{}\"] }}\nroutes:\n  - {{ path: /, chain: [jwt], upstream: one }}\n{routes}",
            one.addr
        )
    };
    std::fs::write(&file, config("1h", "")).unwrap();
    let proxy = tokio::task::spawn_blocking({
        let file = file.clone();
        move || start(&file)
    })
    .await
    .unwrap();
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    let now = jwt::unix_now() as i64;
    let token = key
        .sign(&serde_json::json!({ "sub": "a", "iat": now, "exp": now + 600 }))
        .unwrap();
    let authorization = format!("Authorization: Bearer {token}");
    let mut client = RawConn::connect(proxy.listeners[0]).await;
    assert_eq!(
        client
            .request("GET", "/", &[&authorization], b"")
            .await
            .status,
        200
    );

    let other = "  - { path: /other, upstream: one }\n";
    reload_with(&proxy, &file, &config("1h", other)).await;
    assert_eq!(
        fetches.load(Ordering::SeqCst),
        1,
        "the keys were fetched again"
    );
    assert_eq!(
        client
            .request("GET", "/", &[&authorization], b"")
            .await
            .status,
        200
    );

    // A changed handler is built anew, and fetches its keys.
    reload_with(&proxy, &file, &config("2h", other)).await;
    assert_eq!(fetches.load(Ordering::SeqCst), 2);
    drop(client);
    tokio::task::spawn_blocking(move || proxy.shutdown())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_new_stream_on_an_open_http2_connection_takes_the_new_plan() {
    let one = Counted::start("one", "127.0.0.1:0").await;
    let two = Counted::start("two", "127.0.0.1:0").await;
    let dir = scratch("h2-stream");
    let file = dir.join("sluice.yaml");
    let config = |upstream: &str| {
        format!(
            "{HEAD}upstreams:\n  one: {{ hosts: [\"http://{}\"] }}\n  two: {{ hosts: [\"http://{}\"] }}\nroutes: [{{ path: /, upstream: {upstream} }}]\n",
            one.addr, two.addr
        )
    };
    std::fs::write(&file, config("one")).unwrap();
    let proxy = start(&file);
    let io = tokio::net::TcpStream::connect(proxy.listeners[0])
        .await
        .unwrap();
    let sender = support::h2_client(io).await;
    let get = || {
        Request::get(format!("http://{}/", proxy.listeners[0]))
            .body(())
            .unwrap()
    };
    let (_, body, _) = support::h2_exchange(&sender, get(), b"").await;
    assert!(String::from_utf8_lossy(&body).contains("upstream: one"));

    reload_with(&proxy, &file, &config("two")).await;
    let (_, body, _) = support::h2_exchange(&sender, get(), b"").await;
    assert!(
        String::from_utf8_lossy(&body).contains("upstream: two"),
        "a new stream on the open connection kept the old plan"
    );
    // The client's connection task must run to see the GOAWAY.
    drop(sender);
    tokio::task::spawn_blocking(move || proxy.shutdown())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_name_that_stops_resolving_keeps_its_last_answer_and_is_counted() {
    let first = Counted::start("first", "127.0.0.1:0").await;
    let port = first.addr.port();
    let dir = scratch("dns-failure");
    let hosts = dir.join("hosts");
    // No name server: names the hosts file lacks fail at once, offline.
    let resolv = dir.join("resolv.conf");
    std::fs::write(&resolv, "# no name servers\n").unwrap();
    std::fs::write(&hosts, "127.0.0.1 svc.test\n").unwrap();
    let file = dir.join("sluice.yaml");
    let config = |intervals: &str| {
        format!(
            "{HEAD}discovery: {{ {intervals}, hosts_file: {}, resolv_conf: {} }}\nupstreams:\n  svc: {{ hosts: [\"http://svc.test:{port}\"] }}\nroutes: [{{ path: /, upstream: svc }}]\n",
            hosts.display(),
            resolv.display()
        )
    };
    // Long intervals: only the reload resolves.
    std::fs::write(&file, config("min_interval: 30s, max_interval: 60s")).unwrap();
    let proxy = start(&file);
    let admin = proxy.admin.unwrap();
    let mut client = RawConn::connect(proxy.listeners[0]).await;
    assert!(client.get("/").await.text().contains("upstream: first"));
    assert_eq!(counter(admin, "sluice_discovery_failures_total").await, 0);

    // The name goes from the hosts file: a reload keeps its answer, counted.
    std::fs::write(&hosts, "").unwrap();
    assert_eq!(reload(admin).await.status, 200);
    assert_eq!(counter(admin, "sluice_discovery_failures_total").await, 1);
    let resolved = &admin_get(admin, "/config").await.json()["reload"]["resolved"];
    let name = format!("http://svc.test:{port}");
    assert_eq!(resolved[&name][0], first.addr.to_string(), "{resolved}");
    assert!(client.get("/").await.text().contains("upstream: first"));

    // Short intervals: the discovery rounds fail, count and keep it too.
    reload_with(
        &proxy,
        &file,
        &config("min_interval: 50ms, max_interval: 100ms"),
    )
    .await;
    let counted = until(Duration::from_secs(3), || async {
        counter(admin, "sluice_discovery_failures_total").await >= 4
    })
    .await;
    assert!(counted, "discovery rounds did not count their failures");
    assert!(RawConn::connect(proxy.listeners[0])
        .await
        .get("/")
        .await
        .text()
        .contains("upstream: first"));
    drop(client);
    proxy.shutdown();
}

#[tokio::test]
async fn a_slow_request_to_a_removed_host_finishes() {
    let slow = testkit::FakeServer::start(testkit::Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(800),
    });
    let fast = Counted::start("fast", "127.0.0.1:0").await;
    let dir = scratch("removed-host");
    let file = dir.join("sluice.yaml");
    let config = |host: SocketAddr| format!("{HEAD}{}", support::one_upstream(host, ""));
    std::fs::write(&file, config(slow.addr())).unwrap();
    let proxy = start(&file);
    let mut in_flight = RawConn::connect(proxy.listeners[0]).await;
    in_flight.send("GET / HTTP/1.1\r\nhost: app\r\n\r\n").await;
    let requests = || slow.requests();
    assert!(
        until(Duration::from_secs(3), || async { requests() == 1 }).await,
        "the slow request never reached the upstream"
    );

    // The host leaves the configuration while it answers.
    reload_with(&proxy, &file, &config(fast.addr)).await;
    let mut client = RawConn::connect(proxy.listeners[0]).await;
    assert!(client.get("/").await.text().contains("upstream: fast"));
    let finished = in_flight.read_response(false).await;
    assert_eq!(finished.status, 200);
    assert_eq!(finished.text(), "ok");
    drop((client, in_flight));
    proxy.shutdown();
}
