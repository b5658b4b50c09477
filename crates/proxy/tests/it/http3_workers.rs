//! HTTP/3 on every worker (server/h3/steer.rs, docs/LIFECYCLE-h3.md):
//! with `workers: 2` each worker's QUIC endpoint has a UDP socket of its
//! own, the kernel spreads clients over them by address, and a client
//! whose address changes mid-connection keeps being served by the
//! endpoint that holds its connection, whichever socket its packets now
//! reach.

use crate::h3_support;
use crate::support;

use http::StatusCode;
use support::{live::admin_get, Echo};
use testkit::TestCerts;

/// `connections.NAME` of the proxy's `/stats.json`.
async fn stats(admin: std::net::SocketAddr, name: &str) -> serde_json::Value {
    let stats = admin_get(admin, "/stats.json").await.json();
    stats["connections"][name].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_spread_over_both_workers_and_one_that_moves_stays_served() {
    let certs = TestCerts::generate();
    let echo = Echo::start("e").await;
    let proxy = h3_support::proxy_on(2, &certs, "", &support::one_upstream(echo.addr, ""));

    // Each client from a port of its own: the kernel's hash of the
    // address spreads them (all 24 on one socket: one chance in 2^23).
    const CLIENTS: u64 = 24;
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let mut client = h3_support::Client::connect(proxy.addr(), &certs).await;
        assert_eq!(client.get("/spread").await.0.status(), StatusCode::OK);
        clients.push(client);
    }
    let per_worker = stats(proxy.admin(), "h3_connections_per_worker").await;
    let counts: Vec<u64> = per_worker
        .as_array()
        .unwrap_or_else(|| panic!("no per-worker counts: {per_worker}"))
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(counts.len(), 2, "{counts:?}");
    assert_eq!(counts.iter().sum::<u64>(), CLIENTS, "{counts:?}");
    assert!(
        counts.iter().all(|&n| n > 0),
        "one worker served all: {counts:?}"
    );
    let streams = stats(proxy.admin(), "h3_streams_per_worker").await;
    assert_eq!(
        streams,
        serde_json::json!(counts),
        "one request per connection"
    );
    drop(clients);

    // One connection moved to a new source port sixteen times: its
    // packets reach either socket (all sixteen on its own: one chance in
    // 2^16), and every request on it is answered.
    let mut moving = h3_support::Client::connect(proxy.addr(), &certs).await;
    assert_eq!(moving.get("/before").await.0.status(), StatusCode::OK);
    for hop in 0..16 {
        moving.rebind();
        let (response, body) = moving.get(&format!("/moved/{hop}")).await;
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "after move {hop}: {body}"
        );
        assert!(body.contains(&format!("GET /moved/{hop} ")), "{body}");
    }
    let steered = stats(proxy.admin(), "h3_datagrams_steered").await;
    assert!(
        steered.as_u64().is_some_and(|n| n > 0),
        "no datagram was handed between workers: {steered}"
    );
    // Still the one connection: no new one was made for the moves.
    let connections = stats(proxy.admin(), "h3_connections").await;
    assert_eq!(connections, CLIENTS + 1, "{connections}");
}
