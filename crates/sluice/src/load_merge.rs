//! `sluice load` over many machines: the shard flags, and `sluice load
//! merge`, which adds the shards' logs up into one report.

use std::{
    path::PathBuf,
    process::ExitCode,
    sync::{atomic::AtomicBool, Arc},
    time::{Duration, SystemTime},
};

use clap::{Args, Subcommand};
use load::{ConfigError, Shard, JOB_COMPLETION_INDEX};

use crate::cli::{parse_duration, watch_interrupts, write_report};

/// The environment variable that gives `--shards` when the flag is absent.
const SHARDS_ENV: &str = "SLUICE_SHARDS";

/// Spreading one test over many processes (docs/LOAD.md, "Distributed runs").
#[derive(Debug, Args)]
pub(crate) struct ShardArgs {
    /// Write the latencies (HdrHistogram interval log, one interval a
    /// second) and counts to FILE (`-`: stdout, the report then goes to
    /// stderr), for `sluice load merge`.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Run shard i of N (0 <= i < N): 1/N of -c/-u, of -n and of --rate,
    /// which count the whole test.
    #[arg(long, value_name = "i/N", value_parser = Shard::parse, conflicts_with = "shards")]
    shard: Option<Shard>,
    /// Run one of N shards, the one $JOB_COMPLETION_INDEX names (set in each
    /// pod of a Kubernetes Indexed Job); default $SLUICE_SHARDS.
    #[arg(long, value_name = "N")]
    shards: Option<u32>,
    /// Start at this wall-clock time (RFC 3339 in UTC like
    /// 2025-06-01T12:00:00Z, or unix seconds), so that shards start together.
    #[arg(long, value_name = "TIME", value_parser = load::parse_start_at)]
    start_at: Option<SystemTime>,
    /// Name the test in its log, the same on every shard (a run's name,
    /// the Job's uid); default a digest of the whole test's settings and
    /// --start-at. `merge` refuses logs of different tests.
    #[arg(long, value_name = "ID")]
    test_id: Option<String>,
}

impl ShardArgs {
    /// The log file, the shard (from the flags or the environment) and the start time.
    pub(crate) fn apply(&self, config: &mut load::LoadConfig) -> Result<(), ConfigError> {
        config.log = self.log.clone();
        config.start_at = self.start_at;
        config.test_id = self.test_id.clone();
        let shards = match self.shards {
            Some(count) => Some(count),
            None => match std::env::var(SHARDS_ENV) {
                Ok(text) => Some(text.trim().parse().map_err(|_| {
                    ConfigError(format!("{SHARDS_ENV}={text:?} is not a number of shards"))
                })?),
                Err(_) => None,
            },
        };
        config.shard = match (self.shard, shards) {
            (Some(shard), _) => shard,
            (None, Some(count)) => {
                let index = std::env::var(JOB_COMPLETION_INDEX).ok();
                Shard::from_job_index(index.as_deref(), count).map_err(ConfigError)?
            }
            (None, None) => Shard::WHOLE,
        };
        Ok(())
    }

    /// Whether the log takes stdout, so the report goes to stderr.
    pub(crate) fn logs_to_stdout(&self) -> bool {
        self.log.as_deref() == Some(std::path::Path::new("-"))
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum LoadCommand {
    Merge(MergeArgs),
}

/// Add up the logs of `sluice load --log` runs (the shards of one test)
/// and print the report one process with all their load would have
/// printed: exact percentiles (histograms add), per interval and whole run.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sluice load merge shard-0.hlog shard-1.hlog shard-2.hlog\n  \
    sluice load merge --json merged.json logs/\n  \
    sluice load merge --expect 8 --wait 15m /logs\n\n\
A directory stands for its *.hlog files. Intervals line up on the wall clock\n\
(shards started with --start-at share them). Each log names its test (the\n\
whole test's settings, --start-at, --test-id) and its run: logs of different\n\
tests, the same log twice and two runs of one shard are refused. Exit\n\
status: 0 after a merge, 2 for a missing, incomplete or damaged log, or\n\
logs that are not each a different part of one test.")]
pub(crate) struct MergeArgs {
    /// Log files, or directories of *.hlog files.
    #[arg(required = true, value_name = "LOG")]
    logs: Vec<PathBuf>,
    /// Wait until this many complete logs are there (shards still running).
    #[arg(long, value_name = "N")]
    expect: Option<usize>,
    /// With --expect: how long to wait at most.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    wait: Duration,
    /// Also write the merged report as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub(crate) fn run(command: LoadCommand) -> ExitCode {
    let LoadCommand::Merge(args) = command;
    let interrupt = Arc::new(AtomicBool::new(false));
    watch_interrupts(Arc::clone(&interrupt));
    let merged = load::read_logs(&args.logs, args.expect, args.wait, &interrupt)
        .and_then(|logs| load::merge(&logs));
    match merged {
        Ok(report) => write_report(&report, false, args.json.as_deref()),
        Err(err) => {
            eprintln!("sluice load merge: error: {err}");
            ExitCode::from(2)
        }
    }
}
