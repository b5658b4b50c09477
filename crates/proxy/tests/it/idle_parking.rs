//! Parked connections (crates/proxy/src/session/park.rs): an HTTP/1.1
//! client connection idle for a second leaves its task for the parking
//! lot, and comes back when its client sends again, is closed at its
//! idle timeout, when its client goes, and on shutdown.

use crate::support;

use std::{net::SocketAddr, time::Duration};

use support::{one_upstream, Echo, Proxy};
use testkit::RawConn;
use tokio::{io::AsyncReadExt, net::TcpStream};

/// Until `count` connections are parked: one second idle, then the lot's
/// quarter-second sweep; ten seconds before the test fails instead.
async fn parked(admin: SocketAddr, count: i64) {
    let seen = support::live::until(Duration::from_secs(10), || async {
        gauge(admin, "sluice_parked_connections").await == count
    })
    .await;
    assert!(seen, "never {count} parked connections");
}

/// A gauge of the admin's `/metrics`.
async fn gauge(admin: SocketAddr, name: &str) -> i64 {
    let text = RawConn::connect(admin).await.get("/metrics").await.text();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[tokio::test]
async fn an_idle_connection_is_parked_and_served_again() {
    let echo = Echo::start("echo").await;
    let proxy = Proxy::start(&one_upstream(echo.addr, ""));
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/first").await.status, 200);
    parked(proxy.admin(), 1).await;
    assert_eq!(gauge(proxy.admin(), "sluice_open_connections").await, 1);
    // The same connection, served again: twice, the second time from a
    // task that was not parked in between.
    let answer = conn.get("/second").await;
    assert_eq!(answer.status, 200);
    assert!(answer.text().contains("GET /second"), "{}", answer.text());
    assert_eq!(conn.get("/third").await.status, 200);
    assert_eq!(gauge(proxy.admin(), "sluice_parked_connections").await, 0);
    assert_eq!(echo.requests.load(std::sync::atomic::Ordering::Relaxed), 3);
}

/// A connection is idle from its answer, not from its request: after an
/// exchange longer than the idle timeout (and than the park delay) the
/// client's next request, sent at once, is served on the same connection,
/// which was neither closed nor parked meanwhile. (Counted from the
/// request, such a connection was parked or closed the moment it was
/// answered, and every slow exchange made its connection slower still:
/// issue 52's starved connections.)
#[tokio::test]
async fn idle_time_starts_when_the_answer_has_gone() {
    let slow = testkit::FakeServer::start(testkit::Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(1500),
    });
    let proxy = Proxy::start(&one_upstream(slow.addr(), "limits: { idle_timeout: 1s }\n"));
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/slow").await.status, 200);
    assert_eq!(gauge(proxy.admin(), "sluice_parked_connections").await, 0);
    assert_eq!(
        conn.get("/again").await.status,
        200,
        "served on the same connection"
    );
    assert_eq!(slow.requests(), 2);
}

#[tokio::test]
async fn a_parked_connection_closes_at_its_idle_timeout() {
    let echo = Echo::start("echo").await;
    let proxy = Proxy::start(&one_upstream(echo.addr, "limits: { idle_timeout: 2s }\n"));
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/").await.status, 200);
    parked(proxy.admin(), 1).await;
    // Closed by the lot within its sweep of the deadline (2 s after the
    // request), not at once and not left open.
    assert!(conn.is_closed_by_peer().await);
    assert_eq!(gauge(proxy.admin(), "sluice_parked_connections").await, 0);
    // The close can reach the client before the proxy has counted the
    // connection gone (seen under load): polled, not read once.
    let admin = proxy.admin();
    let zero = support::live::until(Duration::from_secs(10), || async {
        gauge(admin, "sluice_open_connections").await == 0
    })
    .await;
    assert!(zero, "the closed connection is still counted open");
}

#[tokio::test]
async fn a_client_that_goes_away_while_parked_frees_its_place() {
    let echo = Echo::start("echo").await;
    let proxy = Proxy::start(&one_upstream(echo.addr, "limits: { max_connections: 1 }\n"));
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/").await.status, 200);
    parked(proxy.admin(), 1).await;
    drop(conn);
    // With max_connections 1, a new client is served only once the parked
    // one's permit is given back.
    let mut next = proxy.conn().await;
    assert_eq!(next.get("/").await.status, 200);
    assert_eq!(gauge(proxy.admin(), "sluice_parked_connections").await, 0);
}

#[tokio::test]
async fn a_connection_parked_before_its_first_bytes_may_still_speak_h2c() {
    let echo = Echo::start("echo").await;
    let proxy = Proxy::start(&one_upstream(echo.addr, ""));
    let stream = TcpStream::connect(proxy.addr()).await.unwrap();
    parked(proxy.admin(), 1).await;
    let mut client = support::h2_client(stream).await;
    let request = http::Request::get(format!("http://{}/h2", proxy.addr()))
        .body(())
        .unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    assert_eq!(response.await.unwrap().status(), 200);
}

#[test]
fn shutdown_closes_parked_connections() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (proxy, mut conn) = runtime.block_on(async {
        let echo = Echo::start("echo").await;
        let proxy = Proxy::start(&one_upstream(echo.addr, ""));
        let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut raw = RawConn::connect(proxy.addr()).await;
        assert_eq!(raw.get("/").await.status, 200);
        parked(proxy.admin(), 2).await;
        // Keep `conn` (parked before its first bytes) to watch it close.
        let _ = &mut conn;
        (proxy, conn)
    });
    let started = std::time::Instant::now();
    drop(proxy);
    // A shutdown that waited for the parked connection would end only at
    // `limits.shutdown_deadline` (10 s by default): half of it proves it
    // did not wait, with room for a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown waited for parked connections"
    );
    runtime.block_on(async {
        let mut scratch = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut scratch)).await;
        assert!(matches!(read, Ok(Ok(0))), "{read:?}");
    });
}
