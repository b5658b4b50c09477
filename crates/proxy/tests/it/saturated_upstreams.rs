//! A proxy must never make a saturated backend worse (issue 26), over real
//! loopback sockets: a burst against a host with a small accept queue is
//! served, not turned into connect timeouts and 503s; a host that takes
//! only K connections is served through `max_connections`; a queue that
//! is really full answers 503 with a problem body after `timeouts.queue`;
//! and the only host, ejected, still gets traffic (the panic threshold).

use crate::support;

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use support::{echo, one_upstream, Proxy};
use testkit::{closed_port, Behaviour, FakeServer, RawConn};
use tokio::{
    net::{TcpListener, TcpSocket, TcpStream},
    sync::Semaphore,
    task::JoinSet,
};

/// A listener with an accept queue of two connections (backlog 1): a
/// SYN that finds it full is dropped, and TCP sends it again only after
/// a second.
fn narrow_listener() -> (TcpListener, SocketAddr) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    (socket.listen(1).unwrap(), addr)
}

/// `clients` clients at once, each with a connection of its own and one
/// GET; their statuses.
async fn burst(proxy: SocketAddr, clients: usize) -> Vec<u16> {
    let mut set = JoinSet::new();
    for _ in 0..clients {
        set.spawn(async move { RawConn::connect(proxy).await.get("/").await.status });
    }
    let mut statuses = Vec::new();
    while let Some(status) = set.join_next().await {
        statuses.push(status.unwrap());
    }
    statuses
}

/// The host's row in `/upstreams` (upstream `echo`, the only host).
async fn host_row(proxy: &Proxy) -> serde_json::Value {
    let body = RawConn::connect(proxy.admin())
        .await
        .get("/upstreams")
        .await
        .json();
    body["upstreams"]["echo"]["hosts"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_against_a_small_accept_queue_is_served_without_503s() {
    // A slow acceptor behind an accept queue of two, answering at once on
    // keep-alive connections: alone, it answers every request it gets.
    let (listener, addr) = narrow_listener();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(echo(stream, "narrow", Arc::default()));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    // The defaults: no `max_connections`, a connect timeout of 1 s.
    let proxy = Proxy::start(&one_upstream(addr, ""));
    let statuses = burst(proxy.addr(), 200).await;
    let served = statuses.iter().filter(|&&s| s == 200).count();
    assert_eq!(served, 200, "{statuses:?}");
    let row = host_row(&proxy).await;
    assert_eq!(row["state"], "healthy", "{row}");
    assert_eq!(row["ejections"], 0, "{row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_takes_k_connections_is_served_through_max_connections() {
    // A host that serves at most four connections at once and accepts no
    // more until one closes (a thread per connection).
    const K: usize = 4;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let open = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (open_, peak_) = (Arc::clone(&open), Arc::clone(&peak));
    tokio::spawn(async move {
        let slots = Arc::new(Semaphore::new(K));
        loop {
            let permit = Arc::clone(&slots).acquire_owned().await.unwrap();
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let now = open_.fetch_add(1, Ordering::SeqCst) + 1;
            peak_.fetch_max(now, Ordering::SeqCst);
            let open = Arc::clone(&open_);
            tokio::spawn(async move {
                echo(stream, "k", Arc::default()).await;
                open.fetch_sub(1, Ordering::SeqCst);
                drop(permit);
            });
        }
    });
    let proxy = Proxy::start(&one_upstream(addr, "    max_connections: 4\n"));
    let statuses = burst(proxy.addr(), 60).await;
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    assert!(peak.load(Ordering::SeqCst) <= K);
    let row = host_row(&proxy).await;
    assert_eq!(
        (row["state"].as_str(), row["failures"].as_u64()),
        (Some("healthy"), Some(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_503_with_a_problem_after_timeouts_queue() {
    // The only slot held by a request the host never answers.
    let silent = FakeServer::start(Behaviour::Silent);
    let proxy = Proxy::start(&one_upstream(
        silent.addr(),
        "    max_connections: 1\n    timeouts: { request: 3s, queue: 200ms }\n",
    ));
    let addr = proxy.addr();
    let first = tokio::spawn(async move { RawConn::connect(addr).await.get("/").await.status });
    // The slot is held once the silent host has the first request.
    assert!(
        support::live::until(Duration::from_secs(5), || async { silent.requests() == 1 }).await,
        "the first request never reached the upstream"
    );
    let second = proxy.conn().await.get("/").await;
    assert_eq!(second.status, 503);
    assert_eq!(
        second.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(
        second.json()["detail"],
        "every connection to the upstream is in use"
    );
    assert_eq!(first.await.unwrap(), 504);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_waits_for_a_connect_slot_at_most_timeouts_queue() {
    // A host whose accept queue is full and never drained: a connect to
    // it hangs until `timeouts.connect`.
    let (listener, addr) = narrow_listener();
    let mut fillers = Vec::new();
    for _ in 0..2 {
        fillers.push(TcpStream::connect(addr).await.unwrap());
    }
    let proxy = Proxy::start(&one_upstream(
        addr,
        "    retries: 0\n    max_connecting: 1\n    timeouts: { connect: 2s, queue: 200ms }\n",
    ));
    let proxy_addr = proxy.addr();
    let first =
        tokio::spawn(async move { RawConn::connect(proxy_addr).await.get("/").await.status });
    // The first request's connect holds the one `max_connecting` slot
    // (`/upstreams`' `connecting`).
    let connecting = || async {
        let body = RawConn::connect(proxy.admin())
            .await
            .get("/upstreams")
            .await
            .json();
        body["upstreams"]["echo"]["hosts"][0]["connecting"].as_u64()
    };
    assert!(
        support::live::until(Duration::from_secs(3), || async {
            connecting().await == Some(1)
        })
        .await,
        "the first request never started its connect: connecting {:?}",
        connecting().await
    );
    let second = proxy.conn().await.get("/").await;
    assert_eq!(second.status, 503, "{}", second.text());
    assert_eq!(second.json()["status"], 503);
    assert_eq!(
        second.json()["detail"],
        "every connection to the upstream is in use"
    );
    assert_eq!(first.await.unwrap(), 504, "the connect timed out");
    drop((listener, fillers));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_only_host_ejected_still_gets_traffic_and_is_back_at_once() {
    let addr = closed_port();
    let proxy = Proxy::start(&one_upstream(
        addr,
        "    retries: 0\n    health: { failures: 1, backoff: 30s }\n",
    ));
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/").await.status, 502);
    assert_eq!(host_row(&proxy).await["state"], "ejected");
    // Below the panic threshold (0 of 1 host in): tried, not a 503.
    let response = conn.get("/").await;
    assert_eq!(response.status, 502, "{}", response.text());
    // Back: served at once, not after the 30 s backoff.
    let listener = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(echo(stream, "back", Arc::default()));
        }
    });
    let response = conn.get("/").await;
    assert_eq!(response.status, 200);
    assert!(response.text().starts_with("upstream: back"));
}
