//! The results of a run: a serialisable report (`--json`) and the wrk-style
//! text a wrk user recognises, with what wrk leaves out.

mod text;

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::{figures::Errors, shard::Shard, stages::Stages, Protocol};

/// Percentiles shown in the text and listed in the JSON summary.
pub const PERCENTILES: [f64; 8] = [50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 99.999];

/// The whole report; `--json` writes it as is.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub tool: String,
    /// The scenario's name (a one-scenario run from flags: `default`).
    pub scenario: Option<String>,
    pub config: ReportConfig,
    /// Measured time (after the warm-up), in seconds.
    pub elapsed_s: f64,
    pub requests: u64,
    pub bytes_read: u64,
    pub requests_per_sec: f64,
    pub bytes_per_sec: f64,
    /// Latency in µs; in the open model, from each request's intended send time.
    pub latency: LatencySummary,
    /// Open model only: latency from the actual send (what a naive tool reports).
    pub uncorrected_latency: Option<LatencySummary>,
    /// Requests/s of each thread in each whole second (wrk's "Req/Sec").
    pub thread_rate: RateSummary,
    /// Responses completed in each second of the run, all threads together.
    pub per_second: Vec<u64>,
    /// How evenly the target served the connections: the measured time's
    /// responses per connection (per user); `None` when merged from logs.
    #[serde(default)]
    pub per_connection: Option<Spread>,
    pub errors: Errors,
    /// Responses by status code.
    pub status: BTreeMap<u16, u64>,
    pub non_2xx_3xx: u64,
    /// Where the measured time's requests stand at its end: sent, carried
    /// in from the warm-up, lost, unanswered (`requests` are the answered);
    /// `None` for runs merged from their logs.
    pub accounting: Option<crate::Accounting>,
    pub schedule: Option<ScheduleReport>,
    /// True if the run was interrupted (Ctrl-C) before its end.
    pub interrupted: bool,
    /// Each second of the run, when it was logged (`--log`) or merged.
    pub intervals: Vec<IntervalSummary>,
    /// `sluice load merge`: the number of logs added up (0 for a run).
    pub merged_logs: usize,
    /// Each request's and each new connection's phases, in µs.
    pub phases: PhaseReport,
    /// Each check's passes and failures, in the scenario's order.
    pub checks: Vec<CheckReport>,
    /// With stages: what each stage asked and what it got.
    pub stages: Vec<StageReport>,
    /// The thresholds on this scenario, evaluated at its end.
    pub thresholds: Vec<ThresholdReport>,
}

/// The phases (k6's `http_req_connecting`, `http_req_tls_handshaking`,
/// `http_req_waiting`, `http_req_receiving`), each as a latency summary.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PhaseReport {
    /// Resolving the target's name: once per run, before it starts.
    pub dns: LatencySummary,
    /// Each new TCP connection's connect (none over HTTP/3).
    pub connect: LatencySummary,
    /// Each new connection's TLS handshake (HTTP/3: the QUIC handshake).
    pub tls: LatencySummary,
    /// Each request, from its send to the first byte of its answer (TTFB).
    pub waiting: LatencySummary,
    /// Each request, from the first byte of its answer to the last.
    pub receiving: LatencySummary,
}

/// One check's counts.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub name: String,
    pub passed: u64,
    pub failed: u64,
}

impl CheckReport {
    /// Share of answers that passed, in % (100 with none checked).
    pub fn passed_pct(&self) -> f64 {
        let all = self.passed + self.failed;
        if all == 0 {
            100.0
        } else {
            self.passed as f64 * 100.0 / all as f64
        }
    }
}

/// One stage: its target and what happened in it.
#[derive(Debug, Clone, Serialize)]
pub struct StageReport {
    /// 1-based.
    pub stage: usize,
    /// From the start of measuring, in seconds.
    pub start_s: f64,
    pub duration_s: f64,
    /// The target at the stage's start and end: a rate (open model) or users.
    pub from: f64,
    pub to: f64,
    /// Open model: requests the timetable made due in the stage.
    pub due: Option<f64>,
    /// Open model: requests due in the stage that were sent (whenever).
    pub sent: Option<u64>,
    /// Responses completed in the stage.
    pub requests: u64,
    /// `requests` over the stage's duration.
    pub achieved_rate: f64,
}

/// A threshold's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct ThresholdReport {
    /// As written (`p99 < 5ms`).
    pub threshold: String,
    /// The scenario it is on; `None`: all scenarios together.
    pub scenario: Option<String>,
    pub passed: bool,
    /// The figure's value, as the threshold reads it (`1.23ms`, `0.05%`).
    pub observed: String,
    /// It stops the run as soon as it fails (after its grace period).
    pub abort_on_fail: bool,
}

/// One interval (a second) of the run, all threads (and shards) together.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct IntervalSummary {
    /// From the start of measuring, in seconds.
    pub start_s: f64,
    pub duration_s: f64,
    pub requests: u64,
    pub errors: u64,
    pub bytes_read: u64,
    /// Responses with a status outside 200-399.
    pub non_2xx_3xx: u64,
    /// Check verdicts in the interval, all checks together.
    pub checks_passed: u64,
    pub checks_failed: u64,
    /// Latency percentiles in µs (corrected in the open model).
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p99_9_us: u64,
    pub max_us: u64,
}

/// The run's settings as they were applied; a log carries them for `merge`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReportConfig {
    pub target: String,
    pub urls: Vec<String>,
    pub threads: usize,
    pub connections: usize,
    pub duration_s: Option<f64>,
    pub total_requests: Option<u64>,
    pub protocol: Protocol,
    pub pipeline: usize,
    pub streams: usize,
    pub rate: Option<f64>,
    pub timeout_ms: u64,
    pub warmup_s: f64,
    /// Users model: each user's think time between a response and its
    /// next request, `[min, max]` in ms.
    pub think_ms: Option<[u64; 2]>,
    /// Users model: the time over which the users start, in seconds (0: all at once).
    pub ramp_s: f64,
    /// The part of a test spread over many processes this run was
    /// (`--shard`); its connections, requests and rate are its part.
    #[serde(default)]
    pub shard: Option<Shard>,
    /// Ramping stages (the whole test's targets): with `rate`, rates
    /// (and `rate` is this process's part of their peak); else users.
    #[serde(default)]
    pub stages: Option<Stages>,
    /// The names of the checks, in order.
    #[serde(default)]
    pub checks: Vec<String>,
    /// The requests' weights, in the order of `urls` (all 1: round-robin).
    #[serde(default)]
    pub weights: Vec<u32>,
}

/// Responses per connection over the measured time: the fewest, the
/// median and the most one connection got. A server that keeps serving
/// the connections it served last shows a wide spread at the same rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spread {
    pub connections: u64,
    pub min: u64,
    pub median: u64,
    pub max: u64,
}

impl Spread {
    /// The spread of `counts` (one per connection); `None` for none.
    pub(crate) fn of(mut counts: Vec<u64>) -> Option<Self> {
        counts.sort_unstable();
        Some(Spread {
            connections: counts.len() as u64,
            min: *counts.first()?,
            median: counts[counts.len() / 2],
            max: *counts.last()?,
        })
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_us: u64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub max_us: u64,
    /// Share of samples within one standard deviation of the mean, in %.
    pub within_stdev_pct: f64,
    pub percentiles: Vec<Percentile>,
    /// The full percentile spectrum (HdrHistogram's iteration by quantile).
    pub spectrum: Vec<SpectrumPoint>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Percentile {
    pub percentile: f64,
    pub value_us: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct SpectrumPoint {
    pub percentile: f64,
    pub value_us: u64,
    pub count: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RateSummary {
    pub mean: f64,
    pub stdev: f64,
    pub max: f64,
    pub within_stdev_pct: f64,
}

/// How the open model kept to its timetable.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ScheduleReport {
    pub target_rate: f64,
    pub achieved_rate: f64,
    /// How far the most-behind connection was from its timetable at the end, in ms.
    pub max_lag_ms: f64,
    /// Requests that were due but never sent.
    pub unsent: u64,
    /// The generator's own lateness: from when each request could be sent
    /// (due, with a free slot on its connection) to when it was.
    pub lateness: Lateness,
    /// The lateness p99 is large against the target's own latency (see
    /// [`GENERATOR_BOUND_SHARE`]): the figures measure the load generator
    /// as much as the target.
    pub generator_bound: bool,
}

/// The generator's send lateness, in µs.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Lateness {
    /// Requests sent (after the warm-up).
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// A run warns when its send lateness p99 exceeds this share of the
/// uncorrected latency p99 (the target's own answers). Measured on a quiet
/// machine against `sluice serve petstore` the share was 10 to 30% (HTTP/2
/// at 5,000/s: 49%); with Tokio's millisecond timer, 300 to 1,000%.
pub const GENERATOR_BOUND_SHARE: f64 = 0.5;

impl ScheduleReport {
    pub(crate) fn new(
        target_rate: f64,
        achieved_rate: f64,
        max_lag: std::time::Duration,
        unsent: u64,
        lateness: Option<Lateness>,
    ) -> Self {
        Self {
            target_rate,
            achieved_rate,
            max_lag_ms: max_lag.as_secs_f64() * 1000.0,
            unsent,
            lateness: lateness.unwrap_or_default(),
            generator_bound: false,
        }
    }

    /// Sets `generator_bound` against the target's own (uncorrected) latency.
    pub(crate) fn judged(self, uncorrected: Option<&LatencySummary>) -> Self {
        Self {
            generator_bound: uncorrected.is_some_and(|u| self.lateness.bounds(u)),
            ..self
        }
    }
}

impl Lateness {
    /// From a histogram in nanoseconds.
    pub(crate) fn from_histogram(histogram: &Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1000.0;
        Self {
            count: histogram.len(),
            p50_us: us(histogram.value_at_quantile(0.5)),
            p99_us: us(histogram.value_at_quantile(0.99)),
            max_us: us(histogram.max()),
        }
    }

    /// Whether this lateness is large against `uncorrected` latency.
    pub fn bounds(&self, uncorrected: &LatencySummary) -> bool {
        self.count > 0
            && uncorrected.count > 0
            && self.p99_us > GENERATOR_BOUND_SHARE * uncorrected.at(99.0) as f64
    }
}

impl LatencySummary {
    pub fn from_histogram(histogram: &Histogram<u64>) -> Self {
        let count = histogram.len();
        let mean = histogram.mean();
        let stdev = histogram.stdev();
        let within: u64 = histogram
            .iter_recorded()
            .filter(|v| (v.value_iterated_to() as f64 - mean).abs() <= stdev)
            .map(|v| v.count_at_value())
            .sum();
        Self {
            count,
            min_us: if count == 0 { 0 } else { histogram.min() },
            mean_us: mean,
            stdev_us: stdev,
            max_us: histogram.max(),
            within_stdev_pct: percent(within, count),
            percentiles: PERCENTILES
                .iter()
                .map(|&p| Percentile {
                    percentile: p,
                    value_us: histogram.value_at_percentile(p),
                })
                .collect(),
            spectrum: histogram
                .iter_quantiles(1)
                .map(|v| SpectrumPoint {
                    percentile: v.percentile(),
                    value_us: v.value_iterated_to(),
                    count: v.count_since_last_iteration(),
                })
                .collect(),
        }
    }

    pub fn at(&self, percentile: f64) -> u64 {
        self.percentiles
            .iter()
            .find(|p| p.percentile == percentile)
            .map_or(0, |p| p.value_us)
    }
}

impl RateSummary {
    pub fn from_samples(samples: &[u64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<u64>() as f64 / n;
        let variance = samples
            .iter()
            .map(|&s| (s as f64 - mean).powi(2))
            .sum::<f64>()
            / (n - 1.0).max(1.0);
        let stdev = variance.sqrt();
        let within = samples
            .iter()
            .filter(|&&s| (s as f64 - mean).abs() <= stdev)
            .count();
        Self {
            mean,
            stdev,
            max: samples.iter().copied().max().unwrap_or(0) as f64,
            within_stdev_pct: percent(within as u64, samples.len() as u64),
        }
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_summary() {
        let r = RateSummary::from_samples(&[10, 10, 10, 40]);
        assert_eq!(r.mean, 17.5);
        assert_eq!(r.max, 40.0);
        assert_eq!(r.within_stdev_pct, 75.0);
        assert_eq!(RateSummary::from_samples(&[]).mean, 0.0);
    }
}
