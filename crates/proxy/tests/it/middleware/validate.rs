//! The `validate` handler: requests checked against an OpenAPI spec
//! before the upstream sees them, and responses that break it counted
//! without breaking the client.

use std::sync::atomic::Ordering;

use super::{counter, proxy_with};
use crate::support::{Echo, Proxy};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_checks_requests_against_the_openapi_spec() {
    let echo = Echo::start("e").await;
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../specs/petstore.yaml");
    let proxy = proxy_with(
        echo.addr,
        &format!("middleware:\n  validate: {{ openapi: \"{spec}\", max_body_bytes: 256 }}\n"),
        "  - { path: /, chain: [validate], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/v1/pets").await.status, 200);
    assert_eq!(conn.get("/v1/pets?limit=10").await.status, 200);

    let invalid = conn.get("/v1/pets?limit=0").await;
    assert_eq!(invalid.status, 400);
    assert_eq!(invalid.json()["errors"][0]["pointer"], "/query/limit");

    let pet = br#"{"id":3,"name":"kitty","tag":"cat"}"#;
    let json = ["Content-Type: application/json"];
    let created = conn.request("POST", "/v1/pets", &json, pet).await;
    assert!(created.status == 200, "{}", created.text());
    assert!(
        created.text().contains("body-bytes: 35"),
        "the body reached the upstream whole"
    );

    // Every violation is listed; the connection goes on after the 400.
    let bad = conn
        .request("POST", "/v1/pets", &json, br#"{"id":"three","tag":7}"#)
        .await;
    assert_eq!(bad.status, 400);
    let errors = bad.json()["errors"].as_array().unwrap().clone();
    assert!(errors.len() >= 2, "{errors:?}");
    assert!(errors
        .iter()
        .all(|e| e["pointer"].as_str().unwrap().starts_with("/body")));
    assert_eq!(
        conn.request("POST", "/v1/pets", &json, b"{not json")
            .await
            .status,
        400
    );
    let wrong_type = conn
        .request("POST", "/v1/pets", &["Content-Type: text/plain"], pet)
        .await;
    assert_eq!(wrong_type.status, 415);
    let too_big = conn
        .request(
            "POST",
            "/v1/pets",
            &json,
            format!("{{\"name\":\"{}\"}}", "x".repeat(300)).as_bytes(),
        )
        .await;
    assert_eq!(too_big.status, 413);

    let mut conn = proxy.conn().await;
    let not_allowed = conn.request("DELETE", "/v1/pets", &[], b"").await;
    assert_eq!(not_allowed.status, 405);
    assert_eq!(not_allowed.header("allow"), Some("GET, POST"));
    assert_eq!(conn.get("/v1/nope").await.status, 404);
    // A body the validator must see has to come with a length.
    conn.send("POST /v1/pets HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 411);
    assert_eq!(
        echo.requests.load(Ordering::SeqCst),
        3,
        "only the valid requests got through"
    );
}

/// An upstream answering every request with `status`, `content_type` and `body`.
async fn fixed_upstream(
    status: &'static str,
    content_type: &'static str,
    body: &'static str,
) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    let answer = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_reports_responses_that_break_the_spec_without_breaking_clients() {
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../specs/petstore.yaml");
    let good = testkit::serve(backends::Backend::Petstore);
    let bad = fixed_upstream("200 OK", "application/json", r#"[{"id":"one","name":7}]"#).await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  good: {{ hosts: [\"http://{}\"] }}\n  bad: {{ hosts: [\"http://{bad}\"] }}\nmiddleware:\n  validate: {{ openapi: \"{spec}\", responses: true }}\nroutes:\n  - {{ path: /, chain: [validate], upstream: good }}\n  - {{ path: /, host: bad.example, chain: [validate], upstream: bad }}\n",
        good.addr()
    ));
    let failures = || counter(proxy.admin(), "sluice_validate_response_failures_total");
    let mut conn = proxy.conn().await;
    let response = conn.get("/v1/pets").await;
    assert_eq!(response.status, 200);
    assert!(response.text().contains("catten"));
    assert_eq!(failures().await, 0, "the petstore answers as its spec says");

    conn.send("GET /v1/pets HTTP/1.1\r\nHost: bad.example\r\n\r\n")
        .await;
    let response = conn.read_response(false).await;
    assert_eq!(response.status, 200, "the client still gets the answer");
    assert_eq!(response.text(), r#"[{"id":"one","name":7}]"#);
    assert_eq!(failures().await, 1);
}
