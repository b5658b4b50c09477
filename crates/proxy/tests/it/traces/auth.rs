//! What the spans say of the handlers that decide who may pass (issue
//! 48): a key taken out of the query is not in the SERVER span's
//! `url.query` nor the CLIENT span's `url.full`, even with
//! `traces.query: full`.

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
