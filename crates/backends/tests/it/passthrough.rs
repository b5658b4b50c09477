//! `passthrough` in front of a real `downstream`, a dead one, a slow one and a broken one.

use std::time::Duration;

use backends::Backend;
use testkit::{closed_port, serve, serve_with, test_options, RawConn, ServeOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn passthrough_to(downstream: String, timeout: Duration) -> testkit::TestServer {
    serve_with(
        Backend::Passthrough,
        ServeOptions {
            downstream: downstream.parse().expect("downstream URL"),
            downstream_timeout: timeout,
            ..test_options()
        },
    )
}

#[tokio::test]
async fn forwards_to_the_downstream_and_relays_its_answer() {
    let downstream = serve(Backend::Downstream);
    let passthrough = passthrough_to(downstream.url(""), Duration::from_secs(5));
    let mut conn = RawConn::connect(passthrough.addr()).await;
    for i in 0..3 {
        let ack = conn
            .post_json(
                "/passthrough/message",
                &format!(r#"{{"id":"{i}","payload":"sample payload","delay":20}}"#),
            )
            .await;
        assert_eq!(ack.status, 200);
        assert_eq!(ack.header("content-type"), Some("application/json"));
        assert_eq!(
            ack.json(),
            serde_json::json!({"id": i.to_string(), "received": true})
        );
    }
    // The downstream's own 400 is relayed as is.
    let rejected = conn
        .post_json("/passthrough/message", r#"{"id":"1","delay":999999}"#)
        .await;
    assert_eq!(rejected.status, 400);
    assert_eq!(rejected.json()["errors"][0]["pointer"], "/delay");
}

#[tokio::test]
async fn dead_downstream_is_a_502() {
    let passthrough = passthrough_to(format!("http://{}", closed_port()), Duration::from_secs(5));
    let mut conn = RawConn::connect(passthrough.addr()).await;
    let response = conn
        .post_json("/passthrough/message", r#"{"id":"1","delay":0}"#)
        .await;
    assert_eq!(response.status, 502);
    assert_eq!(
        response.header("content-type"),
        Some("application/problem+json")
    );
    assert!(response.json()["detail"]
        .as_str()
        .unwrap()
        .contains("/messages"));
}

#[tokio::test]
async fn slow_downstream_is_a_504() {
    let downstream = serve(Backend::Downstream);
    let passthrough = passthrough_to(downstream.url(""), Duration::from_millis(200));
    let mut conn = RawConn::connect(passthrough.addr()).await;
    let response = conn
        .post_json("/passthrough/message", r#"{"id":"1","delay":800}"#)
        .await;
    assert_eq!(response.status, 504);
    assert_eq!(response.json()["status"], 504);
}

#[tokio::test]
async fn failing_downstream_is_a_502() {
    // A downstream that answers every request with a 500.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = socket.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let answer =
                        b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\noops";
                    if socket.write_all(answer).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    let passthrough = passthrough_to(format!("http://{addr}"), Duration::from_secs(5));
    let mut conn = RawConn::connect(passthrough.addr()).await;
    let response = conn
        .post_json("/passthrough/message", r#"{"id":"1"}"#)
        .await;
    assert_eq!(response.status, 502);
    assert!(response.json()["detail"].as_str().unwrap().contains("500"));
}

#[tokio::test]
async fn rejects_bad_requests_before_forwarding() {
    let passthrough = passthrough_to(format!("http://{}", closed_port()), Duration::from_secs(5));
    let mut conn = RawConn::connect(passthrough.addr()).await;
    assert_eq!(
        conn.post_json("/passthrough/message", "{nope").await.status,
        400
    );
    let text = conn
        .request(
            "POST",
            "/passthrough/message",
            &["Content-Type: text/plain"],
            b"x",
        )
        .await;
    assert_eq!(text.status, 415);
    let get = conn.get("/passthrough/message").await;
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST"));
    assert_eq!(conn.get("/passthrough").await.status, 404);
}
