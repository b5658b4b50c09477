//! Graceful shutdown: in-flight requests finish, new connections are refused,
//! and the deadline bounds the wait.

use std::time::{Duration, Instant};

use backends::Backend;
use testkit::{
    serve_with, test_options, until, Behaviour, FakeServer, RawConn, ServeOptions, TestServer,
};

/// `passthrough` in front of a test downstream that counts what reaches it
/// and answers as `behaviour` says: a request is in flight at the
/// passthrough exactly when the downstream has it.
fn passthrough_to(downstream: &FakeServer, shutdown_deadline: Duration) -> TestServer {
    serve_with(
        Backend::Passthrough,
        ServeOptions {
            workers: 2,
            downstream: downstream.url("").parse().expect("downstream URL"),
            downstream_timeout: Duration::from_secs(30),
            shutdown_deadline,
            ..test_options()
        },
    )
}

/// Waits until the downstream has the request: the handler is running.
async fn in_flight(downstream: &FakeServer) {
    assert!(
        until(Duration::from_secs(5), || async {
            downstream.requests() == 1
        })
        .await,
        "the request never reached the downstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_requests_finish_after_shutdown() {
    const ANSWER_AFTER: Duration = Duration::from_millis(400);
    let downstream = FakeServer::start(Behaviour::DelayEvery {
        nth: 1,
        delay: ANSWER_AFTER,
    });
    let server = passthrough_to(&downstream, Duration::from_secs(10));
    let addr = server.addr();
    let mut conn = RawConn::connect(addr).await;
    let request = tokio::spawn(async move {
        conn.post_json("/passthrough/message", r#"{"id":"late","delay":0}"#)
            .await
    });
    in_flight(&downstream).await;
    let arrived = Instant::now();
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
    let returned = arrived.elapsed();

    let response = request.await.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"ok");
    // Shutdown came while the handler ran: the answer says the connection ends.
    assert_eq!(response.header("connection"), Some("close"));
    // The downstream answers ANSWER_AFTER after the request reached it;
    // shutdown waited for that answer (less the moments between the
    // request's arrival and this test seeing it).
    assert!(
        returned >= ANSWER_AFTER - Duration::from_millis(50),
        "shutdown returned before the request finished: {returned:?}"
    );
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_bounds_the_drain() {
    const DEADLINE: Duration = Duration::from_millis(300);
    let downstream = FakeServer::start(Behaviour::Silent);
    let server = passthrough_to(&downstream, DEADLINE);
    let mut conn = RawConn::connect(server.addr()).await;
    conn.send(testkit::request_bytes(
        "POST",
        "/passthrough/message",
        &["Content-Type: application/json"],
        br#"{"id":"slow","delay":0}"#,
    ))
    .await;
    in_flight(&downstream).await;
    let started = Instant::now();
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
    let took = started.elapsed();
    // The downstream never answers: shutdown ends at its deadline.
    assert!(
        took >= DEADLINE,
        "shutdown ended before its deadline: {took:?}"
    );
    // Without the deadline it would wait for the downstream timeout (30 s).
    assert!(
        took < Duration::from_secs(10),
        "shutdown ignored its deadline: {took:?}"
    );
    assert!(conn.is_closed_by_peer().await);
}

#[tokio::test]
async fn idle_keep_alive_connections_do_not_delay_shutdown() {
    let server = serve_with(Backend::Petstore, test_options());
    let mut idle = RawConn::connect(server.addr()).await;
    assert_eq!(idle.get("/v1/pets").await.status, 200);
    let deadline = test_options().shutdown_deadline;
    let started = Instant::now();
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
    // A shutdown that waited for the idle connection would last until its
    // deadline: it is closed instead.
    let took = started.elapsed();
    assert!(
        took < deadline,
        "took {took:?}, the deadline is {deadline:?}"
    );
    assert!(idle.is_closed_by_peer().await);
}
