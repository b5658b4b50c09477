//! `sluice load --h3` against an in-process HTTP/3 server (quinn and h3,
//! testkit's `H3Server`) over real UDP sockets on loopback, with a
//! certificate of a throwaway CA: exact counts in both models, statuses,
//! bodies both ways, streams in flight, timeouts, and the failures a
//! client meets (no server, no HTTP/3, an untrusted certificate).

use std::time::Duration;

use http::Method;
use load::{LoadConfig, Protocol, RunControl};
use testkit::{H3Options, H3Server, TestCerts};

use crate::support::{self, run, run_ending_within};

fn config(certs: &TestCerts, urls: &[(Method, String)]) -> LoadConfig {
    let mut config = LoadConfig::new(urls).expect("valid URLs");
    config.protocol = Protocol::Http3;
    config.connections = 2;
    config.streams = 8;
    config.duration = Duration::from_secs(1);
    config.cacert = Some(certs.ca_path.clone());
    config
}

fn get(certs: &TestCerts, url: String) -> LoadConfig {
    config(certs, &[(Method::GET, url)])
}

#[test]
fn closed_model_counts_requests_statuses_and_bodies_exactly() {
    let certs = TestCerts::generate();
    let server = H3Server::start(&certs);
    let urls = [
        (Method::GET, server.url("/")),
        (Method::GET, server.url("/status/404")),
        (Method::GET, server.url("/status/503")),
        (Method::POST, server.url("/upload")),
    ];
    let mut rotation = config(&certs, &urls);
    // Each connection rotates on its own: one makes the split exact.
    rotation.connections = 1;
    rotation.total_requests = Some(400);
    // Larger than one QUIC packet: the body goes out in many STREAM frames.
    rotation.body = vec![b'b'; 20 * 1024].into();
    let report = run(&rotation);
    assert_eq!(report.requests, 400);
    assert_eq!(server.requests(), 400);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(report.status.get(&200), Some(&200));
    assert_eq!(report.status.get(&404), Some(&100));
    assert_eq!(report.status.get(&503), Some(&100));
    assert_eq!(report.non_2xx_3xx, 200);
    assert_eq!(server.body_bytes(), 400 * 20 * 1024);
    // Every UDP payload byte received counts: at least the 400 bodies.
    assert!(report.bytes_read > 400 * 2, "{}", report.bytes_read);
    assert_eq!(server.connections(), 1);
    let text = report.to_text();
    assert!(
        text.contains("1 connections, HTTP/3 with 8 streams each"),
        "{text}"
    );
    let json = serde_json::to_value(&report).expect("a JSON report");
    assert_eq!(json["config"]["protocol"], "HTTP/3");
    assert_eq!(json["config"]["streams"], 8);
}

/// Each answer takes 20 ms, long enough that a connection's streams overlap:
/// the server sees exactly `-m` of them in flight on a connection at once.
#[test]
fn each_connection_keeps_its_streams_in_flight() {
    let certs = TestCerts::generate();
    let server = H3Server::start(&certs);
    let mut deep = get(&certs, server.url("/delay/20"));
    deep.streams = 64;
    deep.total_requests = Some(2 * 64 * 5);
    let report = run(&deep);
    assert_eq!(report.requests, 640);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(server.max_streams(), 64);
    assert!(report.latency.at(50.0) >= 20_000, "{:?}", report.latency);
}

/// More streams than the server allows at once: the rest wait for QUIC's
/// stream credit, none fails.
#[test]
fn the_servers_stream_limit_holds_requests_back() {
    let certs = TestCerts::generate();
    let server = H3Server::start_with(
        &certs,
        H3Options {
            max_streams: 4,
            ..H3Options::default()
        },
    );
    let mut over = get(&certs, server.url("/delay/5"));
    over.connections = 1;
    over.streams = 16;
    over.total_requests = Some(200);
    // Waiting for credit counts in a request's time: on a busy machine
    // that wait must not turn into timeouts.
    over.timeout = Duration::from_secs(20);
    let report = run(&over);
    assert_eq!(report.requests, 200, "{:?}", report.errors);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert!(server.max_streams() <= 4, "{}", server.max_streams());
}

#[test]
fn a_timed_run_misses_only_what_was_in_flight_at_the_end() {
    let certs = TestCerts::generate();
    let server = H3Server::start(&certs);
    let report = run(&get(&certs, server.url("/")));
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
/// credit back as it reads.
#[test]
fn large_responses_flow() {
    let certs = TestCerts::generate();
    let server = H3Server::start(&certs);
    let mut large = get(&certs, server.url("/size/3000000"));
    large.connections = 1;
    large.streams = 4;
    large.total_requests = Some(12);
    let report = run(&large);
    assert_eq!(report.requests, 12);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert!(report.bytes_read >= 12 * 3_000_000, "{}", report.bytes_read);
}

/// The open model keeps its timetable over HTTP/3 and counts latency from
/// each request's intended send time: 2 connections x 4 streams of 50 ms
/// answers carry 160 req/s, so at 500 req/s requests wait for a stream.
#[test]
fn open_model_over_h3_is_exact_and_corrected() {
    let certs = TestCerts::generate();
    let server = H3Server::start(&certs);
    let mut counted = get(&certs, server.url("/"));
    counted.rate = Some(400.0);
    counted.total_requests = Some(200);
    let report = run(&counted);
    assert_eq!(report.requests, 200);
    assert_eq!(server.requests(), 200);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);

    support::assert_open_model_corrected(|path| get(&certs, server.url(path)));
}

#[test]
fn slow_streams_time_out_one_by_one() {
    let certs = TestCerts::generate();
    let server = H3Server::start(&certs);
    let mut slow = get(&certs, server.url("/delay/5000"));
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

/// Nothing listens on the port: each connect times out and counts as a
/// connect error, and a `-n` run ends (each failed connect uses up one
/// request) instead of hanging.
#[test]
fn no_server_is_connect_errors_and_the_run_ends() {
    let certs = TestCerts::generate();
    let port = {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("a free port");
        socket.local_addr().expect("its address").port()
    };
    let mut dead = get(&certs, format!("https://localhost:{port}/"));
    dead.timeout = Duration::from_millis(200);
    dead.total_requests = Some(4);
    // Without each failed connect using up a request, it would never end.
    let report = run_ending_within(&dead, Duration::from_secs(10));
    assert_eq!(report.requests, 0);
    // The other connection may fail once more before it sees the stop.
    assert!(
        (4..=5).contains(&report.errors.connect),
        "{:?}",
        report.errors
    );
}

/// A QUIC server without ALPN `h3` ends the run at the first handshake
/// with an error that says so.
#[test]
fn a_server_without_h3_is_a_clear_error() {
    let certs = TestCerts::generate();
    let server = H3Server::start_with(
        &certs,
        H3Options {
            alpn: vec![b"hq-interop".to_vec()],
            ..H3Options::default()
        },
    );
    let err =
        load::run(&get(&certs, server.url("/")), RunControl::default()).expect_err("no HTTP/3");
    assert!(err.downcast_ref::<load::ConfigError>().is_some(), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("does not speak HTTP/3") && message.contains("ALPN `h3`"),
        "{message}"
    );
}

/// Certificates are checked as over TCP: a server the client does not
/// trust is a connect error per attempt; `--insecure` accepts it.
#[test]
fn certificates_are_checked_unless_insecure() {
    let certs = TestCerts::generate();
    let other = TestCerts::generate();
    let server = H3Server::start(&certs);
    let mut untrusted = get(&other, server.url("/"));
    untrusted.total_requests = Some(3);
    let report = run(&untrusted);
    assert_eq!(report.requests, 0);
    // Each failed connect uses up a request; the other connection may
    // fail once more before it sees the stop.
    assert!(
        (3..=4).contains(&report.errors.connect),
        "{:?}",
        report.errors
    );
    assert_eq!(server.requests(), 0);

    let mut insecure = get(&other, server.url("/"));
    insecure.cacert = None;
    insecure.insecure = true;
    insecure.total_requests = Some(50);
    let report = run(&insecure);
    assert_eq!(report.requests, 50);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
}

/// Users over HTTP/3: one stream each, a think time between requests,
/// and the end of the run cuts a long think short.
#[test]
fn users_think_between_requests_over_h3() {
    let certs = TestCerts::generate();
    let server = H3Server::start(&certs);
    let mut users = get(&certs, server.url("/"));
    users.connections = 3;
    users.streams = 1;
    users.think = Some(load::ThinkTime {
        min: Duration::from_millis(20),
        max: Duration::from_millis(20),
    });
    users.total_requests = Some(30);
    let report = run(&users);
    assert_eq!(report.requests, 30);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(server.max_streams(), 1);
    let text = report.to_text();
    assert!(
        text.contains("HTTP/3 with 1 streams each, users thinking 20-20ms"),
        "{text}"
    );

    let mut long = get(&certs, server.url("/"));
    long.streams = 1;
    long.think = Some(load::ThinkTime {
        min: Duration::from_secs(10),
        max: Duration::from_secs(10),
    });
    long.duration = Duration::from_millis(300);
    // A stop that waited for the think would take its 10 s.
    let report = run_ending_within(&long, Duration::from_secs(10));
    // Each user's first request, then the stop.
    assert_eq!(report.requests, 2);
}

#[test]
fn h3_settings_mistakes_are_config_errors() {
    let certs = TestCerts::generate();
    let base = get(&certs, "https://127.0.0.1:1/".into());
    let mut plain = get(&certs, "http://127.0.0.1:1/".into());
    plain.protocol = Protocol::Http3;
    let mut pipelined = base.clone();
    pipelined.pipeline = 4;
    let mut connection = base;
    connection.headers = vec![load::parse_header("Connection: close").expect("a header")];
    for (bad, message) in [
        (plain, "--h3 needs an https:// URL"),
        (pipelined, "with --h3 use --streams"),
        (connection, "not allowed in HTTP/3 (--h3)"),
    ] {
        let err = bad.validate().expect_err(message);
        assert!(err.0.contains(message), "{err}");
    }
}
