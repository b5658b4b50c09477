//! Request trailers: forwarded or dropped toward an HTTP/1.1 upstream
//! (its connection reused), reaching an HTTP/2 upstream (also when the
//! chain holds the body), and a trailers-only answer with no length.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use tokio::net::{TcpListener, TcpStream};

use super::{grpc_message, h2_upstream};
use crate::support::{self, h2_client, h2_exchange, Proxy};
use testkit::H2Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_bodies_leave_the_http11_upstream_connection_reusable() {
    streamed_bodies_to_an_http11_upstream("forward").await;
}

/// By default (`auto`) an HTTP/2 client's request trailers are dropped
/// toward an HTTP/1.1 upstream; the body still goes chunked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_trailers_are_dropped_toward_an_http11_upstream_by_default() {
    streamed_bodies_to_an_http11_upstream("auto").await;
}

/// Three POSTs on one HTTP/2 connection to one HTTP/1.1 upstream connection:
/// with a length, chunked, chunked with trailers (sent as the route's
/// `request_trailers` says).
async fn streamed_bodies_to_an_http11_upstream(request_trailers: &str) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::clone(&connections);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            accepted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(support::echo(stream, "one", Arc::default()));
        }
    });
    let proxy = Proxy::start(&format!(
        "upstreams:\n  echo:\n    hosts: [\"http://{addr}\"]\nroutes:\n  - {{ path: /, upstream: echo, request_trailers: {request_trailers} }}\n"
    ));
    let forward = request_trailers == "forward";
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    for round in 0..3 {
        // With a length, the body as it is; without, chunked with the
        // client's trailers in the last chunk.
        let mut request = Request::post("http://api.test/upload");
        if round == 0 {
            request = request.header("content-length", 10);
        }
        let mut ready = sender.clone().ready().await.unwrap();
        let (response, mut send) = ready
            .send_request(request.body(()).unwrap(), false)
            .unwrap();
        send.send_data(Bytes::from_static(b"01234"), false).unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        if round == 2 {
            send.send_data(Bytes::from_static(b"56789"), false).unwrap();
            let mut trailers = HeaderMap::new();
            trailers.insert("x-checksum", "c0ffee".parse().unwrap());
            send.send_trailers(trailers).unwrap();
        } else {
            send.send_data(Bytes::from_static(b"56789"), true).unwrap();
        }
        let response = tokio::time::timeout(Duration::from_secs(5), response)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.into_body();
        let mut text = Vec::new();
        while let Some(data) = body.data().await {
            text.extend_from_slice(&data.unwrap());
        }
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("body-bytes: 10"), "{text}");
        if round == 2 {
            assert!(text.contains("transfer-encoding: chunked"), "{text}");
        }
        // The HTTP/2 client's trailers, in the upstream's last chunk.
        let trailed = text.contains("trailer: x-checksum: c0ffee\n");
        assert_eq!(trailed, forward && round == 2, "round {round}: {text}");
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "one upstream connection for all"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_request_trailers_reach_an_http2_upstream() {
    let upstream = H2Server::start();
    let proxy = Proxy::start(&h2_upstream(&upstream.url(""), None));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = Request::post("http://grpc.test/upload")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut sender = sender.ready().await.unwrap();
    let (response, mut send) = sender.send_request(request, false).unwrap();
    send.send_data(Bytes::from_static(b"payload"), false)
        .unwrap();
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", "c0ffee".parse().unwrap());
    trailers.insert("grpc-timeout", "5S".parse().unwrap());
    send.send_trailers(trailers).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), response)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(upstream.body_bytes(), 7);
    let received = upstream
        .request_trailers()
        .expect("the upstream got trailers");
    assert_eq!(received["x-checksum"], "c0ffee");
    assert_eq!(received["grpc-timeout"], "5S");
}

/// The chain reads the whole body (validate): the trailers that follow it
/// still reach the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_request_trailers_reach_an_http2_upstream_when_the_chain_holds_the_body() {
    let upstream = H2Server::start();
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../specs/petstore.yaml");
    let config = h2_upstream(&upstream.url(""), None).replace(
        "routes:\n  - { path: /, upstream: grpc }",
        &format!(
            "middleware:\n  validate: {{ openapi: \"{spec}\" }}\n\
             routes:\n  - {{ path: /, chain: [validate], upstream: grpc }}"
        ),
    );
    let proxy = Proxy::start(&config);
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = Request::post("http://api.test/v1/pets")
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let mut sender = sender.ready().await.unwrap();
    let (response, mut send) = sender.send_request(request, false).unwrap();
    let pet = Bytes::from_static(br#"{"id":3,"name":"kitty","tag":"cat"}"#);
    send.send_data(pet.clone(), false).unwrap();
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", "c0ffee".parse().unwrap());
    send.send_trailers(trailers).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), response)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(upstream.body_bytes(), pet.len() as u64);
    let received = upstream
        .request_trailers()
        .expect("the upstream got trailers");
    assert_eq!(received["x-checksum"], "c0ffee");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trailers_only_grpc_answer_has_no_content_length() {
    let upstream = H2Server::start();
    let proxy = Proxy::start(&h2_upstream(&upstream.url(""), None));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = Request::post("http://grpc.test/grpc-status/7")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, body, trailers) = h2_exchange(&sender, request, &grpc_message("hi")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["grpc-status"], "7");
    assert_eq!(response.headers()["content-type"], "application/grpc");
    assert!(
        response.headers().get("content-length").is_none(),
        "{:?}",
        response.headers()
    );
    assert!(body.is_empty());
    assert!(trailers.is_none());
}
