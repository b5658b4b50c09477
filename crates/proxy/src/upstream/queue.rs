//! A connection for a request that found no idle one to its host: a new
//! one when fewer than `max_connecting` are being opened to the host, or
//! one another request gives back to the worker's pool meanwhile,
//! whichever comes first, within `timeouts.queue` (HAProxy's queue).
//!
//! Against a saturated host this is what keeps the proxy from making it
//! worse: a burst of requests does not become a burst of SYNs past the
//! host's accept queue (each dropped one is sent again by TCP only after
//! a second, by when `timeouts.connect` is over), and a request whose
//! connect is held up takes the first connection that comes free instead.

use std::{
    future::pending,
    net::SocketAddr,
    pin::pin,
    time::{Duration, Instant},
};

use super::{
    connect::{self, ConnectError},
    pool::{Pool, UpstreamConn},
    Upstream,
};
use crate::{
    ids::{HostId, UpstreamId},
    telemetry::Shard,
};

/// How long a connect may take before a connection given back serves
/// the request instead (at most half of `timeouts.connect`). Far more
/// than a handshake takes, even across a continent; far less than the
/// second after which TCP sends a dropped SYN again. Sooner, a connect
/// that was about to complete would be thrown away.
const HELD_UP: Duration = Duration::from_millis(250);

/// Why a request got no connection.
#[derive(Debug)]
pub(crate) enum NoConnection {
    /// Opening one failed. `busy`: the host answered other requests
    /// while this one was being opened (saturated, not gone).
    Connect { err: ConnectError, busy: bool },
    /// No slot to open one, and none given back, within `timeouts.queue`.
    Queue,
}

/// A connection to `host` of `config` (`upstream` in the plan) for a
/// request that found none idle in `pool`: a new one, or one given back
/// to `pool` meanwhile (unless `fresh_only`). `client`: the client's
/// address and the one it connected to, for an upstream that wants a
/// PROXY protocol header (a connection given back must be its own).
pub(crate) async fn connection(
    config: &Upstream,
    (pool, metrics): (&Pool, &Shard),
    (upstream, host): (UpstreamId, HostId),
    client: Option<(SocketAddr, SocketAddr)>,
    fresh_only: bool,
) -> Result<UpstreamConn, NoConnection> {
    let opening = config.balancer.opening();
    let key = client.map(|(client, _)| client);
    let at = (upstream, host);
    let pooled = || pool.take(config, metrics, at, key, Instant::now());
    let returned = || async {
        if fresh_only {
            return pending().await;
        }
        match pool.wait(config, metrics, at, key, Instant::now()) {
            Ok(conn) => conn,
            Err(mut waiting) => waiting.given_back().await,
        }
    };
    let permit = match opening.try_take(host) {
        Some(permit) => permit,
        None => {
            let deadline = tokio::time::sleep(config.timeouts.queue);
            tokio::select! {
                permit = opening.take(host) => permit,
                conn = returned() => return Ok(conn),
                () = deadline => return Err(NoConnection::Queue),
            }
        }
    };
    if let Some(conn) = (!fresh_only).then(pooled).flatten() {
        return Ok(conn);
    }
    let answers = config.balancer.answers(host);
    let mut open = pin!(connect::open(config, host, None, client));
    let held_up = HELD_UP.min(config.timeouts.connect / 2);
    let opened = match tokio::time::timeout(held_up, open.as_mut()).await {
        Ok(opened) => opened,
        // Held up (its SYN dropped?): a connection that comes free serves instead.
        Err(_) => tokio::select! {
            opened = open.as_mut() => opened,
            conn = returned() => return Ok(conn),
        },
    };
    drop(permit);
    match opened {
        Ok(stream) => {
            metrics.upstream_open(upstream, 1);
            let mut conn = UpstreamConn::new(stream, upstream, host);
            conn.proxied_for = key.filter(|_| config.proxy_protocol.is_some());
            Ok(conn)
        }
        Err(err) => Err(NoConnection::Connect {
            err,
            busy: config.balancer.answers(host) > answers,
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::{future::Future, task::Poll, time::Duration};

    use super::*;
    use crate::{config::UpstreamSettings, telemetry::Metrics, upstream::discovery::Answers};

    const H: HostId = HostId::new(0);

    fn upstream(yaml: &str) -> Upstream {
        // 10.255.255.1: never dialled, the tests hold every slot.
        let yaml = format!("hosts: [\"http://10.255.255.1:80\"]\n{yaml}");
        let settings: UpstreamSettings = serde_saphyr::from_str(&yaml).unwrap();
        Upstream::new("svc", &settings, &Answers::new(), 1).unwrap()
    }

    /// A connection given back while a request waits for one goes to that
    /// request, not to one that comes after it (issue 52: newcomers taking
    /// what was given back left the waiting clients unserved for seconds).
    #[tokio::test]
    async fn a_connection_given_back_goes_to_the_waiting_request_first() {
        let config = upstream("max_connecting: 1\n");
        let (pool, metrics) = (Pool::new(0), Metrics::new(1));
        let (shard, id) = (metrics.shard(0), UpstreamId::new(0));
        let held = config.balancer.opening().try_take(H).unwrap();
        let mut waiting = pin!(connection(&config, (&pool, shard), (id, H), None, false));
        let polled = std::future::poll_fn(|cx| Poll::Ready(waiting.as_mut().poll(cx))).await;
        assert!(polled.is_pending(), "no slot and no connection: it waits");
        // A connection comes back to the pool; a newcomer finds none for it.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let conn = UpstreamConn::new(connect::UpstreamStream::Plain(tcp), id, H);
        pool.put(&config, shard, conn, Instant::now());
        let newcomer = pool.take(&config, shard, (id, H), None, Instant::now());
        assert!(newcomer.is_none(), "a newcomer must not take it first");
        let served = tokio::time::timeout(Duration::from_secs(5), waiting).await;
        let conn = served.expect("the waiting request gets it").unwrap();
        assert!(conn.reused);
        drop(held);
        // Nobody waits now: a newcomer takes what is given back.
        pool.put(&config, shard, conn, Instant::now());
        assert!(pool
            .take(&config, shard, (id, H), None, Instant::now())
            .is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn with_every_slot_opening_a_request_waits_its_queue_timeout() {
        let config = upstream("max_connecting: 1\ntimeouts: { queue: 3s }\n");
        let (pool, metrics) = (Pool::new(0), Metrics::new(1));
        let held = config.balancer.opening().try_take(H).unwrap();
        let started = tokio::time::Instant::now();
        let id = UpstreamId::new(0);
        let waited = connection(&config, (&pool, metrics.shard(0)), (id, H), None, false).await;
        assert!(matches!(waited, Err(NoConnection::Queue)), "{waited:?}");
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        drop(held);
    }

    #[tokio::test(start_paused = true)]
    async fn the_defaults_queue_for_10s_behind_256_connects() {
        let config = upstream("");
        assert_eq!(config.timeouts.queue, Duration::from_secs(10));
        let opening = config.balancer.opening();
        let held: Vec<_> = (0..256).map_while(|_| opening.try_take(H)).collect();
        assert_eq!(held.len(), 256);
        assert!(opening.try_take(H).is_none());
        let (pool, metrics) = (Pool::new(0), Metrics::new(1));
        let started = tokio::time::Instant::now();
        let id = UpstreamId::new(0);
        let waited = connection(&config, (&pool, metrics.shard(0)), (id, H), None, true).await;
        assert!(matches!(waited, Err(NoConnection::Queue)), "{waited:?}");
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }
}
