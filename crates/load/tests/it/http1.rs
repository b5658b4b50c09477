//! `sluice load` against real servers on loopback: counts, pipelined timing,
//! coordinated-omission correction and every failure kind.

use std::time::Duration;

use http::Method;
use load::{LoadConfig, RunControl};
use testkit::{Behaviour, FakeServer};

use crate::support::{
    assert_corrected_dominates, assert_timetable_accounted, run, run_ending_within, sent,
};

fn config(url: &str) -> LoadConfig {
    let mut config = LoadConfig::new(&[(Method::GET, url.to_string())]).expect("valid URL");
    config.connections = 4;
    config.duration = Duration::from_secs(1);
    config
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
    // Every connection's answers are counted: 4 connections, between
    // them the 5,000 (the fewest at most a quarter, the most at least one).
    let spread = report.per_connection.expect("a run's spread");
    assert_eq!(spread.connections, 4, "{spread:?}");
    assert!(spread.min >= 1 && spread.min <= spread.median && spread.median <= spread.max);
    assert!(
        spread.min * 4 <= 5_000 && spread.max * 4 >= 5_000,
        "{spread:?}"
    );
    assert!(report.to_text().contains("Responses per connection: min "));
}

#[test]
fn a_timed_run_misses_only_what_was_in_flight_at_the_end() {
    let server = FakeServer::start(Behaviour::Normal);
    let mut timed = config(&server.url("/"));
    timed.pipeline = 2;
    let report = run(&timed);
    let sent = server.requests();
    // More than 4 connections x 2 could hold at once, so the run went on.
    assert!(report.requests > 4 * 2, "{report:?}");
    assert!(
        sent >= report.requests && sent - report.requests <= 4 * 2,
        "server {sent}, client {}",
        report.requests
    );
    // The measured time ends at the stop, which comes no earlier than -d.
    assert!(report.elapsed_s >= 1.0, "{}", report.elapsed_s);
    assert_eq!(report.per_second.len(), report.elapsed_s as usize);
}

/// Every 16th answer on the connection is 200 ms late. 96 requests in
/// batches of 16 make 6 late answers among 90 prompt ones: timed one by
/// one, the 90th percentile is a prompt answer and the 99th a late one;
/// timed by batch, every sample would carry the 200 ms.
#[test]
fn pipelined_requests_are_timed_one_by_one() {
    let delay = Duration::from_millis(200);
    let server = FakeServer::start(Behaviour::DelayEvery { nth: 16, delay });
    let mut pipelined = config(&server.url("/"));
    pipelined.connections = 1;
    pipelined.pipeline = 16;
    pipelined.total_requests = Some(96);
    let report = run(&pipelined);
    assert_eq!(report.requests, 96);
    let delay_us = delay.as_micros() as u64;
    assert!(
        report.latency.at(90.0) < delay_us,
        "p90 {}us",
        report.latency.at(90.0)
    );
    assert!(
        report.latency.at(99.0) >= delay_us,
        "p99 {}us",
        report.latency.at(99.0)
    );
}

/// wrk2's point: a 1 s stall in a 5 s run at 1,000 req/s delays about 1,000
/// requests that a closed-loop client would simply not have sent.
///
/// About 1,000 of the run's 5,000 requests fall due in the stall and wait
/// for its end, half a second on average: the corrected p99 is a request
/// due early in the stall, near 1 s late (300 ms is far under it). Only
/// the 10 requests in flight when it began carry the stall in their
/// uncorrected time, under 1% of the answers: the uncorrected p99 is an
/// ordinary answer.
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
    assert_timetable_accounted(&report, 10);
    assert_corrected_dominates(&report);
    let corrected_p99 = report.latency.at(99.0);
    let uncorrected = report
        .uncorrected_latency
        .as_ref()
        .expect("open model reports both");
    let uncorrected_p99 = uncorrected.at(99.0);
    assert!(corrected_p99 >= 300_000, "corrected p99 {corrected_p99}us");
    assert!(
        uncorrected_p99 < corrected_p99 / 3,
        "uncorrected p99 {uncorrected_p99}us against corrected {corrected_p99}us"
    );
}

/// 2 connections to a server that answers each request 50 ms late carry at
/// most 2 * (1 s / 50 ms + 1) = 42 requests of the 1,001 due: the rest are
/// counted unsent, not sent after the end (the run would then last about
/// 25 s). Each connection's timetable holds 500 requests 2 ms apart and it
/// sent at most 21, so it ends at least (500 - 21) * 2 ms = 958 ms behind.
#[test]
fn open_model_does_not_run_away_from_a_slow_server() {
    let server = FakeServer::start(Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(50),
    });
    let mut open = config(&server.url("/"));
    open.connections = 2;
    open.rate = Some(1_000.0);
    let report = run_ending_within(&open, Duration::from_secs(10));
    assert_timetable_accounted(&report, 2);
    assert!(sent(&report) <= 42, "{:?}", report.schedule);
    let schedule = report.schedule.expect("schedule");
    assert!(schedule.max_lag_ms >= 958.0, "{schedule:?}");
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
    // Each connection's first request times out at 200 ms, within the 1 s
    // run, and no more than 1 s / 200 ms of them fit in it.
    assert!(
        (2..=2 * 5).contains(&report.errors.timeout),
        "{:?}",
        report.errors
    );
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
    warmed.warmup = Duration::from_secs(1);
    warmed.duration = Duration::from_millis(500);
    let report = run(&warmed);
    // Measured from the warm-up's end to the stop: at least -d, and less
    // than -d plus the warm-up, which a measure from the start would read.
    assert!(
        (0.5..1.5).contains(&report.elapsed_s),
        "{}",
        report.elapsed_s
    );
    assert!(report.requests > 0);
    // The server answered the warm-up's requests too, more than the 4
    // connections could leave unreported in flight at the stop.
    assert!(
        server.requests() > report.requests + 4,
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
    // A writer blocked on the full socket must see the stop; waiting for
    // the server instead, the run would never end.
    let report = run_ending_within(&stuck, Duration::from_secs(10));
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
    let seconds = report.elapsed_s as usize;
    assert!(seconds >= 3, "{}", report.elapsed_s);
    assert_eq!(report.per_second.len(), seconds, "{:?}", report.per_second);
    assert_eq!(report.per_second[2..], vec![0; seconds - 2]);
    // wrk's Req/Sec averages every whole second of the one thread, the
    // silent ones included.
    let mean = report.per_second.iter().sum::<u64>() as f64 / seconds as f64;
    assert!(
        (report.thread_rate.mean - mean).abs() < 1e-9,
        "{:?} against a mean of {mean} over {:?}",
        report.thread_rate,
        report.per_second
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
