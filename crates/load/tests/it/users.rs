//! The users model (`--think`, `--ramp`) against servers on loopback:
//! think times space each user's requests and are not latency, a ramp
//! starts the users one by one, the stop cuts a think short, over
//! HTTP/1.1 and HTTP/2, plain and TLS, timed and `-n`.
//!
//! The bounds come from the think times and the ramp, not from the speed
//! of the machine: counts have the ceiling the think times allow, a run's
//! measured time the floor they impose, and a run that must end is given
//! the time that waiting out a think (or the ramp) would have taken.

use std::time::Duration;

use http::Method;
use load::{LoadConfig, Protocol, Report, ThinkTime};
use testkit::{Behaviour, FakeServer, H2Server, TestCerts};

use crate::support::{run, run_ending_within};

fn users(url: &str, count: usize, think_ms: (u64, u64)) -> LoadConfig {
    let mut config = LoadConfig::new(&[(Method::GET, url.to_string())]).expect("valid URL");
    config.connections = count;
    config.duration = Duration::from_secs(1);
    config.think = Some(ThinkTime {
        min: Duration::from_millis(think_ms.0),
        max: Duration::from_millis(think_ms.1),
    });
    config
}

/// Think time is not latency: were it counted, every sample would be at
/// least the think time.
fn assert_think_is_not_latency(report: &Report, think: Duration) {
    assert!(
        report.latency.at(50.0) < think.as_micros() as u64,
        "median {} us",
        report.latency.at(50.0)
    );
}

/// 4 users thinking 200 ms for 1 s: each sends at about 0, 200, 400, 600,
/// 800 ms, about 20 requests in all, never more than 4 * 6.
#[test]
fn think_time_spaces_each_users_requests() {
    let server = FakeServer::start(Behaviour::Normal);
    let config = users(&server.url("/"), 4, (200, 200));
    let report = run(&config);
    let sent = server.requests();
    // Each user's first request is due at once; the think caps the rest.
    assert!(
        (4..=24).contains(&report.requests),
        "{} requests: think time does not space them",
        report.requests
    );
    assert!(sent <= 24, "the server saw {sent}");
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_think_is_not_latency(&report, Duration::from_millis(200));
    let text = report.to_text();
    assert!(
        text.contains("1 threads and 4 connections, users thinking 200-200ms"),
        "{text}"
    );
    let json = serde_json::to_value(&report).expect("a JSON report");
    assert_eq!(json["config"]["think_ms"], serde_json::json!([200, 200]));
    assert_eq!(json["config"]["ramp_s"], 0.0);
}

/// Without think time the same users send as fast as the server answers:
/// the spacing above comes from the think time.
#[test]
fn think_times_are_drawn_from_the_range() {
    let server = FakeServer::start(Behaviour::Normal);
    // 2 users over 2 threads, think 100..300 ms (200 on average) for 1 s:
    // at least each one's first, at most 1 + 1000/100 = 11 each, about 5
    // each on average.
    let mut config = users(&server.url("/"), 2, (100, 300));
    config.threads = 2;
    let report = run(&config);
    assert!(
        (2..=22).contains(&report.requests),
        "{} requests",
        report.requests
    );
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
}

/// 4 users on a 4 s ramp start at 0, 1, 2 and 3 s; each sends one request
/// and then thinks for 10 s. A 1.5 s run sees only the first two.
#[test]
fn a_ramp_starts_later_users_later() {
    let server = FakeServer::start(Behaviour::Normal);
    let mut config = users(&server.url("/"), 4, (10_000, 10_000));
    config.ramp = Duration::from_secs(4);
    config.duration = Duration::from_millis(1500);
    // A stop that waited for a thinking user would take its 10 s; one
    // that let the ramp go on would show the third user's request.
    let report = run_ending_within(&config, Duration::from_secs(10));
    assert_eq!(server.requests(), 2);
    assert_eq!(report.requests, 2);
    assert!(
        report
            .to_text()
            .contains("users thinking 10000-10000ms, ramp 4s"),
        "{}",
        report.to_text()
    );
}

/// The stop ends a run on time even while every user is in a long think,
/// and a ramp's waiting users with it.
#[test]
fn the_stop_cuts_a_long_think_short() {
    let server = FakeServer::start(Behaviour::Normal);
    let mut config = users(&server.url("/"), 4, (10_000, 10_000));
    config.duration = Duration::from_millis(300);
    // A stop that waited for the think would take its 10 s.
    let report = run_ending_within(&config, Duration::from_secs(10));
    assert_eq!(report.requests, 4);
    assert_eq!(server.requests(), 4);

    let mut ramp = config.clone();
    ramp.think = None;
    ramp.ramp = Duration::from_secs(60);
    // The second of 4 users on a 60 s ramp would start at 15 s.
    let report = run_ending_within(&ramp, Duration::from_secs(15));
    // Only the first user's turn came.
    assert!(report.requests > 0);
}

/// `-n` over TLS: each of 2 users sends 4 requests with 3 thinks of 100 ms
/// between them; a thinking user's session is not ended as "done".
#[test]
fn n_users_with_think_over_tls() {
    let certs = TestCerts::generate();
    let server = FakeServer::start_tls(Behaviour::Normal, &certs);
    let mut config = users(&server.https_url("/"), 2, (100, 100));
    config.cacert = Some(certs.ca_path.clone());
    config.total_requests = Some(8);
    let report = run(&config);
    assert_eq!(report.requests, 8);
    assert_eq!(server.requests(), 8);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    // The fourth request of a user comes after its three thinks.
    assert!(report.elapsed_s >= 0.3, "{}", report.elapsed_s);
}

/// Users keep thinking through the warm-up: 2 users thinking 200 ms over
/// 400 ms of warm-up and 400 ms measured send at most 2 * 5 requests.
#[test]
fn users_think_during_the_warm_up() {
    let server = FakeServer::start(Behaviour::Normal);
    let mut config = users(&server.url("/"), 2, (200, 200));
    config.warmup = Duration::from_millis(400);
    config.duration = Duration::from_millis(400);
    let report = run(&config);
    let sent = server.requests();
    assert!((2..=10).contains(&sent), "the server saw {sent}");
    assert!(report.requests <= 6, "{} reported", report.requests);
    assert!(
        sent > report.requests,
        "server {sent}, reported {}",
        report.requests
    );
}

fn h2_users(url: String, count: usize, think_ms: (u64, u64)) -> LoadConfig {
    let mut config = users(&url, count, think_ms);
    config.protocol = Protocol::Http2;
    config
}

#[test]
fn h2_users_think_between_requests() {
    let server = H2Server::start();
    let config = h2_users(server.url("/"), 4, (200, 200));
    let report = run(&config);
    assert!(
        (4..=24).contains(&report.requests),
        "{} requests",
        report.requests
    );
    assert!(
        server.requests() <= 24,
        "the server saw {}",
        server.requests()
    );
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(server.max_streams(), 1);
    assert_think_is_not_latency(&report, Duration::from_millis(200));
    assert!(
        report
            .to_text()
            .contains("HTTP/2 with 1 streams each, users thinking 200-200ms"),
        "{}",
        report.to_text()
    );

    // The stop cuts a long think short over HTTP/2 too.
    let mut long = h2_users(server.url("/"), 4, (10_000, 10_000));
    long.duration = Duration::from_millis(300);
    let report = run_ending_within(&long, Duration::from_secs(10));
    assert_eq!(report.requests, 4);
}

#[test]
fn h2_users_over_tls_with_n_and_a_ramp() {
    let certs = TestCerts::generate();
    let server = H2Server::start_tls(certs.server_config(&[tls::ALPN_H2]));
    // 3 users on a 300 ms ramp, 3 requests each, 100 ms apart.
    let mut config = h2_users(server.https_url("/"), 3, (100, 100));
    config.cacert = Some(certs.ca_path.clone());
    config.ramp = Duration::from_millis(300);
    config.total_requests = Some(9);
    let report = run(&config);
    assert_eq!(report.requests, 9);
    assert_eq!(server.requests(), 9);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    // A user's third request comes after its two thinks.
    assert!(report.elapsed_s >= 0.2, "{}", report.elapsed_s);
}
