//! What a scenario adds to a run, over real servers: weighted request
//! mixes with their own headers and bodies, checks on answers over
//! HTTP/1.1 (pipelined too), HTTP/2 and HTTP/3, each request's and each
//! connection's phases, rate stages that keep their timetable, and user
//! stages whose users start, stop and come back.

use std::time::Duration;

use bytes::Bytes;
use http::Method;
use load::{CheckSpec, LoadConfig, Protocol, Stages};
use testkit::{Backend, Behaviour, FakeServer, H2Server, H3Server, TestCerts};

use crate::support::run;

fn checks(specs: &[&str]) -> Vec<load::Check> {
    specs
        .iter()
        .map(|yaml| {
            let spec: CheckSpec = serde_saphyr::from_str(yaml).expect("a check");
            spec.into_check().expect("a valid check")
        })
        .collect()
}

fn stages(from: f64, steps: &[(u64, f64)]) -> Stages {
    Stages::new(
        from,
        steps.iter().map(|&(ms, t)| (Duration::from_millis(ms), t)),
    )
}

/// A petstore and a one-connection run of GETs of `paths`, one each in
/// its rotation; the petstore lives as long as the first element.
fn petstore_gets(paths: &[&str]) -> (testkit::TestServer, LoadConfig) {
    let petstore = testkit::serve(Backend::Petstore);
    let urls: Vec<_> = paths
        .iter()
        .map(|path| (Method::GET, petstore.url(path)))
        .collect();
    (petstore, one_connection(Protocol::Http1, &urls))
}

/// A one-connection run over `protocol` of `requests`, one each in its
/// rotation.
fn one_connection(protocol: Protocol, requests: &[(Method, String)]) -> LoadConfig {
    let mut config = LoadConfig::new(requests).expect("valid requests");
    config.protocol = protocol;
    config.connections = 1;
    config
}

/// `config` over 4 streams for 100 requests, half of them to a 503
/// (the rotation's second), with the checks `spec`: the first check
/// fails on each 503, the second passes everywhere. The report.
fn half_fail_the_status_check(mut config: LoadConfig, spec: &[&str]) -> load::Report {
    config.streams = 4;
    config.total_requests = Some(100);
    config.checks = checks(spec);
    let report = run(&config);
    let counts: Vec<(u64, u64)> = report.checks.iter().map(|c| (c.passed, c.failed)).collect();
    assert_eq!(counts[0], (50, 50), "{counts:?}");
    assert_eq!(counts[1], (100, 0), "{counts:?}");
    report
}

#[test]
fn weights_set_how_often_each_request_goes_with_its_own_headers_and_body() {
    let (_petstore, mut config) = petstore_gets(&["/v1/pets", "/nope"]);
    config.total_requests = Some(400);
    config.requests[0].weight = 3;
    let report = run(&config);
    assert_eq!(report.status.get(&200), Some(&300), "{:?}", report.status);
    assert_eq!(report.status.get(&404), Some(&100), "{:?}", report.status);
    assert_eq!(report.config.weights, vec![3, 1]);

    // Over HTTP/2, a request's own body replaces the run's.
    let server = H2Server::start();
    let urls = [
        (Method::POST, server.url("/a")),
        (Method::POST, server.url("/b")),
    ];
    let mut config = one_connection(Protocol::Http2, &urls);
    config.total_requests = Some(40);
    config.body = Bytes::from_static(b"0123456789");
    config.requests[1].body = Some(Bytes::from_static(b"xy"));
    config.requests[1].headers = vec![load::parse_header("X-Only: b").unwrap()];
    let report = run(&config);
    assert_eq!(report.requests, 40);
    assert_eq!(server.body_bytes(), 20 * 10 + 20 * 2);
}

#[test]
fn checks_count_passes_and_failures_over_http1_pipelined() {
    let (_petstore, mut config) = petstore_gets(&["/v1/pets", "/v1/pets/1"]);
    config.pipeline = 4;
    config.total_requests = Some(200);
    config.checks = checks(&[
        "status: 2xx",
        "{json_pointer: /0/name, equals: catten}",
        "{header: Content-Type, contains: application/json}",
        "body_contains: doggy",
        "max_time: 10s",
    ]);
    let report = run(&config);
    let counts: Vec<(u64, u64)> = report.checks.iter().map(|c| (c.passed, c.failed)).collect();
    // /v1/pets/1 is one pet, not a list, and not doggy.
    assert_eq!(
        counts,
        [(200, 0), (100, 100), (200, 0), (100, 100), (200, 0)]
    );
    assert_eq!(report.errors.total(), 0);
    assert_eq!(report.non_2xx_3xx, 0);
    let text = report.to_text();
    assert!(text.contains("Checks: 3 of 5 always passed"), "{text}");
}

#[test]
fn checks_read_http2_and_http3_answers() {
    let spec = [
        "status: 200",
        "body_contains: ok",
        "{header: content-length, equals: '2'}",
    ];
    let ok_and_503 =
        |url: &dyn Fn(&str) -> String| [(Method::GET, url("/")), (Method::GET, url("/status/503"))];
    let server = H2Server::start();
    let config = one_connection(Protocol::Http2, &ok_and_503(&|p| server.url(p)));
    half_fail_the_status_check(config, &spec);

    let certs = TestCerts::generate();
    let server = H3Server::start(&certs);
    let mut config = one_connection(Protocol::Http3, &ok_and_503(&|p| server.url(p)));
    config.cacert = Some(certs.ca_path.clone());
    let report = half_fail_the_status_check(config, &spec);
    // QUIC's handshake is its TLS handshake: no TCP connect.
    assert_eq!(report.phases.tls.count, 1);
    assert_eq!(report.phases.connect.count, 0);
}

#[test]
fn phases_time_each_new_connection_and_each_request() {
    let certs = TestCerts::generate();
    let server = FakeServer::start_tls(
        Behaviour::DelayEvery {
            nth: 1,
            delay: Duration::from_millis(20),
        },
        &certs,
    );
    let mut config = LoadConfig::new(&[(Method::GET, server.https_url("/"))]).unwrap();
    config.cacert = Some(certs.ca_path.clone());
    config.connections = 3;
    config.total_requests = Some(30);
    let report = run(&config);
    let phases = &report.phases;
    assert_eq!(phases.connect.count, 3);
    assert_eq!(phases.tls.count, 3);
    assert_eq!(phases.dns.count, 1);
    assert_eq!(phases.waiting.count, 30);
    assert_eq!(phases.receiving.count, 30);
    // Each answer waited for the server's 20 ms; the latency is both phases.
    assert!(phases.waiting.min_us >= 20_000, "{:?}", phases.waiting);
    assert!(report.latency.min_us >= phases.waiting.min_us);
    let text = report.to_text();
    assert!(text.contains("  Phases         count"), "{text}");
}

#[test]
fn rate_stages_keep_their_timetable() {
    let server = FakeServer::start(Behaviour::Normal);
    let mut config = LoadConfig::new(&[(Method::GET, server.url("/"))]).unwrap();
    // 0 to 200/s over 1 s (100 due), then 200/s for 1 s (200 due).
    let ramp = stages(0.0, &[(1_000, 200.0), (1_000, 200.0)]);
    config.connections = 4;
    config.rate = Some(ramp.peak());
    config.duration = ramp.duration();
    config.stages = Some(ramp);
    let report = run(&config);
    let [first, second] = [&report.stages[0], &report.stages[1]];
    assert_eq!(
        (first.due, second.due),
        (Some(100.0), Some(200.0)),
        "{:?}",
        report.stages
    );
    // Whatever was due was sent (the last request due may go after the
    // stop): the ramp's second half took a quarter of its requests.
    let sent = first.sent.unwrap() + second.sent.unwrap();
    let schedule = report.schedule.unwrap();
    assert!(
        (sent + schedule.unsent).abs_diff(301) <= 4,
        "sent {sent} + unsent {} against 301 due: {:?}",
        schedule.unsent,
        report.stages
    );
    assert!(first.sent.unwrap() <= 101, "{:?}", report.stages);
    // The rate asked is the timetable's average: 300 in 2 s.
    assert!((schedule.target_rate - 150.0).abs() < 2.0, "{schedule:?}");
    let text = report.to_text();
    assert!(text.contains("Stages (req/s)"), "{text}");
}

#[test]
fn user_stages_start_stop_and_bring_users_back() {
    let server = FakeServer::start(Behaviour::Normal);
    let mut config = LoadConfig::new(&[(Method::GET, server.url("/"))]).unwrap();
    // 0 → 2 users, down to 0, none for a while, and 2 again.
    let shape = stages(
        0.0,
        &[(500, 2.0), (500, 0.0), (500, 0.0), (500, 2.0), (500, 2.0)],
    );
    config.connections = 2;
    config.duration = shape.duration();
    config.think = Some(load::ThinkTime {
        min: Duration::from_millis(10),
        max: Duration::from_millis(10),
    });
    config.stages = Some(shape);
    let report = run(&config);
    // Each user connects once per stretch: two stretches each.
    assert_eq!(report.phases.connect.count, 4, "{}", report.to_text());
    // No user sends while the target is 0 (the third stage): at most the
    // answer each user had in flight when it stopped comes in then.
    let counts: Vec<u64> = report.stages.iter().map(|s| s.requests).collect();
    assert!(counts[2] <= 2, "{counts:?}");
    assert!(
        counts[0] > 0 && counts[3] > 0 && counts[4] > counts[3],
        "{counts:?}"
    );
    assert_eq!(report.errors.total(), 0);
}
