//! From what was measured to the report: one builder for a run and for
//! runs merged from their logs, so both print the same report.

use std::{collections::BTreeMap, time::Duration};

use crate::{
    report::{
        IntervalSummary, LatencySummary, Lateness, RateSummary, Report, ReportConfig,
        ScheduleReport,
    },
    stats::Figures,
    LoadConfig,
};

/// What a run (or several, merged) measured, all threads together.
#[derive(Debug)]
pub(crate) struct Measured {
    pub(crate) figures: Figures,
    /// Responses by status code.
    pub(crate) status: BTreeMap<u16, u64>,
    /// Responses completed in each second.
    pub(crate) per_second: Vec<u64>,
    /// Responses of each thread in each whole second (wrk's Req/Sec).
    pub(crate) thread_samples: Vec<u64>,
    /// Open model: the most-behind connection's lag at the end.
    pub(crate) max_lag: Duration,
    /// Open model: requests due but never sent.
    pub(crate) unsent: u64,
    /// Where the measured time's requests stand; `None` for runs merged
    /// from their logs, which do not carry it.
    pub(crate) accounting: Option<crate::Accounting>,
    /// Measured time, after the warm-up.
    pub(crate) elapsed: Duration,
    pub(crate) interrupted: bool,
    pub(crate) intervals: Vec<IntervalSummary>,
}

impl ReportConfig {
    /// The settings of this process's run: with `--shard`, its part.
    pub(crate) fn new(config: &LoadConfig) -> Self {
        Self {
            target: config.target.to_string(),
            urls: config
                .requests
                .iter()
                .map(|r| format!("{} {}", r.method, r.url))
                .collect(),
            threads: config.threads,
            connections: config.connections(),
            duration_s: config
                .total_requests
                .is_none()
                .then_some(config.duration.as_secs_f64()),
            total_requests: config.total_requests(),
            protocol: config.protocol,
            pipeline: config.pipeline,
            streams: config.streams,
            rate: config.rate(),
            timeout_ms: config.timeout.as_millis() as u64,
            warmup_s: config.warmup.as_secs_f64(),
            think_ms: config
                .think
                .map(|t| [t.min.as_millis() as u64, t.max.as_millis() as u64]),
            ramp_s: config.ramp.as_secs_f64(),
            shard: (config.shard.count > 1).then_some(config.shard),
        }
    }
}

impl IntervalSummary {
    pub(crate) fn new(start: Duration, duration: Duration, figures: &Figures) -> Self {
        let latency = &figures.latency;
        Self {
            start_s: start.as_secs_f64(),
            duration_s: duration.as_secs_f64(),
            requests: latency.len(),
            errors: figures.errors.total(),
            bytes_read: figures.bytes_read,
            p50_us: latency.value_at_quantile(0.5),
            p90_us: latency.value_at_quantile(0.9),
            p99_us: latency.value_at_quantile(0.99),
            p99_9_us: latency.value_at_quantile(0.999),
            max_us: latency.max(),
        }
    }
}

impl Report {
    /// The report of `measured` under `config`; `merged_logs` is 0 for a run.
    pub(crate) fn build(config: ReportConfig, measured: Measured, merged_logs: usize) -> Report {
        let Measured {
            figures: all,
            status,
            mut per_second,
            thread_samples,
            max_lag,
            unsent,
            accounting,
            elapsed,
            interrupted,
            intervals,
        } = measured;
        let seconds = elapsed.as_secs_f64().max(1e-9);
        let requests = all.latency.len();
        let requests_per_sec = requests as f64 / seconds;
        let non_2xx_3xx = status
            .iter()
            .filter(|(code, _)| !(200..400).contains(*code))
            .map(|(_, n)| n)
            .sum();
        let uncorrected = all.uncorrected.as_ref().map(LatencySummary::from_histogram);
        let lateness = all.lateness.as_ref().map(Lateness::from_histogram);
        let schedule = (config.rate)
            .map(|rate| ScheduleReport::new(rate, requests_per_sec, max_lag, unsent, lateness));
        // Whole seconds only: a last partial second would read as a drop.
        per_second.resize((elapsed.as_secs() as usize).max(1), 0);
        Report {
            tool: format!("sluice load {}", env!("CARGO_PKG_VERSION")),
            config,
            elapsed_s: elapsed.as_secs_f64(),
            requests,
            bytes_read: all.bytes_read,
            requests_per_sec,
            bytes_per_sec: all.bytes_read as f64 / seconds,
            latency: LatencySummary::from_histogram(&all.latency),
            thread_rate: RateSummary::from_samples(&thread_samples),
            per_second,
            errors: all.errors,
            status,
            non_2xx_3xx,
            accounting,
            schedule: schedule.map(|s| s.judged(uncorrected.as_ref())),
            uncorrected_latency: uncorrected,
            interrupted,
            intervals,
            merged_logs,
        }
    }
}
