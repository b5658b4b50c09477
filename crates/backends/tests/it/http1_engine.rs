//! The backends' HTTP/1.1 engine over real sockets: framing, pipelining,
//! connection management and rejections, each with a problem+json body.

use backends::Backend;
use testkit::{request_bytes, serve, RawConn};

#[tokio::test]
async fn malformed_request_after_valid_ones_still_gets_every_answer() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let mut batch = request_bytes("GET", "/v1/pets/1", &[], b"");
    batch.extend(request_bytes("GET", "/v1/pets/2", &[], b""));
    batch.extend(b"GARBAGE\r\n\r\n");
    conn.send(&batch).await;
    assert_eq!(conn.read_response(false).await.json()["id"], 1);
    assert_eq!(conn.read_response(false).await.json()["id"], 2);
    let rejected = conn.read_response(false).await;
    assert_eq!(rejected.status, 400);
    assert_eq!(
        rejected.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(rejected.header("connection"), Some("close"));
    assert!(conn.is_closed_by_peer().await);
}

#[tokio::test]
async fn smuggling_shapes_are_rejected_with_problems() {
    let server = serve(Backend::Petstore);
    for raw in [
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na",
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        "GET /v1/pets HTTP/1.1\r\n\r\n",
    ] {
        let mut conn = RawConn::connect(server.addr()).await;
        conn.send(raw).await;
        let response = conn.read_response(false).await;
        assert_eq!(response.status, 400, "{raw:?}");
        assert_eq!(response.json()["status"], 400);
        assert!(conn.is_closed_by_peer().await, "{raw:?}");
    }
}

#[tokio::test]
async fn chunked_request_bodies_are_decoded() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    conn.send(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
         9\r\n{\"id\":5,\"\r\nc;ext=1\r\nname\":\"five\"\r\n1\r\n}\r\n0\r\n\r\n",
    )
    .await;
    let created = conn.read_response(false).await;
    assert_eq!(created.status, 201);
    assert_eq!(created.json()["name"], "five");
    assert_eq!(conn.get("/v1/pets/1").await.status, 200);
}

#[tokio::test]
async fn oversize_bodies_are_413_and_chunked_ones_too() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    conn.send("POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 413);

    let mut conn = RawConn::connect(server.addr()).await;
    conn.send("POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFF\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 413);
}

#[tokio::test]
async fn expect_continue_gets_an_interim_response() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let body = r#"{"id":4,"name":"four"}"#;
    conn.send(format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    ))
    .await;
    assert_eq!(conn.read_response(false).await.status, 100);
    conn.send(body).await;
    assert_eq!(conn.read_response(false).await.status, 201);
}

#[tokio::test]
async fn http10_keep_alive_is_confirmed_and_default_is_close() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    conn.send("GET /v1/pets HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .await;
    let kept = conn.read_response(false).await;
    assert_eq!(kept.header("connection"), Some("keep-alive"));
    conn.send("GET /v1/pets HTTP/1.0\r\n\r\n").await;
    let last = conn.read_response(false).await;
    assert_eq!(last.status, 200);
    assert_eq!(last.header("connection"), Some("close"));
    assert!(conn.is_closed_by_peer().await);
}

#[tokio::test]
async fn connection_close_answers_then_closes_despite_pipelined_input() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let mut batch = request_bytes("GET", "/v1/pets/1", &["Connection: close"], b"");
    batch.extend(request_bytes("GET", "/v1/pets/2", &[], b""));
    conn.send(&batch).await;
    let answered = conn.read_response(false).await;
    assert_eq!(answered.json()["id"], 1);
    assert_eq!(answered.header("connection"), Some("close"));
    assert!(conn.is_closed_by_peer().await);
}

#[tokio::test]
async fn requests_split_across_many_writes_are_reassembled() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    let raw = request_bytes(
        "POST",
        "/v1/pets",
        &["Content-Type: application/json"],
        br#"{"id":8,"name":"eight"}"#,
    );
    for byte in &raw {
        conn.send([*byte]).await;
    }
    assert_eq!(conn.read_response(false).await.status, 201);
}

#[tokio::test]
async fn a_deep_pipeline_is_answered_in_order() {
    let server = serve(Backend::Static);
    let mut conn = RawConn::connect(server.addr()).await;
    let mut batch = Vec::new();
    for i in 0..256 {
        batch.extend(request_bytes("GET", &format!("/{i}"), &[], b""));
    }
    conn.send(&batch).await;
    for _ in 0..256 {
        let response = conn.read_response(false).await;
        assert_eq!(response.status, 200);
        assert_eq!(response.body.len(), 1024);
    }
}

#[tokio::test]
async fn absolute_form_targets_are_served_by_path() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    conn.send("GET http://example.test/v1/pets/2 HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.json()["id"], 2);
    // No path at all means `/`, which the petstore does not serve.
    conn.send("GET http://example.test HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await;
    let root = conn.read_response(false).await;
    assert_eq!(root.status, 404);
    assert!(root.json()["detail"].as_str().unwrap().ends_with(" /"));
}

#[tokio::test]
async fn an_endless_chunk_extension_is_cut_off() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    conn.send("POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1;")
        .await;
    conn.send(vec![b'a'; 64 * 1024]).await;
    let response = conn.read_response(false).await;
    assert_eq!(response.status, 431);
    assert!(response.json()["detail"]
        .as_str()
        .unwrap()
        .contains("chunk"));
}

#[tokio::test]
async fn one_byte_chunks_cannot_multiply_the_body_limit() {
    let server = serve(Backend::Petstore);
    let mut conn = RawConn::connect(server.addr()).await;
    conn.send("POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await;
    conn.send(b"1\r\n \r\n".repeat(20_000)).await;
    assert_eq!(conn.read_response(false).await.status, 413);
}
