//! The pool's line of waiting requests: first come, first served.

use std::time::Duration;

use super::*;
use crate::{config::UpstreamSettings, telemetry::Metrics, upstream::discovery::Answers};

const AT: (UpstreamId, HostId) = (UpstreamId::new(0), HostId::new(0));

fn upstream() -> Upstream {
    upstream_with("")
}

fn upstream_with(yaml: &str) -> Upstream {
    let yaml = format!("hosts: [\"http://10.255.255.1:80\"]\n{yaml}");
    let settings: UpstreamSettings = serde_saphyr::from_str(&yaml).unwrap();
    Upstream::new("svc", &settings, &Answers::new(), 1).unwrap()
}

/// A real connection over loopback (its peer is never read).
async fn conn(listener: &std::net::TcpListener) -> UpstreamConn {
    let tcp = TcpStream::connect(listener.local_addr().unwrap());
    let stream = UpstreamStream::Plain(tcp.await.unwrap());
    UpstreamConn::new(stream, AT.0, AT.1)
}

#[tokio::test]
async fn connections_given_back_go_to_waiting_requests_first_come_first_served() {
    let (config, pool, metrics) = (upstream(), Pool::new(0), Metrics::new(1));
    let shard = metrics.shard(0);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let now = Instant::now();
    let mut first = pool.wait(&config, shard, AT, None, now).unwrap_err();
    let mut second = pool.wait(&config, shard, AT, None, now).unwrap_err();
    pool.put(&config, shard, conn(&listener).await, now);
    // Given to the first, not pooled: a newcomer finds none.
    assert!(pool.take(&config, shard, AT, None, now).is_none());
    let within = |f| tokio::time::timeout(Duration::from_secs(5), f);
    assert!(within(first.given_back()).await.unwrap().reused);
    // Nothing is in its hands (asked of the channel, no wait).
    assert!(
        second.given.try_recv().is_err(),
        "the second waits for the next one"
    );
    pool.put(&config, shard, conn(&listener).await, now);
    assert!(within(second.given_back()).await.is_ok());
    // Nobody waits now: given back, it is pooled for the next request.
    pool.put(&config, shard, conn(&listener).await, now);
    assert!(pool.take(&config, shard, AT, None, now).is_some());
}

#[tokio::test]
async fn a_request_that_stops_waiting_passes_its_connection_on() {
    let (config, pool, metrics) = (upstream(), Pool::new(0), Metrics::new(1));
    let shard = metrics.shard(0);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let now = Instant::now();
    let gone = pool.wait(&config, shard, AT, None, now).unwrap_err();
    let mut next = pool.wait(&config, shard, AT, None, now).unwrap_err();
    // Handed to the first, which leaves (its client went away, or a
    // slot to open one came first) before taking it.
    pool.put(&config, shard, conn(&listener).await, now);
    drop(gone);
    let given = tokio::time::timeout(Duration::from_secs(5), next.given_back());
    assert!(given.await.is_ok(), "the next in line gets it");
    drop(next);
    // One that leaves before anything is given back leaves the line.
    let left = pool.wait(&config, shard, AT, None, now).unwrap_err();
    drop(left);
    pool.put(&config, shard, conn(&listener).await, now);
    assert!(pool.take(&config, shard, AT, None, now).is_some());
}

#[tokio::test]
async fn a_connection_keyed_by_client_serves_its_client_whoever_waits() {
    let config = upstream_with("proxy_protocol: v1\n");
    let (pool, metrics) = (Pool::new(0), Metrics::new(1));
    let shard = metrics.shard(0);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let now = Instant::now();
    let (alice, bob) = (
        Some("10.0.0.1:1".parse().unwrap()),
        Some("10.0.0.2:2".parse().unwrap()),
    );
    let mut bob_waits = pool.wait(&config, shard, AT, bob, now).unwrap_err();
    let mut for_alice = conn(&listener).await;
    for_alice.proxied_for = alice;
    pool.put(&config, shard, for_alice, now);
    // Bob waits, but Alice's connection is hers to take.
    assert!(pool.take(&config, shard, AT, alice, now).is_some());
    let mut for_bob = conn(&listener).await;
    for_bob.proxied_for = bob;
    pool.put(&config, shard, for_bob, now);
    let given = tokio::time::timeout(Duration::from_secs(5), bob_waits.given_back());
    assert_eq!(given.await.unwrap().proxied_for, bob);
}

#[tokio::test]
async fn with_max_idle_0_nothing_is_handed_over() {
    let config = upstream_with("pool: { max_idle: 0 }\n");
    let (pool, metrics) = (Pool::new(0), Metrics::new(1));
    let shard = metrics.shard(0);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let now = Instant::now();
    let mut waiting = pool.wait(&config, shard, AT, None, now).unwrap_err();
    pool.put(&config, shard, conn(&listener).await, now);
    assert!(waiting.given.try_recv().is_err(), "closed, not reused");
}
