//! Graceful shutdown: in-flight requests finish, new connections are refused,
//! and the deadline bounds the wait.

use std::time::{Duration, Instant};

use backends::Backend;
use testkit::{serve_with, test_options, RawConn, ServeOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_requests_finish_after_shutdown() {
    let server = serve_with(
        Backend::Downstream,
        ServeOptions {
            workers: 2,
            ..test_options()
        },
    );
    let addr = server.addr();
    let mut conn = RawConn::connect(addr).await;
    let in_flight = tokio::spawn(async move {
        conn.post_json("/messages", r#"{"id":"late","delay":400}"#)
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
    let took = started.elapsed();

    let response = in_flight.await.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.json()["id"], "late");
    // Shutdown came while the handler ran: the answer says the connection ends.
    assert_eq!(response.header("connection"), Some("close"));
    assert!(
        took >= Duration::from_millis(200),
        "shutdown returned before the request finished: {took:?}"
    );
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_bounds_the_drain() {
    let server = serve_with(
        Backend::Downstream,
        ServeOptions {
            shutdown_deadline: Duration::from_millis(300),
            ..test_options()
        },
    );
    let mut conn = RawConn::connect(server.addr()).await;
    conn.send(testkit::request_bytes(
        "POST",
        "/messages",
        &["Content-Type: application/json"],
        br#"{"id":"slow","delay":10000}"#,
    ))
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "shutdown ignored its deadline: {took:?}"
    );
    assert!(conn.is_closed_by_peer().await);
}

#[tokio::test]
async fn idle_keep_alive_connections_do_not_delay_shutdown() {
    let server = serve_with(Backend::Petstore, test_options());
    let mut idle = RawConn::connect(server.addr()).await;
    assert_eq!(idle.get("/v1/pets").await.status, 200);
    let started = Instant::now();
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(idle.is_closed_by_peer().await);
}
