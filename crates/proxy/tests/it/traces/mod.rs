//! `traces:` against a real OpenTelemetry Collector (testkit::Collector,
//! built by bench/otelcol/build.sh): the spans it receives over OTLP/gRPC
//! and OTLP/HTTP (gzip), read back from its file exporter; and a
//! collector that is down, which costs the requests nothing but their
//! spans (counted in /metrics).
//!
//! One module for what the spans say, one for the exporter's connection
//! to its collector.

mod auth;
mod connection;
mod proxied;
mod spans;
mod url_full;

use std::net::SocketAddr;

use serde_json::Value;

fn traces(endpoint: &str, protocol: &str, extra: &str) -> String {
    format!(
        "traces: {{ otlp: {{ endpoint: \"{endpoint}\", protocol: {protocol}{extra} }}, sampler: {{ parent_based_ratio: 1.0 }}, service_name: edge, resource: {{ deployment.environment: test }} }}\n"
    )
}

/// A port nothing listens on.
fn closed_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn kind(span: &Value) -> i64 {
    // OTLP JSON writes the enum as a number.
    span["kind"].as_i64().unwrap_or(0)
}
