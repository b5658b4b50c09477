//! The saturating groups against a backend that builds a backlog (one
//! answer every 10 ms, in order, for 500 users or connections: far more
//! than it serves): the row after a row that left it busy does not start
//! until it has worked everything off, and each row counts the requests
//! it left unanswered exactly. The rows load the backend directly (two
//! systems on the same backend), as `io`'s "passthrough alone" row does;
//! what runs is the groups' own block builders and `run_blocks`.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use testkit::BacklogServer;

use super::{balancing::lb_blocks, sweeps::io_blocks, sweeps::message};
use crate::{
    options::{BenchOptions, GroupName},
    process::{Component, Launch},
    results::Row,
    stage::{Bench, Observer, Round},
};

/// When each run started, as the bench told its observer.
#[derive(Default)]
struct Clock(Vec<Instant>);

impl Observer for Clock {
    fn row_started(&mut self, _group: &str, _label: &str, _round: Round, _planned: Duration) {
        self.0.push(Instant::now());
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// One round of 1 s rows without a warm-up: `--duration` fixes the
/// windows, so a short one is marked, not lengthened.
fn options(group: GroupName, out: &Path) -> BenchOptions {
    let mut options = BenchOptions::new("sluice".into(), out.to_path_buf());
    options.only = vec![group];
    options.duration = Some(Duration::from_secs(1));
    options.warmup = Some(Duration::ZERO);
    options.rounds = Some(1);
    options
}

/// A process for the rows to read CPU time and RSS from (the backend
/// runs in this one).
fn stand_in(out: &Path) -> Component {
    std::fs::create_dir_all(out).expect("scratch folder");
    Component::start(Launch {
        name: "stand-in".into(),
        program: Path::new("sleep"),
        args: vec!["60".into()],
        env: Vec::new(),
        cpus: None,
        log: out.join("stand-in.log"),
        listens: Vec::new(),
        probe: None,
    })
    .expect("sleep starts")
}

/// Waits until the backend has read `count` requests since `from`.
fn wait_received(backend: &BacklogServer, from: Instant, count: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let received = backend.received_between(from, None);
        if received >= count || Instant::now() >= deadline {
            return received;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What every saturating group must show: each run started with nothing
/// queued at the backend, the second after a wait as long as the first
/// run's backlog; each run's requests balance, with hundreds unanswered
/// and the backend's own count of what it read equal to what was sent;
/// and the too-short windows are marked.
fn assert_no_row_inherits_a_backlog(backend: &BacklogServer, starts: &[Instant], rows: &[Row]) {
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!(starts.len(), 2, "one run per row");
    // Round 0 runs the rows in order.
    let runs: Vec<_> = rows.iter().map(|r| &r.rounds[0]).collect();
    for (i, &start) in starts.iter().enumerate() {
        assert_eq!(
            backend.pending_at(start),
            0,
            "run {i} started with requests queued at the backend"
        );
    }
    let first = runs[0].drain.expect("drained before the first run");
    assert!(first.drained && first.waited_s < 1.0, "{first:?}");
    let second = runs[1].drain.expect("drained before the second run");
    assert!(second.drained, "{second:?}");
    // The first run left hundreds queued at 10 ms each.
    assert!(
        second.waited_s >= runs[0].unanswered as f64 * 0.005,
        "waited {} s for {} unanswered",
        second.waited_s,
        runs[0].unanswered
    );
    for (i, (run, row)) in runs.iter().zip(rows).enumerate() {
        assert_eq!(run.carried_in, 0, "no warm-up");
        assert_eq!(run.lost, 0, "{:?}", run.errors);
        assert!(run.unanswered >= 300, "run {i}: {run:?}");
        assert_eq!(
            run.carried_in + run.sent,
            run.requests + run.lost + run.unanswered,
            "run {i}"
        );
        // What the backend read while the run went (the next run's drain
        // probes aside) is what the run sent.
        let until = starts.get(i + 1).copied();
        let received = match until {
            Some(until) => {
                let probes = runs[i + 1].drain.map_or(0, |d| d.probes);
                backend.received_between(starts[i], Some(until)) - probes
            }
            None => wait_received(backend, starts[i], run.sent),
        };
        assert_eq!(received, run.sent, "run {i}");
        assert!(
            row.not_comparable
                .iter()
                .any(|r| r.contains("window shorter than its latency")),
            "{:?}",
            row.not_comparable
        );
    }
}

fn run_group(
    group: GroupName,
    build: impl FnOnce(&Bench<'_>, &[(String, usize, SocketAddr)]) -> Vec<Vec<crate::rounds::Trial>>,
) {
    let backend = BacklogServer::start(Duration::from_millis(10));
    let out = scratch(group.as_str());
    let mut components = vec![stand_in(&out)];
    let options = options(group, &out);
    let mut clock = Clock::default();
    let rows = {
        let mut bench = Bench::new(&options, &mut clock).expect("bench");
        let systems = vec![
            ("backend".to_string(), 0, backend.addr()),
            ("sluice".to_string(), 0, backend.addr()),
        ];
        let blocks = build(&bench, &systems);
        bench
            .run_blocks(group.as_str(), &mut components, blocks, &mut || {})
            .expect("the rows run")
    };
    assert_no_row_inherits_a_backlog(&backend, &clock.0, &rows);
    let _ = std::fs::remove_dir_all(&out);
}

/// `io`: 500 users thinking 1-2 s post seeds/003's message; all send at
/// once (no warm-up, so no ramp) and about 100 are answered a second.
#[test]
fn io_rows_start_on_a_drained_backend_and_count_what_is_left_unanswered() {
    run_group(GroupName::Io, |bench, systems| {
        let body = message(bench);
        io_blocks(bench, systems, &[500], &body, &[]).expect("blocks")
    });
}

/// `lb`: 500 connections, each with a request in flight all the time.
#[test]
fn lb_rows_start_on_a_drained_backend_and_count_what_is_left_unanswered() {
    run_group(GroupName::Lb, |bench, systems| {
        lb_blocks(bench, systems, &[], &[500], &[]).expect("blocks")
    });
}
