//! From what was measured to the report: one builder for a run and for
//! runs merged from their logs, so both print the same report.

use std::{collections::BTreeMap, time::Duration};

use crate::{
    figures::Figures,
    report::{
        CheckReport, IntervalSummary, LatencySummary, Lateness, PhaseReport, RateSummary, Report,
        ReportConfig, ScheduleReport, Spread, StageReport,
    },
    stages::Curve,
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
    /// The measured time's responses on each connection; empty for runs
    /// merged from their logs, which do not carry it.
    pub(crate) per_connection: Vec<u64>,
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
    /// With stages: what happened in each.
    pub(crate) stages: Option<StageTally>,
}

/// Responses (by when they completed) and sends (by when they were due)
/// in each stage.
#[derive(Debug, Clone, Default)]
pub(crate) struct StageTally {
    pub(crate) responses: Vec<u64>,
    pub(crate) sent: Vec<u64>,
}

impl StageTally {
    pub(crate) fn add(&mut self, other: &StageTally) {
        crate::stats::add_series(&mut self.responses, &other.responses, 0);
        crate::stats::add_series(&mut self.sent, &other.sent, 0);
    }
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
            stages: config.stages.clone(),
            checks: config.checks.iter().map(|c| c.name.clone()).collect(),
            weights: config.requests.iter().map(|r| r.weight).collect(),
        }
    }

    /// This process's share of the stages' targets (with `--shard`).
    fn stage_share(&self) -> f64 {
        match (&self.stages, self.rate) {
            (Some(stages), Some(rate)) if stages.peak() > 0.0 => rate / stages.peak(),
            _ => 1.0,
        }
    }
}

/// Seconds to the millisecond: what an interval log (HdrHistogram's
/// format, three decimals) keeps, so that a run's intervals and those of
/// the merge of its own log are the same (a run's last interval is
/// usually partial: 0.499154607 s here, 0.499 in its log).
fn to_millis(time: Duration) -> f64 {
    (time.as_secs_f64() * 1000.0).round() / 1000.0
}

impl IntervalSummary {
    pub(crate) fn new(start: Duration, duration: Duration, figures: &Figures) -> Self {
        let latency = &figures.latency;
        Self {
            start_s: to_millis(start),
            duration_s: to_millis(duration),
            requests: latency.len(),
            errors: figures.errors.total(),
            bytes_read: figures.bytes_read,
            non_2xx_3xx: figures.non_2xx_3xx(),
            checks_passed: figures.checks.iter().map(|c| c.passed).sum(),
            checks_failed: figures.checks.iter().map(|c| c.failed).sum(),
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
            per_connection,
            thread_samples,
            max_lag,
            unsent,
            accounting,
            elapsed,
            interrupted,
            intervals,
            stages,
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
        // With stages the rate asked is the timetable's average.
        let curve = config.stages.as_ref().map(Curve::new);
        let target_rate = match (&curve, config.rate) {
            (Some(curve), Some(_)) => {
                Some(curve.integral(seconds) * config.stage_share() / seconds)
            }
            (None, rate) => rate,
            (Some(_), None) => None,
        };
        let schedule = target_rate
            .map(|rate| ScheduleReport::new(rate, requests_per_sec, max_lag, unsent, lateness));
        // Whole seconds only: a last partial second would read as a drop.
        per_second.resize((elapsed.as_secs() as usize).max(1), 0);
        let checks = config
            .checks
            .iter()
            .zip(&all.checks)
            .map(|(name, count)| CheckReport {
                name: name.clone(),
                passed: count.passed,
                failed: count.failed,
            })
            .collect();
        let stages = match (&curve, stages) {
            (Some(curve), Some(tally)) => stage_reports(&config, curve, &tally),
            _ => Vec::new(),
        };
        let phases = &all.phases;
        Report {
            tool: format!("sluice load {}", env!("CARGO_PKG_VERSION")),
            scenario: None,
            elapsed_s: elapsed.as_secs_f64(),
            requests,
            bytes_read: all.bytes_read,
            requests_per_sec,
            bytes_per_sec: all.bytes_read as f64 / seconds,
            latency: LatencySummary::from_histogram(&all.latency),
            thread_rate: RateSummary::from_samples(&thread_samples),
            per_second,
            per_connection: Spread::of(per_connection),
            errors: all.errors,
            status,
            non_2xx_3xx,
            accounting,
            schedule: schedule.map(|s| s.judged(uncorrected.as_ref())),
            uncorrected_latency: uncorrected,
            interrupted,
            intervals,
            merged_logs,
            phases: PhaseReport {
                dns: LatencySummary::from_histogram(&phases.dns),
                connect: LatencySummary::from_histogram(&phases.connect),
                tls: LatencySummary::from_histogram(&phases.tls),
                waiting: LatencySummary::from_histogram(&phases.waiting),
                receiving: LatencySummary::from_histogram(&phases.receiving),
            },
            checks,
            stages,
            thresholds: Vec::new(),
            config,
        }
    }
}

/// Each stage's target and counts.
fn stage_reports(config: &ReportConfig, curve: &Curve, tally: &StageTally) -> Vec<StageReport> {
    let Some(stages) = &config.stages else {
        return Vec::new();
    };
    let open = config.rate.is_some();
    let share = config.stage_share();
    let mut start = 0.0;
    let mut from = stages.from;
    stages
        .steps
        .iter()
        .enumerate()
        .map(|(i, stage)| {
            let duration = stage.duration.as_secs_f64();
            let end = start + duration;
            let requests = tally.responses.get(i).copied().unwrap_or(0);
            let report = StageReport {
                stage: i + 1,
                start_s: start,
                duration_s: duration,
                from,
                to: stage.target,
                due: open.then(|| (curve.integral(end) - curve.integral(start)) * share),
                sent: open.then(|| tally.sent.get(i).copied().unwrap_or(0)),
                requests,
                achieved_rate: if duration > 0.0 {
                    requests as f64 / duration
                } else {
                    0.0
                },
            };
            start = end;
            from = stage.target;
            report
        })
        .collect()
}
