//! The exporter's connection to its collector: TLS checked against
//! `ca_file`, an untrusted certificate, a connection kept between exports,
//! and a collector that is down (which costs requests nothing but their
//! spans, counted in /metrics).

use std::{net::SocketAddr, time::Duration};

use super::{closed_port, kind, traces};
use crate::support::{Echo, Proxy};
use testkit::{otelcol::attribute, Collector, RawConn};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_costs_requests_nothing_and_spans_are_counted_dropped() {
    let echo = Echo::start("e").await;
    let down = closed_port();
    let yaml = format!(
        "{}upstreams:\n  echo:\n    hosts: [\"http://{}\"]\nroutes:\n  - {{ path: /, upstream: echo }}\n",
        traces(&format!("http://{down}"), "grpc", ", timeout: 200ms"),
        echo.addr
    );
    let proxy = Proxy::start(&yaml);
    let mut conn = proxy.conn().await;
    for _ in 0..20 {
        assert_eq!(conn.get("/").await.status, 200);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = RawConn::connect(proxy.admin())
            .await
            .get("/metrics")
            .await
            .text();
        let dropped: u64 = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("sluice_trace_spans_dropped_total ")?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("no dropped counter in\n{text}"));
        if dropped >= 20 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{dropped} spans counted dropped, 20 expected"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The collector's TLS: both protocols to receivers that take TLS only,
/// the collector's certificate checked against `ca_file`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_endpoints_export_over_tls_checked_against_ca_file() {
    let certs = testkit::TestCerts::generate();
    let Some(collector) = Collector::start_tls(
        "https_endpoints_export_over_tls_checked_against_ca_file",
        &certs.cert_path,
        &certs.key_path,
    ) else {
        return;
    };
    let echo = Echo::start("e").await;
    let ca = certs.ca_path.display();
    for (endpoint, protocol, path) in [
        (format!("https://{}", collector.grpc), "grpc", "/grpc"),
        (
            format!("https://{}/v1/traces", collector.http),
            "http/protobuf",
            "/http",
        ),
    ] {
        let yaml = format!(
            "{}upstreams:\n  echo:\n    hosts: [\"http://{}\"]\nroutes:\n  - {{ path: /, upstream: echo }}\n",
            traces(&endpoint, protocol, &format!(", ca_file: \"{ca}\"")),
            echo.addr
        );
        let proxy = Proxy::start(&yaml);
        let mut conn = proxy.conn().await;
        assert_eq!(conn.get(path).await.status, 200);
        collector.wait_for(
            &format!("the SERVER span of {path} over {protocol}"),
            |spans| {
                spans
                    .iter()
                    .any(|s| kind(s) == 2 && attribute(s, "url.path").as_deref() == Some(path))
            },
        );
    }
}

/// The collector's certificate is not trusted (no `ca_file`: the web's
/// roots): the exporter tries, its handshake fails, nothing is exported,
/// and the requests are served all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_collector_certificate_exports_nothing_and_costs_requests_nothing() {
    let certs = testkit::TestCerts::generate();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = certs.acceptor();
    // Handshakes over, and those that succeeded.
    let counts = std::sync::Arc::new(std::sync::Mutex::new((0usize, 0usize)));
    let shared = std::sync::Arc::clone(&counts);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let succeeded = acceptor.accept(tcp).await.is_ok();
            let mut counts = shared.lock().unwrap();
            counts.0 += 1;
            counts.1 += usize::from(succeeded);
        }
    });
    let echo = Echo::start("e").await;
    let yaml = format!(
        "{}upstreams:\n  echo:\n    hosts: [\"http://{}\"]\nroutes:\n  - {{ path: /, upstream: echo }}\n",
        traces(&format!("https://{addr}"), "grpc", ""),
        echo.addr
    );
    let proxy = Proxy::start(&yaml);
    let mut conn = proxy.conn().await;
    for _ in 0..3 {
        assert_eq!(conn.get("/").await.status, 200);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while counts.lock().unwrap().0 == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the exporter never tried a handshake"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        counts.lock().unwrap().1,
        0,
        "a handshake with an untrusted certificate completed"
    );
}

/// OTLP/HTTP keeps its connection between exports while the collector
/// does, and opens a new one when the collector closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_protobuf_export_keeps_its_connection_while_the_collector_does() {
    for close in [false, true] {
        let collector = CountingCollector::start(close).await;
        let echo = Echo::start("e").await;
        // One span per export, so each request makes two exports.
        let yaml = format!(
            "traces: {{ otlp: {{ endpoint: \"http://{}/v1/traces\", protocol: http/protobuf }}, sampler: {{ parent_based_ratio: 1.0 }}, batch: 1 }}\n\
             upstreams:\n  echo:\n    hosts: [\"http://{}\"]\nroutes:\n  - {{ path: /, upstream: echo }}\n",
            collector.addr, echo.addr
        );
        let proxy = Proxy::start(&yaml);
        let mut conn = proxy.conn().await;
        for _ in 0..3 {
            assert_eq!(conn.get("/").await.status, 200);
        }
        // The exported counter is the process's (other tests share it):
        // the collector's own count is waited for instead.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while collector.counts().1 < 6 {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?} (connections, exports) of 6 exports, close={close}",
                collector.counts()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let (accepted, posts) = collector.counts();
        assert_eq!(posts, 6, "close={close}");
        // Kept: one connection for all six; closed after each answer: one each.
        assert_eq!(accepted, if close { 6 } else { 1 }, "close={close}");
    }
}

/// An OTLP/HTTP endpoint that answers every POST with an empty 200 and
/// counts connections and requests; `close` answers `Connection: close`.
struct CountingCollector {
    addr: SocketAddr,
    counts: std::sync::Arc<std::sync::Mutex<(usize, usize)>>,
}

impl CountingCollector {
    async fn start(close: bool) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let counts = std::sync::Arc::new(std::sync::Mutex::new((0, 0)));
        let shared = std::sync::Arc::clone(&counts);
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                shared.lock().unwrap().0 += 1;
                let counts = std::sync::Arc::clone(&shared);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 8192];
                    loop {
                        // One request: its head, then Content-Length bytes.
                        let (head_end, length) = loop {
                            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                                let length: usize = head
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length:"))
                                    .and_then(|v| v.trim().parse().ok())
                                    .unwrap_or(0);
                                break (end + 4, length);
                            }
                            match tcp.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        while buf.len() < head_end + length {
                            match tcp.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.drain(..head_end + length);
                        counts.lock().unwrap().1 += 1;
                        let answer: &[u8] = if close {
                            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        } else {
                            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"
                        };
                        if tcp.write_all(answer).await.is_err() || close {
                            return;
                        }
                    }
                });
            }
        });
        Self { addr, counts }
    }

    /// Connections accepted, requests answered.
    fn counts(&self) -> (usize, usize) {
        *self.counts.lock().unwrap()
    }
}
