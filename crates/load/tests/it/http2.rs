//! `sluice load --h2` against an in-process HTTP/2 server (the `h2` crate)
//! on loopback: h2c and TLS with ALPN, request counts, streams in flight,
//! statuses, flow control both ways, both models, failures.

use std::time::Duration;

use http::Method;
use load::{LoadConfig, Protocol, RunControl};
use testkit::{Behaviour, FakeServer, H2Options, H2Server, TestCerts};

use crate::support::{self, run};

fn config(urls: &[(Method, String)]) -> LoadConfig {
    let mut config = LoadConfig::new(urls).expect("valid URLs");
    config.protocol = Protocol::Http2;
    config.connections = 2;
    config.streams = 8;
    config.duration = Duration::from_secs(1);
    config
}

fn get(url: String) -> LoadConfig {
    config(&[(Method::GET, url)])
}

#[test]
fn h2c_counts_requests_statuses_and_request_bodies() {
    let server = H2Server::start();
    let urls = [
        (Method::GET, server.url("/")),
        (Method::GET, server.url("/status/404")),
        (Method::GET, server.url("/status/503")),
        (Method::POST, server.url("/upload")),
    ];
    let mut rotation = config(&urls);
    // Each connection rotates on its own: one makes the split exact.
    rotation.connections = 1;
    rotation.total_requests = Some(400);
    // Larger than the server's 64 KiB stream window: sent as it reopens.
    rotation.body = vec![b'b'; 100 * 1024].into();
    let report = run(&rotation);
    assert_eq!(report.requests, 400);
    assert_eq!(server.requests(), 400);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(report.status.get(&200), Some(&200));
    assert_eq!(report.status.get(&404), Some(&100));
    assert_eq!(report.status.get(&503), Some(&100));
    assert_eq!(report.non_2xx_3xx, 200);
    // Every request carries the body (GETs too, as with HTTP/1.1).
    assert_eq!(server.body_bytes(), 400 * 100 * 1024);
    assert!(report.bytes_read > 400 * 2, "{}", report.bytes_read);
    assert!(
        report
            .to_text()
            .contains("1 connections, HTTP/2 with 8 streams each"),
        "{}",
        report.to_text()
    );
    let json = serde_json::to_value(&report).expect("a JSON report");
    assert_eq!(json["config"]["protocol"], "HTTP/2");
    assert_eq!(json["config"]["streams"], 8);
}

/// Each answer takes 20 ms, long enough that a connection's streams overlap:
/// the server sees exactly `-m` of them in flight on a connection at once.
#[test]
fn each_connection_keeps_its_streams_in_flight() {
    let server = H2Server::start();
    let mut deep = get(server.url("/delay/20"));
    deep.streams = 16;
    deep.total_requests = Some(2 * 16 * 10);
    let report = run(&deep);
    assert_eq!(report.requests, 320);
    assert_eq!(server.max_streams(), 16);
    assert!(report.latency.at(50.0) >= 20_000, "{:?}", report.latency);
}

#[test]
fn a_timed_run_misses_only_what_was_in_flight_at_the_end() {
    let server = H2Server::start();
    let report = run(&get(server.url("/")));
    let sent = server.requests();
    // More than 2 connections x 8 streams could hold at once.
    assert!(report.requests > 2 * 8, "{report:?}");
    assert!(
        sent >= report.requests && sent - report.requests <= 2 * 8,
        "server {sent}, client {}",
        report.requests
    );
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
}

/// Responses larger than the 1 MiB stream window: the client must give the
/// window back as it reads.
#[test]
fn large_responses_flow() {
    let server = H2Server::start();
    let mut large = get(server.url("/size/3000000"));
    large.connections = 1;
    large.streams = 4;
    large.total_requests = Some(12);
    let report = run(&large);
    assert_eq!(report.requests, 12);
    assert!(report.bytes_read >= 12 * 3_000_000, "{}", report.bytes_read);
}

/// The open model keeps its timetable over HTTP/2 and counts latency from
/// each request's intended send time: 2 connections x 4 streams of 50 ms
/// answers carry 160 req/s, so at 500 req/s requests wait for a stream.
#[test]
fn open_model_over_h2_is_corrected() {
    let server = H2Server::start();
    support::assert_open_model_corrected(|path| get(server.url(path)));
}

#[test]
fn slow_streams_time_out_one_by_one() {
    let server = H2Server::start();
    let mut slow = get(server.url("/delay/5000"));
    slow.timeout = Duration::from_millis(200);
    slow.duration = Duration::from_secs(1);
    let report = run(&slow);
    assert_eq!(report.requests, 0);
    // Each of the 2 x 8 streams times out on its own and is used again:
    // the second round is out by 400 ms, and no more than 1 s / 200 ms
    // rounds fit in the run.
    assert!(
        (2 * 2 * 8..=5 * 2 * 8).contains(&report.errors.timeout),
        "{:?}",
        report.errors
    );
}

/// Streams the server did not process (RST_STREAM REFUSED_STREAM, or
/// beyond a graceful GOAWAY) are sent again: no error, and `-n` stays exact.
#[test]
fn refused_streams_are_sent_again() {
    let refusing = H2Server::start_with(H2Options {
        refuse_first: 4,
        ..H2Options::default()
    });
    let mut exact = get(refusing.url("/"));
    exact.total_requests = Some(300);
    let report = run(&exact);
    assert_eq!(report.requests, 300);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(refusing.requests(), 300);
    assert_eq!(refusing.refused(), 2 * 4);

    let closing = H2Server::start_with(H2Options {
        goaway_after: Some(50),
        ..H2Options::default()
    });
    let mut exact = get(closing.url("/"));
    exact.total_requests = Some(1_000);
    let report = run(&exact);
    assert_eq!(report.requests, 1_000);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(closing.requests(), 1_000);

    // Sent again once: a server that refuses everything shows as errors.
    let refusing_all = H2Server::start_with(H2Options {
        refuse_first: u64::MAX,
        ..H2Options::default()
    });
    let mut exact = get(refusing_all.url("/"));
    exact.total_requests = Some(100);
    let report = run(&exact);
    assert_eq!(report.requests, 0);
    assert_eq!(report.errors.read, 100, "{:?}", report.errors);
    assert_eq!(refusing_all.refused(), 200);
}

#[test]
fn h2c_against_an_http1_server_is_an_error_per_connection() {
    let server = FakeServer::start(Behaviour::Normal);
    let mut wrong = get(server.url("/"));
    wrong.duration = Duration::from_millis(300);
    let report = run(&wrong);
    assert_eq!(report.requests, 0);
    assert!(report.errors.total() > 0, "{:?}", report.errors);
}

#[test]
fn https_negotiates_h2_with_alpn() {
    let certs = TestCerts::generate();
    let server = H2Server::start_tls(certs.server_config(&[tls::ALPN_H2, tls::ALPN_HTTP11]));
    let mut trusted = get(server.https_url("/status/201"));
    trusted.total_requests = Some(200);
    trusted.cacert = Some(certs.ca_path.clone());
    let report = run(&trusted);
    assert_eq!(report.requests, 200);
    assert_eq!(report.status.get(&201), Some(&200));
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(server.requests(), 200);

    let mut insecure = get(server.https_url("/"));
    insecure.total_requests = Some(50);
    insecure.insecure = true;
    assert_eq!(run(&insecure).requests, 50);
}

#[test]
fn https_without_h2_is_a_clear_error() {
    let certs = TestCerts::generate();
    for (alpn, answer) in [
        (&[tls::ALPN_HTTP11][..], "refused it"),
        (&[][..], "chose no protocol"),
    ] {
        let server = H2Server::start_tls(certs.server_config(alpn));
        let mut h2 = get(server.https_url("/"));
        h2.cacert = Some(certs.ca_path.clone());
        let err = load::run(&h2, RunControl::default()).expect_err("no HTTP/2");
        assert!(err.downcast_ref::<load::ConfigError>().is_some(), "{err}");
        let message = err.to_string();
        assert!(
            message.contains("does not speak HTTP/2 over TLS") && message.contains(answer),
            "{message}"
        );
    }
}

#[test]
fn h2_settings_mistakes_are_config_errors() {
    let base = get("http://127.0.0.1:1/".into());
    let mut pipelined = base.clone();
    pipelined.pipeline = 4;
    let mut connection = base.clone();
    connection.headers = vec![load::parse_header("Connection: close").unwrap()];
    let mut no_streams = base.clone();
    no_streams.streams = 0;
    let mut http1_streams = base;
    http1_streams.protocol = Protocol::Http1;
    for (bad, message) in [
        (pipelined, "--pipeline"),
        (connection, "not allowed in HTTP/2"),
        (no_streams, "--streams must be at least 1"),
        (http1_streams, "--streams goes with --h2"),
    ] {
        let err = bad.validate().expect_err(message);
        assert!(err.0.contains(message), "{err}");
    }
}
