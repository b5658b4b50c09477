//! What the spans say of the handlers that decide who may pass (issue
//! 48): a key taken out of the query is not in the SERVER span's
//! `url.query` nor the CLIENT span's `url.full`, even with
//! `traces.query: full`; an `ext_authz` call is a CLIENT span.

use serde_json::Value;
use tokio::net::TcpStream;

use super::kind;
use crate::support::{h2_client, h2_exchange, Echo, Proxy};
use testkit::{otelcol::attribute, Collector};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_key_is_not_in_the_server_span() {
    let Some(collector) = Collector::start("a_query_key_is_not_in_the_server_span") else {
        return;
    };
    let echo = Echo::start("e").await;
    let proxy = Proxy::start(&format!(
        "traces: {{ otlp: {{ endpoint: \"http://{}\", protocol: grpc }}, sampler: {{ parent_based_ratio: 1.0 }}, query: full }}\n\
         upstreams:\n  echo:\n    hosts: [\"http://{}\"]\n\
         middleware:\n  api_key: {{ keys: {{ ops: trace-key-0123456789 }}, query: api_key }}\n\
         routes:\n  - {{ path: /, chain: [api_key], upstream: echo }}\n",
        collector.grpc, echo.addr
    ));
    let target = "/k?a=1&api_key=trace-key-0123456789&b=2";
    let answer = proxy.conn().await.request("GET", target, &[], b"").await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = http::Request::get(format!("http://localhost{target}"))
        .body(())
        .unwrap();
    assert_eq!(h2_exchange(&sender, request, b"").await.0.status(), 200);
    // Refused (no key): the span keeps the query as sent.
    let refused = proxy.conn().await.request("GET", "/k?a=3", &[], b"").await;
    assert_eq!(refused.status, 401);

    let spans = collector.wait_for("three SERVER spans, two CLIENT spans", |spans| {
        spans.iter().filter(|s| kind(s) == 2).count() >= 3
            && spans.iter().filter(|s| kind(s) == 3).count() >= 2
    });
    // The attempts' url.full: the target as it went upstream.
    for client in spans.iter().filter(|s| kind(s) == 3) {
        let full = attribute(client, "url.full").unwrap_or_default();
        assert!(full.ends_with("/k?a=1&b=2"), "{full}");
    }
    let servers: Vec<&Value> = spans.iter().filter(|s| kind(s) == 2).collect();
    let mut queries: Vec<String> = servers
        .iter()
        .map(|s| attribute(s, "url.query").unwrap_or_default())
        .collect();
    queries.sort();
    assert_eq!(queries, ["a=1&b=2", "a=1&b=2", "a=3"], "{servers:?}");
    assert!(!serde_json::to_string(&spans)
        .unwrap()
        .contains("trace-key-0123456789"));
}

/// An `ext_authz` call is a CLIENT span of its own, a child of the
/// request's SERVER span beside the upstream attempt's, and the service
/// gets that span as its `traceparent` parent (not the client's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ext_authz_call_is_a_client_span_the_service_is_told_of() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Some(collector) = Collector::start("an_ext_authz_call_is_a_client_span") else {
        return;
    };
    // A forward-auth service that allows and keeps the `traceparent` it got.
    let service = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let service_addr = service.local_addr().unwrap();
    let (told, mut told_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = service.accept().await {
            let told = told.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let traceparent = head
                    .lines()
                    .find_map(|l| l.strip_prefix("traceparent:"))
                    .map(|v| v.trim().to_string());
                let _ = told.send(traceparent);
                let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                let _ = stream.write_all(answer).await;
            });
        }
    });
    let echo = Echo::start("e").await;
    let proxy = Proxy::start(&format!(
        "traces: {{ otlp: {{ endpoint: \"http://{}\", protocol: grpc }}, sampler: {{ parent_based_ratio: 1.0 }} }}\n\
         upstreams:\n  echo:\n    hosts: [\"http://{}\"]\n\
         middleware:\n  check: {{ ext_authz: {{ http: \"http://{service_addr}/auth\" }} }}\n\
         routes:\n  - {{ path: /, chain: [check], upstream: echo }}\n",
        collector.grpc, echo.addr
    ));
    let client_parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let sent = format!("traceparent: {client_parent}");
    let answer = proxy.conn().await.request("GET", "/a", &[&sent], b"").await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let told = told_rx
        .recv()
        .await
        .unwrap()
        .expect("the service got a traceparent");

    let spans = collector.wait_for("a SERVER span and two CLIENT spans", |spans| {
        spans.iter().filter(|s| kind(s) == 2).count() >= 1
            && spans.iter().filter(|s| kind(s) == 3).count() >= 2
    });
    let server = spans.iter().find(|s| kind(s) == 2).unwrap();
    let authz = spans
        .iter()
        .find(|s| kind(s) == 3 && s["name"] == "ext_authz check")
        .unwrap_or_else(|| panic!("no ext_authz span: {spans:?}"));
    assert_eq!(authz["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(authz["parentSpanId"], server["spanId"]);
    assert_eq!(
        attribute(authz, "sluice.authz.decision").as_deref(),
        Some("allowed")
    );
    assert_eq!(attribute(authz, "sluice.handler").as_deref(), Some("check"));
    assert_eq!(
        attribute(authz, "url.full"),
        Some(format!("http://{service_addr}/auth"))
    );
    let authz_id = authz["spanId"].as_str().unwrap();
    assert_eq!(
        told,
        format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{authz_id}-01")
    );
    // The upstream attempt is the SERVER span's other child.
    assert!(spans
        .iter()
        .any(|s| kind(s) == 3 && s["name"] == "GET echo" && s["parentSpanId"] == server["spanId"]));
}
