//! `petstore` over real sockets: every route and every error path.

use backends::{Backend, MAX_JSON_BODY, PETS};
use testkit::{request_bytes, serve, RawConn};

#[tokio::test]
async fn lists_pets_exactly() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let response = conn.get("/v1/pets").await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert_eq!(response.text(), PETS);
    assert_eq!(
        PETS,
        r#"[{"id":1,"name":"catten","tag":"cat"},{"id":2,"name":"doggy","tag":"dog"}]"#
    );
    let limited = conn.get("/v1/pets?limit=1").await;
    assert_eq!(
        limited.json(),
        serde_json::json!([{"id":1,"name":"catten","tag":"cat"}])
    );
    let bad = conn.get("/v1/pets?limit=0").await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["errors"][0]["pointer"], "/query/limit");
}

#[tokio::test]
async fn shows_one_pet() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let pet = conn.get("/v1/pets/2").await;
    assert_eq!(pet.status, 200);
    assert_eq!(
        pet.json(),
        serde_json::json!({"id":2,"name":"doggy","tag":"dog"})
    );

    let missing = conn.get("/v1/pets/99").await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(missing.json()["status"], 404);

    let not_numeric = conn.get("/v1/pets/rex").await;
    assert_eq!(not_numeric.status, 400);
    assert_eq!(not_numeric.json()["errors"][0]["pointer"], "/path/petId");
}

#[tokio::test]
async fn creates_a_valid_pet() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let created = conn
        .post_json("/v1/pets", r#"{"id":3,"name":"rex","tag":"dog"}"#)
        .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.header("location"), Some("/v1/pets/3"));
    assert_eq!(
        created.json(),
        serde_json::json!({"id":3,"name":"rex","tag":"dog"})
    );
}

#[tokio::test]
async fn rejects_invalid_pets_naming_the_field() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let missing_name = conn.post_json("/v1/pets", r#"{"id":3}"#).await;
    assert_eq!(missing_name.status, 400);
    assert_eq!(
        missing_name.header("content-type"),
        Some("application/problem+json")
    );
    let problem = missing_name.json();
    assert_eq!(problem["errors"][0]["pointer"], "/name");
    assert_eq!(problem["errors"][0]["detail"], "is required");

    let wrong_types = conn.post_json("/v1/pets", r#"{"id":"3","name":7}"#).await;
    let pointers: Vec<_> = wrong_types.json()["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(pointers, ["/id", "/name"]);

    let malformed = conn.post_json("/v1/pets", r#"{"id":3,"#).await;
    assert_eq!(malformed.status, 400);
    assert!(malformed.json()["detail"]
        .as_str()
        .unwrap()
        .contains("malformed JSON"));
}

#[tokio::test]
async fn rejects_non_json_and_oversize_bodies() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let text = conn
        .request("POST", "/v1/pets", &["Content-Type: text/plain"], b"{}")
        .await;
    assert_eq!(text.status, 415);
    assert_eq!(
        text.header("content-type"),
        Some("application/problem+json")
    );
    let untyped = conn.request("POST", "/v1/pets", &[], b"{}").await;
    assert_eq!(untyped.status, 415);

    let huge = vec![b' '; MAX_JSON_BODY + 1];
    let mut conn = RawConn::connect(server.addr()).await;
    conn.send(request_bytes(
        "POST",
        "/v1/pets",
        &["Content-Type: application/json"],
        &huge,
    ))
    .await;
    let too_large = conn.read_response(false).await;
    assert_eq!(too_large.status, 413);
    assert_eq!(too_large.json()["status"], 413);
}

#[tokio::test]
async fn unknown_paths_and_wrong_methods() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    for path in ["/", "/v1/pet", "/v1/pets/1/toys", "/v2/pets"] {
        let response = conn.get(path).await;
        assert_eq!(response.status, 404, "{path}");
        assert_eq!(
            response.header("content-type"),
            Some("application/problem+json")
        );
    }
    let delete = conn.request("DELETE", "/v1/pets", &[], b"").await;
    assert_eq!(delete.status, 405);
    assert_eq!(delete.header("allow"), Some("GET, HEAD, POST"));
    let post_one = conn.request("POST", "/v1/pets/1", &[], b"").await;
    assert_eq!(post_one.status, 405);
    assert_eq!(post_one.header("allow"), Some("GET, HEAD"));
}

#[tokio::test]
async fn head_has_length_but_no_body() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let head = conn.request("HEAD", "/v1/pets", &[], b"").await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("74"));
    // The connection is still in sync: the next response parses.
    assert_eq!(conn.get("/v1/pets/1").await.status, 200);
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let mut batch = Vec::new();
    batch.extend(request_bytes("GET", "/v1/pets/1", &[], b""));
    batch.extend(request_bytes(
        "POST",
        "/v1/pets",
        &["Content-Type: application/json"],
        br#"{"id":9,"name":"nine"}"#,
    ));
    batch.extend(request_bytes("GET", "/nowhere", &[], b""));
    batch.extend(request_bytes("GET", "/v1/pets/2", &[], b""));
    conn.send(&batch).await;
    let statuses = [
        conn.read_response(false).await,
        conn.read_response(false).await,
        conn.read_response(false).await,
        conn.read_response(false).await,
    ];
    assert_eq!(statuses.each_ref().map(|r| r.status), [200, 201, 404, 200]);
    assert_eq!(statuses[0].json()["id"], 1);
    assert_eq!(statuses[1].json()["id"], 9);
    assert_eq!(statuses[3].json()["id"], 2);
}

#[tokio::test]
async fn keep_alive_serves_many_requests_on_one_connection() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    for _ in 0..100 {
        assert_eq!(conn.get("/v1/pets").await.text(), PETS);
    }
}

#[tokio::test]
async fn malformed_http_is_rejected_and_closed() {
    let server = serve(Backend::Petstore);
    for garbage in [
        &b"GET /v1/pets HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"[..],
        b"NOT A REQUEST\r\n\r\n",
        b"GET /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    ] {
        let mut conn = RawConn::connect(server.addr()).await;
        conn.send(garbage).await;
        let response = conn.read_response(false).await;
        assert_eq!(response.status, 400, "{}", String::from_utf8_lossy(garbage));
        assert!(conn.is_closed_by_peer().await);
    }
}

#[tokio::test]
async fn oversize_request_head_is_rejected() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let long = format!("X-Long: {}", "a".repeat(512 * 1024));
    conn.send(request_bytes("GET", "/v1/pets", &[&long], b""))
        .await;
    let response = conn.read_response(false).await;
    assert_eq!(response.status, 431);
}
