//! `downstream` over real sockets: delays on timers, bounds, errors.

use std::time::{Duration, Instant};

use backends::Backend;
use testkit::{serve, RawConn};

#[tokio::test]
async fn answers_after_the_requested_delay() {
    let server = serve(Backend::Downstream);
    let mut conn = RawConn::connect(server.addr()).await;
    let started = Instant::now();
    let ack = conn
        .post_json(
            "/messages",
            r#"{"id":"1","payload":"sample payload","delay":150}"#,
        )
        .await;
    let elapsed = started.elapsed();
    assert_eq!(ack.status, 200);
    assert_eq!(ack.json(), serde_json::json!({"id":"1","received":true}));
    assert!(elapsed >= Duration::from_millis(150), "{elapsed:?}");
    // Milliseconds, not seconds: 150 s would be a thousand times over.
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");

    let immediate = conn.post_json("/messages", r#"{"id":2}"#).await;
    assert_eq!(
        immediate.json(),
        serde_json::json!({"id":2,"received":true})
    );
}

#[tokio::test]
async fn delay_out_of_bounds_is_rejected() {
    let server = serve(Backend::Downstream);
    let mut conn = RawConn::connect(server.addr()).await;
    for delay in ["60001", "-1", "\"300\"", "1.5"] {
        let response = conn
            .post_json("/messages", &format!(r#"{{"id":"1","delay":{delay}}}"#))
            .await;
        assert_eq!(response.status, 400, "delay {delay}");
        assert_eq!(response.json()["errors"][0]["pointer"], "/delay");
    }
    let no_id = conn.post_json("/messages", r#"{"delay":1}"#).await;
    assert_eq!(no_id.json()["errors"][0]["pointer"], "/id");
}

#[tokio::test]
async fn wrong_method_path_and_media_type() {
    let server = serve(Backend::Downstream);
    let mut conn = RawConn::connect(server.addr()).await;
    let get = conn.get("/messages").await;
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST"));
    assert_eq!(conn.get("/other").await.status, 404);
    let text = conn
        .request("POST", "/messages", &["Content-Type: text/plain"], b"hi")
        .await;
    assert_eq!(text.status, 415);
}

/// Delays run on timers: 1,000 concurrent requests of 300 ms on one worker
/// finish in about 300 ms, not 300 s (a delay that blocked the worker
/// thread); the limit is a tenth of that. (`crates/sluice/tests` runs 10,000
/// against the binary, where the client and server have separate fd limits.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_delays_overlap() {
    testkit::raise_fd_limit();
    let server = serve(Backend::Downstream);
    let conns = testkit::connect_many(server.addr(), 1000).await;
    let started = Instant::now();
    let statuses = testkit::post_json_on_each(conns, "/messages", |i| {
        format!(r#"{{"id":"{i}","delay":300}}"#)
    })
    .await;
    assert!(statuses.iter().all(|&status| status == 200));
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(30),
        "1000 x 300 ms took {elapsed:?}"
    );
}
