//! What the modules share: running a configuration (with a limit where the
//! claim is that the run ends), the open model's bookkeeping, and the
//! open-model checks HTTP/2 and HTTP/3 have in common.
//!
//! No check here bounds how fast the machine is. Counts are exact or
//! bounded by what the configuration allows; latencies are bounded from
//! below by a delay the test sets, or compared with another figure of the
//! same run. How well the generator holds a timetable is measured in
//! `bench/open-pacing.sh`, not asserted here.

use std::{sync::mpsc, time::Duration};

use load::{LoadConfig, Report, RunControl};

/// Runs `config` to its end; a run that cannot start fails the test.
pub(crate) fn run(config: &LoadConfig) -> Report {
    load::run(config, RunControl::default()).expect("the run completes")
}

/// Runs `config` and fails the test if it has not ended within `limit`,
/// for the tests whose claim is that something cannot hold a run: without
/// the behaviour under test the run would never end, or end only after
/// `limit` (a think time, a ramp's next user), and the test says which.
pub(crate) fn run_ending_within(config: &LoadConfig, limit: Duration) -> Report {
    let (done, report) = mpsc::channel();
    let config = config.clone();
    std::thread::spawn(move || {
        let _ = done.send(load::run(&config, RunControl::default()));
    });
    match report.recv_timeout(limit) {
        Ok(report) => report.expect("the run completes"),
        Err(_) => panic!("the run did not end within {limit:?}"),
    }
}

/// Requests sent, counted when each leaves (those unanswered at the end too).
pub(crate) fn sent(report: &Report) -> u64 {
    let schedule = report.schedule.expect("open model reports its schedule");
    schedule.lateness.count
}

/// The open model loses nothing from its timetable: every request that
/// fell due before the stop was either sent or is counted unsent. Due by
/// then are the ticks `0, 1/rate, 2/rate, …` up to the measured time, that
/// is `floor(rate * elapsed) + 1`. Each of the `connections` may be off by
/// one: a request it sent between the stop and its noticing the stop.
pub(crate) fn assert_timetable_accounted(report: &Report, connections: u64) {
    let schedule = report.schedule.expect("open model reports its schedule");
    let due = (schedule.target_rate * report.elapsed_s).floor() as u64 + 1;
    let accounted = schedule.lateness.count + schedule.unsent;
    assert!(
        accounted.abs_diff(due) <= connections,
        "sent {} + unsent {} = {accounted}, but {due} fell due in {} s ({schedule:?})",
        schedule.lateness.count,
        schedule.unsent,
        report.elapsed_s
    );
}

/// The corrected latency of each request is its uncorrected latency plus
/// its wait from when it was due to when it left, so every percentile of
/// the corrected view is at least the uncorrected one, over the same count.
pub(crate) fn assert_corrected_dominates(report: &Report) {
    let uncorrected = report
        .uncorrected_latency
        .as_ref()
        .expect("open model reports the uncorrected latency");
    assert_eq!(report.latency.count, uncorrected.count);
    for percentile in load::PERCENTILES {
        assert!(
            report.latency.at(percentile) >= uncorrected.at(percentile),
            "p{percentile}: corrected {}us, uncorrected {}us",
            report.latency.at(percentile),
            uncorrected.at(percentile)
        );
    }
}

/// The open model over a multiplexed protocol, whose `get(path)` makes 2
/// connections of 8 streams and runs 1 s.
pub(crate) fn assert_open_model_corrected(get: impl Fn(&str) -> LoadConfig) {
    let mut steady = get("/");
    steady.rate = Some(200.0);
    let report = run(&steady);
    assert_timetable_accounted(&report, 2);
    assert_corrected_dominates(&report);

    // 4 streams on each of 2 connections, answers 50 ms late: at most 8
    // requests per 50 ms leave, 8 * (1 s / 50 ms + 1) = 168 in the run,
    // against 501 due at 500 req/s. The rest wait for a stream, and the
    // wait counts as latency from each request's intended send time.
    let mut overloaded = get("/delay/50");
    overloaded.streams = 4;
    overloaded.rate = Some(500.0);
    let report = run(&overloaded);
    assert_timetable_accounted(&report, 2);
    assert!(sent(&report) <= 168, "{:?}", report.schedule);
    let schedule = report.schedule.expect("schedule");
    assert!(schedule.unsent >= 501 - 168 - 2, "{schedule:?}");
    assert_corrected_dominates(&report);
    let uncorrected = report.uncorrected_latency.as_ref().expect("uncorrected");
    // Every answer took the server's 50 ms.
    assert!(uncorrected.at(50.0) >= 50_000, "{uncorrected:?}");
    // All but the first 8 requests waited for a stream: the median is
    // later than it took to answer.
    assert!(
        report.latency.at(50.0) > uncorrected.at(50.0),
        "corrected p50 {}us, uncorrected p50 {}us",
        report.latency.at(50.0),
        uncorrected.at(50.0)
    );
    // The i-th request leaves no earlier than i/8 rounds of 50 ms, while it
    // is due at i * 2 ms: the last ones sent waited hundreds of ms.
    assert!(
        report.latency.at(99.0) > 300_000,
        "corrected p99 {}us",
        report.latency.at(99.0)
    );
}
