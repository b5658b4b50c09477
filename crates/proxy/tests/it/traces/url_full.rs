//! The CLIENT span's `url.full` (Required on HTTP client spans by the
//! stable HTTP semantic conventions): the upstream host tried, the path
//! as it went upstream and the query as the SERVER span's `url.query`
//! records it, for every client protocol (HTTP/1.1, HTTP/2, HTTP/3) and
//! both upstream protocols (HTTP/1.1, h2c); never a user or password,
//! neither the upstream's configured ones nor the client's.

use serde_json::Value;
use tokio::net::TcpStream;

use super::{kind, traces};
use crate::{
    h3_support,
    support::{h2_client, h2_exchange, Proxy},
};
use testkit::{otelcol::attribute, Collector, H2Server, HostileUpstream, Step, TestCerts};

/// Sent by every client: a dot segment (normalised before it goes
/// upstream) and a query with secrets in its values.
const TARGET: &str = "/api/./items?token=s3cret&flag&sig=s3cret";
/// What goes upstream, and what `url.full` ends with by default.
const SENT_PATH: &str = "/api/items";
const REDACTED: &str = "token=REDACTED&flag&sig=REDACTED";

#[derive(Debug, Clone, Copy)]
enum Client {
    H1,
    H2,
    H3,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_spans_carry_url_full_redacted_for_every_protocol_pair() {
    let Some(collector) =
        Collector::start("client_spans_carry_url_full_redacted_for_every_protocol_pair")
    else {
        return;
    };
    let certs = TestCerts::generate();
    let h1 = HostileUpstream::start(|_| {
        vec![Step::Write(
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
        )]
    });
    let h2 = H2Server::start();
    let endpoint = format!("http://{}", collector.grpc);
    let mut n = 0u32;
    for (query, expected_query) in [("", Some(REDACTED)), (", query: omitted", None)] {
        for (upstream, protocol) in [(h1.addr(), "http1"), (h2.addr(), "h2c")] {
            // The upstream's URL carries a user and password; the span
            // must not.
            let proxy = Proxy::start_yaml(&format!(
                "workers: 1\nlisteners:\n  - address: 127.0.0.1:0\n  - address: 127.0.0.1:0\n    protocols: [h2, http1, h3]\n    tls: {{ cert: \"{}\", key: \"{}\" }}\n\
                 {}upstreams:\n  up:\n    hosts: [\"http://admin:s3cret@{upstream}\"]\n    protocol: {protocol}\nroutes:\n  - {{ path: /api, upstream: up }}\n",
                certs.cert_path.display(),
                certs.key_path.display(),
                // `query` goes last into the `traces:` mapping.
                traces(&endpoint, "grpc", "").replace("} }\n", &format!("}}{query} }}\n")),
            ));
            // All three first, then one wait: the exporter sends what
            // came within a second.
            let mut sent = Vec::new();
            for client in [Client::H1, Client::H2, Client::H3] {
                n += 1;
                let pair = format!("{client:?} client, {protocol} upstream, {query:?}");
                let trace = format!("{:032x}", 0xf011_0000 + n);
                let parent = format!("00-{trace}-00f067aa0ba902b7-01");
                let status = send(client, &proxy, &certs, &parent).await;
                assert_eq!(status, 200, "{pair}");
                sent.push((pair, trace));
            }
            let spans = collector.wait_for("the spans of three requests", |spans| {
                sent.iter().all(|(_, trace)| {
                    spans
                        .iter()
                        .filter(|s| s["traceId"] == trace.as_str())
                        .count()
                        >= 2
                })
            });
            for (pair, trace) in &sent {
                let ours: Vec<&Value> = spans
                    .iter()
                    .filter(|s| s["traceId"] == trace.as_str())
                    .collect();
                let server = ours.iter().find(|s| kind(s) == 2).expect("a SERVER span");
                let client_span = ours.iter().find(|s| kind(s) == 3).expect("a CLIENT span");
                let mut url = format!("http://{upstream}{SENT_PATH}");
                if let Some(query) = expected_query {
                    url = format!("{url}?{query}");
                }
                assert_eq!(
                    attribute(client_span, "url.full").as_deref(),
                    Some(url.as_str()),
                    "{pair}"
                );
                // The same redaction as the SERVER span's.
                assert_eq!(
                    attribute(server, "url.query").as_deref(),
                    expected_query,
                    "{pair}"
                );
                for span in &ours {
                    let text = span.to_string();
                    assert!(!text.contains("s3cret"), "{pair}: a secret in {text}");
                    assert!(!text.contains("admin:"), "{pair}: a user in {text}");
                }
            }
        }
    }
    // What url.full says went upstream did: the normalised path, the
    // query as the client sent it.
    let requests = h1.requests();
    let first = String::from_utf8_lossy(&requests[0]).into_owned();
    assert!(
        first.starts_with("GET /api/items?token=s3cret&flag&sig=s3cret HTTP/1.1\r\n"),
        "{first}"
    );
}

/// One GET of [`TARGET`] with `traceparent` over `client`'s protocol; the
/// status.
async fn send(client: Client, proxy: &Proxy, certs: &TestCerts, traceparent: &str) -> u16 {
    match client {
        Client::H1 => {
            let header = format!("traceparent: {traceparent}");
            proxy
                .conn()
                .await
                .request("GET", TARGET, &[&header], b"")
                .await
                .status
        }
        Client::H2 => {
            let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
            let request = http::Request::get(format!("http://pairs.test{TARGET}"))
                .header("traceparent", traceparent)
                .body(())
                .unwrap();
            h2_exchange(&sender, request, b"").await.0.status().as_u16()
        }
        Client::H3 => {
            let mut h3 = h3_support::Client::connect(proxy.listener(1), certs).await;
            let request = http::Request::get(format!("https://localhost{TARGET}"))
                .header("traceparent", traceparent)
                .body(())
                .unwrap();
            h3.exchange(request, b"").await.0.status().as_u16()
        }
    }
}
