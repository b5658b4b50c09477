//! `sluice load`: an HTTP/1.1, HTTP/2 and HTTP/3 load generator.
//!
//! Closed model (wrk, h2load): `-c` connections over `-t` threads, each
//! connection keeping `--pipeline` HTTP/1.1 requests or `--streams` HTTP/2
//! or HTTP/3 streams in flight. Open model (wrk2): `--rate`
//! requests/s on a fixed timetable, each request sent within microseconds
//! of its time by its thread's pacer (`pacer.rs`), latency measured from
//! its intended send time (coordinated-omission corrected), with the
//! uncorrected figures and the generator's own send lateness beside it. Users model (Gatling): the closed model
//! with one request in flight per connection, a random think time
//! (`think`) between a response and the next request, and an optional
//! `ramp` over which the users start. One current-thread runtime per thread;
//! statistics in HDR histograms per thread, merged at the end.
//!
//! ```no_run
//! use http::Method;
//! let mut config = load::LoadConfig::new(&[(Method::GET, "http://127.0.0.1:8080/v1/pets".into())]).unwrap();
//! config.connections = 128;
//! let report = load::run(&config, load::RunControl::default()).unwrap();
//! println!("{}", report.to_text());
//! ```

mod checks;
mod config;
mod conn;
mod figures;
mod format;
mod identity;
pub mod idle;
mod intervals;
pub mod live;
mod log;
mod measured;
mod merge;
mod pacer;
pub mod plan;
pub mod procfs;
mod report;
mod response;
mod runner;
mod shard;
pub mod stages;
mod stats;
mod target;
mod thread;
mod threshold;
mod timetable;

use std::{
    sync::{atomic::AtomicBool, Arc},
    time::Duration,
};

pub use checks::{
    Check, CheckSpec, Rule, StatusSet, TextTest, DEFAULT_BODY_LIMIT, MAX_BODY_LIMIT, MAX_CHECKS,
};
pub use config::{
    parse_duration, ConfigError, LoadConfig, Protocol, ThinkTime, MAX_BODIES, MAX_CAPTURE,
    MAX_REQUESTS, MAX_ROTATION, MAX_THREADS,
};
pub use figures::{CheckCount, Errors};
pub use format::{format_bytes, format_count, format_us};
pub use intervals::MAX_INTERVALS;
pub use merge::{merge, read_logs, RunLog, LOG_EXTENSION};
pub use report::{
    CheckReport, IntervalSummary, LatencySummary, Lateness, Percentile, PhaseReport, RateSummary,
    Report, ReportConfig, ScheduleReport, SpectrumPoint, Spread, StageReport, ThresholdReport,
    GENERATOR_BOUND_SHARE, PERCENTILES,
};
pub use response::{Done, ResponseReader};
pub use runner::run;
pub use shard::{parse_start_at, Shard, JOB_COMPLETION_INDEX};
pub use stages::{Stage, Stages};
pub use stats::Accounting;
pub use target::{
    parse_header, parse_requests_file, parse_url, request_bytes, RequestSpec, Scheme, Target,
};
pub use threshold::Threshold;

/// Descriptors kept free beyond one per connection.
const SPARE_FDS: u64 = 64;

/// A progress sample for a live display.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Time since the start, warm-up included.
    pub elapsed: Duration,
    /// Warm-up plus duration, for a timed run.
    pub planned: Option<Duration>,
    pub warming_up: bool,
    /// Responses so far, warm-up included.
    pub responses: u64,
}

/// Outside control of a run.
#[derive(Default)]
pub struct RunControl {
    /// Set it (from a Ctrl-C handler) to end the run early; results so far are reported.
    pub interrupt: Arc<AtomicBool>,
    pub on_progress: Option<Box<dyn FnMut(Progress) + Send>>,
    /// Called once when the warm-up ends and measuring starts (at once
    /// without a warm-up), within about 10 ms: a caller that samples a
    /// server's CPU time can leave the warm-up out.
    pub on_measure: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for RunControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunControl")
            .field("interrupt", &self.interrupt)
            .finish_non_exhaustive()
    }
}

/// Raises the open-file limit and checks that `connections` fit under it.
pub fn ensure_fd_limit(connections: usize) -> Result<u64, ConfigError> {
    let limit = rlimit::increase_nofile_limit(u64::MAX).unwrap_or(0);
    let needed = connections as u64 + SPARE_FDS;
    if limit != 0 && limit < needed {
        return Err(ConfigError(format!(
            "cannot open {connections} connections: the open-file limit is {limit} \
             (at most {} connections; raise it with `ulimit -n`)",
            limit.saturating_sub(SPARE_FDS)
        )));
    }
    Ok(limit)
}
