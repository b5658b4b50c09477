//! What the modules share: running a configuration, and the open-model
//! checks HTTP/2 and HTTP/3 have in common.

use load::{LoadConfig, Report, RunControl};

/// Runs `config` to its end; a run that cannot start fails the test.
pub(crate) fn run(config: &LoadConfig) -> Report {
    load::run(config, RunControl::default()).expect("the run completes")
}

/// The open model over a multiplexed protocol, whose `get(path)` makes 2
/// connections of 8 streams: it keeps a 200 req/s timetable, and with 4
/// streams of 50 ms answers (160 req/s) at 500 req/s, requests wait for a
/// stream and that wait is counted as latency from their intended send time.
pub(crate) fn assert_open_model_corrected(get: impl Fn(&str) -> LoadConfig) {
    let mut steady = get("/");
    steady.rate = Some(200.0);
    let report = run(&steady);
    let schedule = report.schedule.expect("open model reports its schedule");
    assert!(
        (180.0..220.0).contains(&schedule.achieved_rate),
        "{schedule:?}"
    );

    let mut overloaded = get("/delay/50");
    overloaded.streams = 4;
    overloaded.rate = Some(500.0);
    let report = run(&overloaded);
    let schedule = report.schedule.expect("open model reports its schedule");
    assert!(schedule.achieved_rate < 200.0, "{schedule:?}");
    assert!(schedule.unsent > 200, "{schedule:?}");
    let uncorrected = report.uncorrected_latency.as_ref().expect("uncorrected");
    assert!(
        uncorrected.at(50.0) < 100_000,
        "uncorrected p50 {}us",
        uncorrected.at(50.0)
    );
    assert!(
        report.latency.at(99.0) > 300_000,
        "corrected p99 {}us",
        report.latency.at(99.0)
    );
}
