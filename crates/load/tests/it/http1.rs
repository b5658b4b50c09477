//! `sluice load` against real servers on loopback: counts, pipelined timing,
//! coordinated-omission correction and every failure kind.

use std::time::Duration;

use http::Method;
use load::{LoadConfig, Report, RunControl};
use testkit::{Behaviour, FakeServer};

use crate::support::run;

fn config(url: &str) -> LoadConfig {
    let mut config = LoadConfig::new(&[(Method::GET, url.to_string())]).expect("valid URL");
    config.connections = 4;
    config.duration = Duration::from_secs(1);
    config
}

/// Share of samples at or above `floor_us`, from the percentile spectrum.
fn share_at_least(report: &Report, floor_us: u64) -> f64 {
    let total: u64 = report.latency.spectrum.iter().map(|p| p.count).sum();
    let slow: u64 = report
        .latency
        .spectrum
        .iter()
        .filter(|p| p.value_us >= floor_us)
        .map(|p| p.count)
        .sum();
    slow as f64 / total as f64
}

#[test]
fn reported_requests_equal_what_the_server_counted() {
    let server = FakeServer::start(Behaviour::Normal);
    let mut exact = config(&server.url("/"));
    exact.total_requests = Some(5_000);
    exact.pipeline = 4;
    let report = run(&exact);
    assert_eq!(report.requests, 5_000);
    assert_eq!(server.requests(), 5_000);
    assert_eq!(report.status.get(&200), Some(&5_000));
    assert_eq!(report.errors.total(), 0);
    assert_eq!(report.latency.count, 5_000);
}

#[test]
fn a_timed_run_misses_only_what_was_in_flight_at_the_end() {
    let server = FakeServer::start(Behaviour::Normal);
    let mut timed = config(&server.url("/"));
    timed.pipeline = 2;
    let report = run(&timed);
    let sent = server.requests();
    assert!(report.requests > 100, "{report:?}");
    assert!(
        sent >= report.requests && sent - report.requests <= 4 * 2,
        "server {sent}, client {}",
        report.requests
    );
    assert!(
        (0.9..1.5).contains(&report.elapsed_s),
        "{}",
        report.elapsed_s
    );
    assert_eq!(report.per_second.len(), 1);
}

/// Every 16th answer per connection is 100 ms late; with batches of 16 only
/// that request waits, so 1/16 of the samples are slow and p90 stays fast.
#[test]
fn pipelined_requests_are_timed_one_by_one() {
    let server = FakeServer::start(Behaviour::DelayEvery {
        nth: 16,
        delay: Duration::from_millis(100),
    });
    let mut pipelined = config(&server.url("/"));
    pipelined.pipeline = 16;
    pipelined.duration = Duration::from_secs(2);
    let report = run(&pipelined);
    assert!(report.requests >= 16 * 4 * 5, "{}", report.requests);
    assert!(
        report.latency.at(90.0) < 20_000,
        "p90 {}us",
        report.latency.at(90.0)
    );
    assert!(
        report.latency.at(99.0) >= 100_000,
        "p99 {}us",
        report.latency.at(99.0)
    );
    let slow = share_at_least(&report, 90_000);
    assert!(
        (0.05..0.075).contains(&slow),
        "share of slow samples {slow}, expected 1/16"
    );
}

/// wrk2's point: a 1 s stall in a 5 s run at 1,000 req/s delays about 1,000
/// requests that a closed-loop client would simply not have sent.
#[test]
fn open_model_corrects_for_coordinated_omission() {
    let server = FakeServer::start(Behaviour::StallOnce {
        after: Duration::from_secs(2),
        stall: Duration::from_secs(1),
    });
    let mut open = config(&server.url("/"));
    open.connections = 10;
    open.rate = Some(1_000.0);
    open.duration = Duration::from_secs(5);
    let report = run(&open);
    let corrected_p99 = report.latency.at(99.0);
    let uncorrected = report
        .uncorrected_latency
        .as_ref()
        .expect("open model reports both");
    let uncorrected_p99 = uncorrected.at(99.0);
    assert!(corrected_p99 >= 300_000, "corrected p99 {corrected_p99}us");
    assert!(
        uncorrected_p99 < 100_000,
        "uncorrected p99 {uncorrected_p99}us"
    );
    let schedule = report.schedule.expect("open model reports its schedule");
    assert!(
        (900.0..1_100.0).contains(&schedule.achieved_rate),
        "{schedule:?}"
    );
}

#[test]
fn open_model_does_not_run_away_from_a_slow_server() {
    let server = FakeServer::start(Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(50),
    });
    let mut open = config(&server.url("/"));
    open.connections = 2;
    open.rate = Some(1_000.0);
    let report = run(&open);
    assert!(
        report.elapsed_s < 1.5,
        "the run overran: {}",
        report.elapsed_s
    );
    let schedule = report.schedule.expect("schedule");
    assert!(schedule.achieved_rate < 100.0, "{schedule:?}");
    assert!(schedule.max_lag_ms > 500.0, "{schedule:?}");
    assert!(schedule.unsent > 500, "{schedule:?}");
    // Requests are still timed from when they were due.
    assert!(report.latency.at(99.0) > 500_000);
}

#[test]
fn silent_server_counts_timeouts() {
    let server = FakeServer::start(Behaviour::Silent);
    let mut silent = config(&server.url("/"));
    silent.connections = 2;
    silent.timeout = Duration::from_millis(200);
    let report = run(&silent);
    assert_eq!(report.requests, 0);
    assert!(report.errors.timeout >= 4, "{:?}", report.errors);
}

#[test]
fn refused_connections_count_as_connect_errors() {
    let mut refused = config(&format!("http://{}/", testkit::closed_port()));
    refused.duration = Duration::from_millis(500);
    let report = run(&refused);
    assert_eq!(report.requests, 0);
    assert!(report.errors.connect > 0, "{:?}", report.errors);
}

#[test]
fn a_close_mid_response_is_a_read_error() {
    let server = FakeServer::start(Behaviour::CloseMidResponse);
    let mut config = config(&server.url("/"));
    config.duration = Duration::from_millis(500);
    let report = run(&config);
    assert!(report.errors.read > 0, "{:?}", report.errors);
    assert_eq!(report.requests, 0);
}

#[test]
fn a_malformed_response_is_a_parse_error() {
    let server = FakeServer::start(Behaviour::Malformed);
    let mut config = config(&server.url("/"));
    config.duration = Duration::from_millis(500);
    let report = run(&config);
    assert!(report.errors.parse > 0, "{:?}", report.errors);
}

#[test]
fn statuses_are_counted_by_code_and_urls_rotate() {
    let petstore = testkit::serve(testkit::Backend::Petstore);
    let urls = [
        (Method::GET, petstore.url("/v1/pets")),
        (Method::GET, petstore.url("/missing")),
        (Method::HEAD, petstore.url("/v1/pets/1")),
        (Method::POST, petstore.url("/v1/pets")),
    ];
    let mut rotation = LoadConfig::new(&urls).expect("same host");
    rotation.connections = 1;
    rotation.total_requests = Some(400);
    rotation.headers = vec![load::parse_header("Content-Type: application/json").unwrap()];
    rotation.body = r#"{"id":7,"name":"seven"}"#.into();
    let report = run(&rotation);
    assert_eq!(report.status.get(&200), Some(&200));
    assert_eq!(report.status.get(&404), Some(&100));
    assert_eq!(report.status.get(&201), Some(&100));
    assert_eq!(report.non_2xx_3xx, 100);
    assert_eq!(report.errors.total(), 0);
}

#[test]
fn report_text_looks_like_wrk_and_json_has_everything() {
    let server = FakeServer::start(Behaviour::Normal);
    let mut quick = config(&server.url("/"));
    quick.total_requests = Some(200);
    let report = run(&quick);
    let text = report.to_text();
    for needle in [
        "Running 200 requests test @ GET http://127.0.0.1:",
        "4 threads and",
        "Thread Stats   Avg      Stdev     Max   +/- Stdev",
        "Latency Distribution",
        "99.99%",
        "Requests/sec:",
        "Transfer/sec:",
    ] {
        if needle == "4 threads and" {
            assert!(text.contains("1 threads and 4 connections"), "{text}");
            continue;
        }
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let json = serde_json::to_value(&report).unwrap();
    for key in [
        "config",
        "latency",
        "per_second",
        "errors",
        "status",
        "requests_per_sec",
    ] {
        assert!(json.get(key).is_some(), "no {key} in {json}");
    }
    assert!(json["latency"]["spectrum"].as_array().unwrap().len() > 1);
}

#[test]
fn configuration_mistakes_are_config_errors() {
    assert!(LoadConfig::new(&[(Method::GET, "ftp://x/".into())]).is_err());
    let mixed = LoadConfig::new(&[
        (Method::GET, "http://127.0.0.1:1/".into()),
        (Method::GET, "http://127.0.0.1:2/".into()),
    ]);
    assert!(mixed.unwrap_err().0.contains("one scheme, host and port"));
    let mut bad = config("http://127.0.0.1:1/");
    bad.threads = 8;
    let err = load::run(&bad, RunControl::default()).unwrap_err();
    assert!(err.downcast_ref::<load::ConfigError>().is_some(), "{err}");
    let mut unresolvable = config("http://no-such-host.invalid/");
    unresolvable.duration = Duration::from_millis(100);
    let err = load::run(&unresolvable, RunControl::default()).unwrap_err();
    assert!(err.to_string().contains("cannot resolve"), "{err}");
}

#[test]
fn warm_up_requests_are_sent_but_not_reported() {
    let server = FakeServer::start(Behaviour::Normal);
    let mut warmed = config(&server.url("/"));
    warmed.warmup = Duration::from_millis(500);
    warmed.duration = Duration::from_millis(500);
    let report = run(&warmed);
    assert!(
        (0.45..1.0).contains(&report.elapsed_s),
        "{}",
        report.elapsed_s
    );
    assert!(report.requests > 0);
    // About half of what the server answered fell in the warm-up.
    assert!(
        server.requests() > report.requests * 3 / 2,
        "server {}, reported {}",
        server.requests(),
        report.requests
    );
}

#[test]
fn https_with_a_ca_file_or_insecure() {
    let certs = testkit::TestCerts::generate();
    let server = FakeServer::start_tls(Behaviour::Normal, &certs);
    let mut trusted = config(&server.https_url("/"));
    trusted.total_requests = Some(200);
    trusted.cacert = Some(certs.ca_path.clone());
    let report = run(&trusted);
    assert_eq!(report.requests, 200);
    assert_eq!(report.errors.total(), 0);

    let mut insecure = config(&server.https_url("/"));
    insecure.total_requests = Some(50);
    insecure.insecure = true;
    assert_eq!(run(&insecure).requests, 50);

    // The built-in web roots do not know the test CA: every connect fails.
    let mut untrusted = config(&server.https_url("/"));
    untrusted.duration = Duration::from_millis(300);
    let report = run(&untrusted);
    assert_eq!(report.requests, 0);
    assert!(report.errors.connect > 0, "{:?}", report.errors);
}

#[test]
fn n_is_exact_across_threads() {
    let server = FakeServer::start(Behaviour::Normal);
    for _ in 0..5 {
        let mut exact = config(&server.url("/"));
        exact.threads = 2;
        exact.total_requests = Some(300);
        assert_eq!(run(&exact).requests, 300);
    }
}

#[test]
fn pipelined_requests_cut_off_by_a_close_are_read_errors() {
    let server = FakeServer::start(Behaviour::CloseAfterAnswer);
    let mut pipelined = config(&server.url("/"));
    pipelined.connections = 1;
    pipelined.pipeline = 4;
    pipelined.total_requests = Some(100);
    let report = run(&pipelined);
    assert_eq!(report.requests, 25);
    assert_eq!(report.errors.read, 25);
}

#[test]
fn a_server_that_stops_reading_cannot_hold_the_run() {
    let server = FakeServer::start(Behaviour::NeverRead);
    let mut stuck = config(&server.url("/"));
    stuck.connections = 2;
    stuck.duration = Duration::from_millis(500);
    stuck.body = vec![b'x'; 16 * 1024 * 1024].into();
    let started = std::time::Instant::now();
    let report = run(&stuck);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(report.requests, 0);
}

#[test]
fn n_with_a_rate_ends_without_phantom_lag() {
    let server = FakeServer::start(Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(300),
    });
    let mut open = config(&server.url("/"));
    open.connections = 8;
    open.rate = Some(100.0);
    open.total_requests = Some(4);
    let report = run(&open);
    assert_eq!(report.requests, 4);
    assert_eq!(report.schedule.expect("schedule").unsent, 0);
}

#[test]
fn silent_seconds_count_as_zero() {
    let server = FakeServer::start(Behaviour::StallOnce {
        after: Duration::from_millis(1500),
        stall: Duration::from_secs(10),
    });
    let mut stalled = config(&server.url("/"));
    stalled.connections = 2;
    stalled.duration = Duration::from_secs(3);
    stalled.timeout = Duration::from_secs(10);
    let report = run(&stalled);
    assert_eq!(report.per_second.len(), 3, "{:?}", report.per_second);
    assert_eq!(report.per_second[2], 0);
    // wrk's Req/Sec averages every second, the silent one included.
    let mean = report.thread_rate.mean;
    assert!(
        (mean - report.requests_per_sec).abs() < report.requests_per_sec * 0.2,
        "{mean} vs {}",
        report.requests_per_sec
    );
}

#[test]
fn n_against_a_dead_target_ends() {
    let mut dead = config(&format!("http://{}/", testkit::closed_port()));
    dead.total_requests = Some(10);
    let report = run(&dead);
    assert_eq!(report.requests, 0);
    assert!(report.errors.connect >= 10, "{:?}", report.errors);
}

#[test]
fn out_of_range_settings_are_config_errors() {
    let base = config("http://127.0.0.1:1/");
    let mut warm_n = base.clone();
    warm_n.total_requests = Some(10);
    warm_n.warmup = Duration::from_secs(1);
    let mut long = base.clone();
    long.duration = Duration::from_secs(u64::MAX);
    let mut tiny_rate = base.clone();
    tiny_rate.rate = Some(1e-300);
    let mut huge_rate = base;
    huge_rate.rate = Some(1e300);
    for bad in [warm_n, long, tiny_rate, huge_rate] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
}
