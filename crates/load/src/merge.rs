//! `sluice load merge`: the logs of many processes (shards) added up into
//! the report one process with the whole load would have printed. The
//! histograms add, so the merged percentiles are exact, not averages of
//! percentiles; the intervals line up on the wall clock.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use crate::{
    config::ConfigError,
    figures::Figures,
    intervals::Kept,
    log::{read_log, LoadLog, LogSummary, INTERVAL},
    measured::{Measured, StageTally},
    report::{IntervalSummary, Report, ReportConfig},
    stats::add_series,
};

/// The file name ending of the logs a directory is searched for.
pub const LOG_EXTENSION: &str = "hlog";
/// How often `read_logs` looks again while it waits.
const POLL: Duration = Duration::from_millis(200);

/// A log read back from a file.
#[derive(Debug)]
pub struct RunLog {
    pub path: PathBuf,
    log: LoadLog,
}

impl RunLog {
    /// Reads a log `sluice load --log` wrote.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| ConfigError(format!("{}: {err}", path.display())))?;
        let log =
            read_log(&text).map_err(|err| ConfigError(format!("{}: {err}", path.display())))?;
        Ok(Self {
            path: path.to_path_buf(),
            log,
        })
    }
}

/// Reads the logs at `paths`: files, or directories whose `*.hlog` files
/// are read. With `expect`, waits up to `wait` until that many complete
/// logs are there (the shards of a Kubernetes Job write into a shared
/// volume as they finish); `interrupt` ends the wait early.
pub fn read_logs(
    paths: &[PathBuf],
    expect: Option<usize>,
    wait: Duration,
    interrupt: &AtomicBool,
) -> Result<Vec<RunLog>, ConfigError> {
    let deadline = Instant::now() + wait;
    loop {
        let files = log_files(paths)?;
        let Some(expect) = expect else {
            return files.iter().map(|file| RunLog::read(file)).collect();
        };
        let mut complete = Vec::new();
        let mut not_yet = Vec::new();
        for file in &files {
            match RunLog::read(file) {
                Ok(log) => complete.push(log),
                Err(why) => not_yet.push(why.0),
            }
        }
        if complete.len() >= expect {
            return Ok(complete);
        }
        if Instant::now() >= deadline || interrupt.load(Ordering::Relaxed) {
            let mut message = format!(
                "{} of the {expect} expected logs are complete after waiting {:?}",
                complete.len(),
                wait
            );
            for why in not_yet {
                message.push_str(&format!("\n  {why}"));
            }
            return Err(ConfigError(message));
        }
        std::thread::sleep(POLL);
    }
}

/// The files named, with each directory's `*.hlog` files in name order.
fn log_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ConfigError> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path)
            .map_err(|err| ConfigError(format!("{}: {err}", path.display())))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|file| file.extension().is_some_and(|ext| ext == LOG_EXTENSION))
            .collect();
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// The report of `logs` added up: what one process with all their load
/// would have printed.
pub fn merge(logs: &[RunLog]) -> Result<Report, ConfigError> {
    let first = logs
        .first()
        .ok_or_else(|| ConfigError("no log to merge".into()))?;
    let config = merged_config(logs)?;
    // Measuring started at `start`: the first shard's start on the wall clock.
    let start = logs
        .iter()
        .map(|run| run.log.summary.start_unix_s)
        .fold(f64::INFINITY, f64::min);
    let end = logs
        .iter()
        .map(|run| run.log.summary.start_unix_s + run.log.summary.elapsed_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let open_model = first.log.summary.config.rate.is_some();
    let checks = config.checks.len();
    let mut measured = Measured {
        figures: Figures::new(open_model, checks),
        status: BTreeMap::new(),
        per_second: Vec::new(),
        per_connection: Vec::new(),
        thread_samples: Vec::new(),
        max_lag: Duration::ZERO,
        unsent: 0,
        accounting: None,
        elapsed: Duration::from_secs_f64((end - start).max(0.0)),
        interrupted: false,
        intervals: Vec::new(),
        stages: config.stages.as_ref().map(|_| StageTally::default()),
    };
    let mut intervals: BTreeMap<u64, (Duration, Figures)> = BTreeMap::new();
    for run in logs {
        let summary = &run.log.summary;
        // Whole intervals after the first start, to the nearest: shards
        // started together (--start-at) share their interval indices.
        let offset = ((summary.start_unix_s - start) / INTERVAL.as_secs_f64()).round() as u64;
        let mut requests = 0;
        for window in &run.log.windows {
            requests += window.figures.latency.len();
            measured.figures.add(&window.figures);
            let (duration, sum) = intervals
                .entry(window.index + offset)
                .or_insert_with(|| (Duration::ZERO, Figures::new(open_model, checks)));
            *duration = (*duration).max(window.duration);
            sum.add(&window.figures);
        }
        if requests != summary.requests {
            return Err(ConfigError(format!(
                "{}: its intervals hold {requests} responses, its summary says {}: the log is damaged",
                run.path.display(),
                summary.requests
            )));
        }
        for (code, n) in &summary.status {
            *measured.status.entry(*code).or_default() += n;
        }
        add_series(
            &mut measured.per_second,
            &summary.per_second,
            offset as usize,
        );
        measured.thread_samples.extend(&summary.thread_samples);
        measured.max_lag = measured.max_lag.max(Duration::from_secs_f64(
            summary.max_lag_ms.max(0.0) / 1000.0,
        ));
        measured.unsent += summary.unsent;
        measured.interrupted |= summary.interrupted;
        if let Some(tally) = &mut measured.stages {
            tally.add(&StageTally {
                responses: summary.stage_responses.clone(),
                sent: summary.stage_sent.clone(),
            });
        }
    }
    let mut kept = Kept::default();
    for (&index, (duration, figures)) in &intervals {
        kept.push(IntervalSummary::new(
            INTERVAL * index as u32,
            *duration,
            figures,
        ));
    }
    measured.intervals = kept.list;
    Ok(Report::build(config, measured, logs.len()))
}

/// The settings of the whole test: the logs' connections, threads,
/// requests and rates added up, once the logs are each a different part
/// of one test.
fn merged_config(logs: &[RunLog]) -> Result<ReportConfig, ConfigError> {
    for (n, run) in logs.iter().enumerate() {
        for earlier in &logs[..n] {
            if let Some(why) = not_parts_of_one_test(earlier, run) {
                return Err(ConfigError(why));
            }
        }
    }
    let mut merged = logs[0].log.summary.config.clone();
    for run in &logs[1..] {
        let config = &run.log.summary.config;
        merged.threads += config.threads;
        merged.connections += config.connections;
        merged.total_requests = merged
            .total_requests
            .zip(config.total_requests)
            .map(|(a, b)| a + b);
        merged.rate = merged.rate.zip(config.rate).map(|(a, b)| a + b);
        merged.duration_s = merged
            .duration_s
            .zip(config.duration_s)
            .map(|(a, b)| a.max(b));
    }
    merged.shard = None;
    Ok(merged)
}

/// Why `then` is not another part of the test `first` is a part of: the
/// same log twice, another test, or another run of the same shard.
fn not_parts_of_one_test(first: &RunLog, then: &RunLog) -> Option<String> {
    let (ours, theirs) = (first.path.display(), then.path.display());
    let (ours, theirs) = (ours.to_string(), theirs.to_string());
    match (&first.log.identity, &then.log.identity) {
        (Some(a), Some(b)) => a.mismatch(b, &ours, &theirs),
        (None, None) => unnamed_mismatch(&first.log.summary, &then.log.summary, &ours, &theirs),
        _ => Some(format!(
            "{theirs} and {ours} are logs of different tests: one was written by an older \
             sluice (log version 1, which names no test)"
        )),
    }
}

/// [`not_parts_of_one_test`] for logs of version 1, which name no test:
/// their URLs, protocol and model, the shard, and the start to the
/// microsecond (the same log twice).
fn unnamed_mismatch(a: &LogSummary, b: &LogSummary, ours: &str, theirs: &str) -> Option<String> {
    let (mine, yours) = (&a.config, &b.config);
    let differs = |what: &str,
                   theirs_value: &dyn std::fmt::Debug,
                   ours_value: &dyn std::fmt::Debug| {
        Some(format!(
            "{theirs} and {ours} are logs of different tests: {theirs}'s {what} ({theirs_value:?}) differs from {ours}'s ({ours_value:?})"
        ))
    };
    if mine.urls != yours.urls {
        return differs("URLs", &yours.urls, &mine.urls);
    }
    if mine.protocol != yours.protocol {
        return differs("protocol", &yours.protocol, &mine.protocol);
    }
    if mine.rate.is_some() != yours.rate.is_some() {
        return differs("model", &yours.rate, &mine.rate);
    }
    if mine.shard == yours.shard && a.start_unix_s == b.start_unix_s {
        return Some(format!(
            "{theirs} and {ours} are the same log: given twice, its requests would count twice"
        ));
    }
    match mine.shard {
        Some(shard) if mine.shard == yours.shard => Some(format!(
            "{theirs} and {ours} both ran shard {shard}: its requests would count twice"
        )),
        _ => None,
    }
}
