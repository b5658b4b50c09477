//! What the collector receives: SERVER and CLIENT spans over OTLP/gRPC
//! and OTLP/HTTP (gzip), a middleware refusal's event, and the upstream's
//! `traceparent` for each client/upstream protocol pair.

use serde_json::Value;
use tokio::net::TcpStream;

use super::{closed_port, kind, traces};
use crate::support::{h2_client, h2_exchange, Echo, Proxy};
use testkit::{otelcol::attribute, Collector, H2Server, HostileUpstream, Step};

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_export_carries_a_server_span_and_a_client_span_per_attempt() {
    let Some(collector) =
        Collector::start("grpc_export_carries_a_server_span_and_a_client_span_per_attempt")
    else {
        return;
    };
    let echo = Echo::start("e").await;
    let dead = closed_port();
    let yaml = format!(
        "{}upstreams:\n  two:\n    hosts: [\"http://{dead}\", \"http://{}\"]\nroutes:\n  - {{ path: /api, upstream: two }}\n",
        traces(&format!("http://{}", collector.grpc), "grpc", ""),
        echo.addr
    );
    let proxy = Proxy::start(&yaml);
    let mut conn = proxy.conn().await;
    let header = format!("traceparent: {PARENT}");
    let mut sent = Vec::new();
    // Round robin: one of two requests goes to the dead host first and is
    // retried on the other.
    for _ in 0..2 {
        let answer = conn
            .request(
                "GET",
                "/api/items?token=secret",
                &[&header, "User-Agent: t/1"],
                b"",
            )
            .await;
        assert_eq!(answer.status, 200, "{}", answer.text());
        sent.push(answer.text());
    }
    let spans = collector.wait_for("two SERVER spans and three CLIENT spans", |spans| {
        spans.iter().filter(|s| kind(s) == 2).count() >= 2
            && spans.iter().filter(|s| kind(s) == 3).count() >= 3
    });
    let servers: Vec<&Value> = spans.iter().filter(|s| kind(s) == 2).collect();
    for server in &servers {
        assert_eq!(server["name"], "GET /api");
        assert_eq!(server["traceId"], TRACE_ID);
        assert_eq!(server["parentSpanId"], "00f067aa0ba902b7");
        let attr = |k| attribute(server, k);
        assert_eq!(attr("http.request.method").as_deref(), Some("GET"));
        assert_eq!(attr("url.path").as_deref(), Some("/api/items"));
        assert_eq!(attr("url.query").as_deref(), Some("token=REDACTED"));
        assert_eq!(attr("url.scheme").as_deref(), Some("http"));
        assert_eq!(attr("http.route").as_deref(), Some("/api"));
        assert_eq!(attr("http.response.status_code").as_deref(), Some("200"));
        assert_eq!(attr("client.address").as_deref(), Some("127.0.0.1"));
        assert_eq!(attr("network.protocol.version").as_deref(), Some("1.1"));
        assert_eq!(attr("user_agent.original").as_deref(), Some("t/1"));
        assert!(attr("server.address").is_some());
        let resource = &server["resource"];
        assert_eq!(attribute(resource, "service.name").as_deref(), Some("edge"));
        assert_eq!(
            attribute(resource, "deployment.environment").as_deref(),
            Some("test")
        );
    }
    // Each CLIENT span is a child of its request's SERVER span.
    let server_ids: Vec<&str> = servers
        .iter()
        .map(|s| s["spanId"].as_str().unwrap())
        .collect();
    let clients: Vec<&Value> = spans.iter().filter(|s| kind(s) == 3).collect();
    for client in &clients {
        assert!(server_ids.contains(&client["parentSpanId"].as_str().unwrap()));
        assert_eq!(client["traceId"], TRACE_ID);
        assert_eq!(client["name"], "GET two");
    }
    // The retried request: its first attempt failed on the dead host, the
    // second (resend_count 1) was answered by the echo.
    let retried = server_ids
        .iter()
        .find(|id| clients.iter().filter(|c| c["parentSpanId"] == **id).count() == 2)
        .expect("a request with two attempts");
    let attempts: Vec<&&Value> = clients
        .iter()
        .filter(|c| c["parentSpanId"] == *retried)
        .collect();
    let failed = attempts
        .iter()
        .find(|c| attribute(c, "http.request.resend_count").is_none())
        .unwrap();
    let answered = attempts
        .iter()
        .find(|c| attribute(c, "http.request.resend_count").as_deref() == Some("1"))
        .unwrap();
    assert_eq!(
        attribute(failed, "server.port"),
        Some(dead.port().to_string())
    );
    assert_eq!(
        attribute(failed, "error.type").as_deref(),
        Some("no_connection")
    );
    assert_eq!(
        attribute(answered, "server.port"),
        Some(echo.addr.port().to_string())
    );
    assert_eq!(
        attribute(answered, "http.response.status_code").as_deref(),
        Some("200")
    );
    // The upstream's traceparent names the attempt that reached it.
    let client_ids: Vec<&str> = clients
        .iter()
        .map(|c| c["spanId"].as_str().unwrap())
        .collect();
    for text in &sent {
        let line = text
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("traceparent:"))
            .unwrap_or_else(|| panic!("no traceparent upstream:\n{text}"));
        let value = line.split_once(':').unwrap().1.trim();
        assert_eq!(&value[3..35], TRACE_ID);
        assert!(client_ids.contains(&&value[36..52]), "{value}");
        assert_eq!(&value[53..], "01");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_protobuf_export_with_gzip_records_middleware_refusals() {
    let Some(collector) =
        Collector::start("http_protobuf_export_with_gzip_records_middleware_refusals")
    else {
        return;
    };
    let echo = Echo::start("e").await;
    let yaml = format!(
        "{}upstreams:\n  echo:\n    hosts: [\"http://{}\"]\n\
         middleware:\n  limit: {{ rate_limit: {{ key: \"header:x-key\", rate: 1/m, burst: 1 }} }}\n\
         routes:\n  - {{ path: /, chain: [limit], upstream: echo }}\n",
        traces(
            &format!("http://{}/v1/traces", collector.http),
            "http/protobuf",
            ", compression: gzip"
        ),
        echo.addr
    );
    let proxy = Proxy::start(&yaml);
    let mut conn = proxy.conn().await;
    assert_eq!(
        conn.request("GET", "/x", &["X-Key: k"], b"").await.status,
        200
    );
    assert_eq!(
        conn.request("GET", "/x", &["X-Key: k"], b"").await.status,
        429
    );
    let spans = collector.wait_for("two SERVER spans", |spans| {
        spans.iter().filter(|s| kind(s) == 2).count() >= 2
    });
    let refused = spans
        .iter()
        .find(|s| attribute(s, "http.response.status_code").as_deref() == Some("429"))
        .expect("the 429's span");
    // A new trace: no parent.
    assert!(refused["parentSpanId"].as_str().unwrap_or("").is_empty());
    assert_eq!(refused["name"], "GET /");
    let event = &refused["events"][0];
    assert_eq!(event["name"], "middleware.refused");
    assert_eq!(
        attribute(event, "http.response.status_code").as_deref(),
        Some("429")
    );
    assert!(attribute(event, "sluice.reason").is_some(), "{event}");
    // The handler's name in `middleware:`, on the event and the span.
    assert_eq!(attribute(event, "sluice.handler").as_deref(), Some("limit"));
    assert_eq!(
        attribute(refused, "sluice.refused_by").as_deref(),
        Some("limit")
    );
    // The refused request went nowhere: no CLIENT span under it.
    assert!(!spans
        .iter()
        .any(|s| kind(s) == 3 && s["parentSpanId"] == refused["spanId"]));
}

/// Each client/upstream protocol pair: the SERVER span says the client's
/// HTTP version, and the upstream's `traceparent` names the attempt's
/// CLIENT span, whichever wire carried it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_protocol_pair_names_its_attempt_upstream() {
    let Some(collector) = Collector::start("every_protocol_pair_names_its_attempt_upstream") else {
        return;
    };
    let endpoint = format!("http://{}", collector.grpc);
    for (n, (h2_client_side, h2_upstream)) in
        [(false, false), (false, true), (true, false), (true, true)]
            .into_iter()
            .enumerate()
    {
        let pair = format!("h2 client: {h2_client_side}, h2c upstream: {h2_upstream}");
        let trace = format!("{:032x}", 0xabc0 + n);
        let parent = format!("00-{trace}-00f067aa0ba902b7-01");
        let h1 = HostileUpstream::start(|_| {
            vec![Step::Write(
                b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
            )]
        });
        let h2 = H2Server::start();
        let (addr, protocol) = if h2_upstream {
            (h2.addr(), "h2c")
        } else {
            (h1.addr(), "http1")
        };
        let proxy = Proxy::start(&format!(
            "{}upstreams:\n  up:\n    hosts: [\"http://{addr}\"]\n    protocol: {protocol}\nroutes:\n  - {{ path: /, upstream: up }}\n",
            traces(&endpoint, "grpc", "")
        ));
        let status = if h2_client_side {
            let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
            let request = http::Request::get("http://pairs.test/p")
                .header("traceparent", &parent)
                .body(())
                .unwrap();
            h2_exchange(&sender, request, b"").await.0.status().as_u16()
        } else {
            let header = format!("traceparent: {parent}");
            proxy
                .conn()
                .await
                .request("GET", "/p", &[&header], b"")
                .await
                .status
        };
        assert_eq!(status, 200, "{pair}");
        let spans = collector.wait_for(&pair, |spans| {
            spans
                .iter()
                .filter(|s| s["traceId"] == trace.as_str())
                .count()
                >= 2
        });
        let ours: Vec<&Value> = spans
            .iter()
            .filter(|s| s["traceId"] == trace.as_str())
            .collect();
        let server = ours.iter().find(|s| kind(s) == 2).expect("a SERVER span");
        let client = ours.iter().find(|s| kind(s) == 3).expect("a CLIENT span");
        assert_eq!(
            attribute(server, "network.protocol.version").as_deref(),
            Some(if h2_client_side { "2" } else { "1.1" }),
            "{pair}"
        );
        assert_eq!(client["parentSpanId"], server["spanId"], "{pair}");
        let sent = if h2_upstream {
            h2.traceparents().last().cloned().unwrap_or_default()
        } else {
            let requests = h1.requests();
            let text = String::from_utf8_lossy(requests.last().unwrap()).into_owned();
            text.lines()
                .find_map(|l| l.strip_prefix("traceparent: "))
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        let expected = format!("00-{trace}-{}-01", client["spanId"].as_str().unwrap());
        assert_eq!(sent, expected, "{pair}");
    }
}
