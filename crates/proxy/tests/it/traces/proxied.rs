//! A client that came through a load balancer's PROXY protocol header:
//! its SERVER span's `client.address` is the header's client, and
//! `network.peer.address` the balancer it came through.

use tokio::io::AsyncWriteExt;

use super::{kind, traces};
use crate::support::{Echo, Proxy};
use testkit::{otelcol::attribute, Collector};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_span_names_the_client_of_the_proxy_header() {
    let Some(collector) = Collector::start("the_span_names_the_client_of_the_proxy_header") else {
        return;
    };
    let echo = Echo::start("e").await;
    let yaml = format!(
        "workers: 1\nlisteners:\n  - address: 127.0.0.1:0\n    proxy_protocol: {{ version: v1, trusted: [127.0.0.1/32] }}\n{}upstreams:\n  echo:\n    hosts: [\"http://{}\"]\nroutes:\n  - {{ path: /, upstream: echo }}\n",
        traces(&format!("http://{}", collector.grpc), "grpc", ""),
        echo.addr
    );
    let proxy = Proxy::start_yaml(&yaml);
    let mut stream = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    let balancer = stream.local_addr().unwrap();
    stream
        .write_all(b"PROXY TCP4 192.0.2.7 198.51.100.1 5000 443\r\nGET /pets HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = crate::support::read_head(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let spans = collector.wait_for("a SERVER span", |spans| spans.iter().any(|s| kind(s) == 2));
    let server = spans.iter().find(|s| kind(s) == 2).unwrap();
    assert_eq!(
        attribute(server, "client.address").as_deref(),
        Some("192.0.2.7")
    );
    assert_eq!(attribute(server, "client.port").as_deref(), Some("5000"));
    assert_eq!(
        attribute(server, "network.peer.address").as_deref(),
        Some("127.0.0.1")
    );
    assert_eq!(
        attribute(server, "network.peer.port").as_deref(),
        Some(balancer.port().to_string().as_str())
    );
}
