//! `sluice bench`: the benchmark questions (what the backend does alone,
//! what the proxy in front costs, each handler, protocol, balancing policy,
//! IO-heavy and open-model load, memory per idle connection; the groups'
//! table at the top of docs/BENCH.md) answered on loopback in one command.
//! Every component (backends, the proxy, the peers) runs in its own
//! process; the load generator runs in this one, so that its progress
//! reaches the terminal without a pipe.
//!
//! A run is a list of groups (`baseline`, `proxy`, `middleware`,
//! `protocols`, `lb`, `lb-slow`, `io`, `open`, `idle`, and on request
//! `runtimes`, the seeds' own backends in their runtimes); each starts the
//! components it needs, measures its rows in rounds (`idle` once), one load
//! run at a time (a warm-up, discarded, then the measured time) in an order
//! rotated each round, checks after each run that every component is still
//! alive, and stops them all before the next group starts.

pub mod baseline;
mod drain;
mod fmt;
mod groups;
mod machine;
mod measure;
mod options;
mod peers;
mod process;
pub mod report;
pub mod results;
mod rounds;
pub mod runtimes;
mod stage;
mod window;

use std::{
    path::Path,
    sync::atomic::Ordering,
    time::{Instant, SystemTime},
};

use anyhow::{bail, Context};

pub use machine::{find_peer, find_program, peers_dir, PeerKind};
pub use options::{parse_handler, BenchOptions, GroupName, Profile};
pub use results::Results;
pub use stage::Observer;
pub use stage::Round;

use results::{Settings, SCHEMA};
use stage::Bench;

/// Runs the groups asked for, writes the results folder after each group
/// (so that an interrupted or failed run keeps what it measured) and
/// returns the results. An orchestration failure (a component that does
/// not start or dies, a port in use) stops every component and is the
/// error; the partial report names it in its notes.
pub fn run(options: &BenchOptions, observer: &mut dyn Observer) -> anyhow::Result<Results> {
    // Children resolve relative paths against their own idea of a base
    // (nginx against its -p prefix): every path handed to one is absolute.
    let options = &options.absolute()?;
    check(options)?;
    let started = Instant::now();
    let mut bench = Bench::new(options, observer)?;
    let mut results = Results {
        schema: SCHEMA.to_string(),
        started: rfc3339(SystemTime::now()),
        elapsed_s: 0.0,
        machine: machine::describe(bench.fd_limit, &bench.peers),
        settings: Settings {
            only: options.only.iter().map(|g| g.to_string()).collect(),
            duration_s: bench.profile.duration.as_secs_f64(),
            warmup_s: bench.profile.warmup.as_secs_f64(),
            connections: options.connections,
            pipeline: options.pipeline,
            pin: bench.placement.pinned(),
            quick: options.quick,
            max_conns: bench.max_conns,
            rounds: options.rounds(),
            runtimes: if options.runs(GroupName::Runtimes) {
                options
                    .runtimes
                    .iter()
                    .map(|r| r.name().to_string())
                    .collect()
            } else {
                Vec::new()
            },
        },
        notes: Vec::new(),
        groups: Vec::new(),
    };
    let expected = groups::expected(&groups::Outline::of(&bench));
    bench.observer.run_started(expected);
    for &(name, run_group) in groups::ALL {
        if !options.runs(name) {
            continue;
        }
        if options.interrupt.load(Ordering::Relaxed) {
            bench.note("interrupted: the remaining groups did not run".into());
            break;
        }
        let outcome = run_group(&mut bench);
        if outcome.is_ok() && cfg!(debug_assertions) {
            check_estimate(&mut bench, name);
        }
        results.groups.append(&mut bench.published);
        results.notes = bench.notes.clone();
        results.elapsed_s = started.elapsed().as_secs_f64();
        if let Err(err) = outcome {
            results
                .notes
                .push(format!("aborted in group {name}: {err:#}"));
            let _ = report::write_all(&results, &options.out);
            return Err(err.context(format!("group {name}")));
        }
        report::write_all(&results, &options.out)
            .with_context(|| format!("cannot write the report to {}", options.out.display()))?;
    }
    results.notes = bench.notes.clone();
    results.elapsed_s = started.elapsed().as_secs_f64();
    report::write_all(&results, &options.out)
        .with_context(|| format!("cannot write the report to {}", options.out.display()))?;
    Ok(results)
}

/// In debug builds (the tests' binary), a note when a group measured
/// other rows than the run's estimate counted for it: the estimate's
/// counts ([`groups::planned`]) have fallen behind the group's code.
fn check_estimate(bench: &mut Bench<'_>, name: GroupName) {
    if bench.options.interrupt.load(Ordering::Relaxed) {
        return;
    }
    let Some((planned, _)) = groups::planned(&groups::Outline::of(bench), name) else {
        return;
    };
    let measured: usize = bench.published.iter().map(|g| g.rows.len()).sum();
    if measured != planned {
        bench.note(format!(
            "estimate: group {name} measured {measured} rows, the estimate counted {planned} \
             (groups::planned is out of date)"
        ));
    }
}

fn check(options: &BenchOptions) -> anyhow::Result<()> {
    options.validate().map_err(anyhow::Error::msg)?;
    if !options.sluice.is_file() {
        bail!(
            "the sluice binary {} does not exist",
            options.sluice.display()
        );
    }
    ensure_dir(&options.out)
}

/// `results/bench-2026-11-21T10-04-05`: a new folder per run.
pub fn default_out_dir() -> std::path::PathBuf {
    let stamp = rfc3339(SystemTime::now()).replace(':', "-");
    Path::new("results").join(format!("bench-{}", stamp.trim_end_matches('Z')))
}

fn ensure_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// `2026-11-21T10:04:05Z`. A clock before 1970 reads as 1970 (humantime
/// would panic on it).
fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time.max(SystemTime::UNIX_EPOCH)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_in_rfc3339() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_795_255_445);
        assert_eq!(rfc3339(t), "2026-11-21T10:04:05Z");
        let before = SystemTime::UNIX_EPOCH - std::time::Duration::from_secs(1);
        assert_eq!(rfc3339(before), "1970-01-01T00:00:00Z");
    }
}
