//! The results of a run: a serialisable report (`--json`) and the wrk-style
//! text a wrk user recognises, with what wrk leaves out.

use std::{collections::BTreeMap, fmt::Write as _};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::{
    format::{format_bytes, format_count, format_percentile, format_us},
    shard::Shard,
    stats::Errors,
    Protocol,
};

/// Percentiles shown in the text and listed in the JSON summary.
pub const PERCENTILES: [f64; 8] = [50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 99.999];

/// The whole report; `--json` writes it as is.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub tool: String,
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
}

#[derive(Debug, Clone, Serialize)]
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

impl Report {
    /// The wrk-style text block.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let c = &self.config;
        let length = match (c.total_requests, c.duration_s) {
            (Some(n), _) => format!("{n} requests"),
            (None, Some(d)) => format!("{d}s"),
            (None, None) => String::new(),
        };
        let _ = writeln!(out, "Running {length} test @ {}", c.urls.join(", "));
        if let Some(shard) = c.shard {
            let _ = writeln!(out, "  Shard {shard}: this process's part of the test");
        }
        if self.merged_logs > 0 {
            let _ = writeln!(
                out,
                "  Merged from {} logs: histograms added, so percentiles are exact",
                self.merged_logs
            );
        }
        let mut shape = format!("  {} threads and {} connections", c.threads, c.connections);
        if c.pipeline > 1 {
            let _ = write!(shape, ", pipeline {}", c.pipeline);
        }
        if c.protocol != Protocol::Http1 {
            let _ = write!(shape, ", {} with {} streams each", c.protocol, c.streams);
        }
        if let Some(rate) = c.rate {
            let _ = write!(shape, ", open model at {rate} req/s");
        }
        if let Some([min, max]) = c.think_ms {
            let _ = write!(shape, ", users thinking {min}-{max}ms");
        }
        if c.ramp_s > 0.0 {
            let _ = write!(shape, ", ramp {}s", c.ramp_s);
        }
        if c.warmup_s > 0.0 {
            let _ = write!(shape, " (after {}s warm-up)", c.warmup_s);
        }
        let _ = writeln!(out, "{shape}");
        let _ = writeln!(out, "  Thread Stats   Avg      Stdev     Max   +/- Stdev");
        let l = &self.latency;
        let _ = writeln!(
            out,
            "    Latency {:>10}{:>10}{:>9}{:>9.2}%",
            format_us(l.mean_us),
            format_us(l.stdev_us),
            format_us(l.max_us as f64),
            l.within_stdev_pct
        );
        let r = &self.thread_rate;
        let _ = writeln!(
            out,
            "    Req/Sec {:>10}{:>10}{:>9}{:>9.2}%",
            format_count(r.mean),
            format_count(r.stdev),
            format_count(r.max),
            r.within_stdev_pct
        );
        let title = if self.uncorrected_latency.is_some() {
            "  Latency Distribution (corrected: from each request's intended send time)"
        } else {
            "  Latency Distribution"
        };
        write_distribution(&mut out, title, l);
        if let Some(uncorrected) = &self.uncorrected_latency {
            write_distribution(
                &mut out,
                "  Uncorrected Latency (from the actual send)",
                uncorrected,
            );
        }
        let _ = writeln!(
            out,
            "  {} requests in {:.2}s, {} read",
            self.requests,
            self.elapsed_s,
            format_bytes(self.bytes_read as f64)
        );
        if let Some(a) = self.accounting.filter(|a| a.unanswered > 0) {
            // The answered are a share of what was asked: say what is missing.
            let _ = writeln!(
                out,
                "  Unanswered at the end: {} of {} requests ({} sent, {} in flight at the \
                 start; {} answered, {} lost)",
                a.unanswered,
                a.carried_in + a.sent,
                a.sent,
                a.carried_in,
                self.requests,
                a.lost
            );
        }
        if self.non_2xx_3xx > 0 {
            let _ = writeln!(out, "  Non-2xx or 3xx responses: {}", self.non_2xx_3xx);
        }
        let e = &self.errors;
        if e.total() > 0 {
            let _ = writeln!(
                out,
                "  Errors: connect {}, read {}, write {}, timeout {}, parse {}",
                e.connect, e.read, e.write, e.timeout, e.parse
            );
        }
        if !self.status.is_empty() {
            let codes: Vec<String> = self
                .status
                .iter()
                .map(|(code, n)| format!("{code}: {n}"))
                .collect();
            let _ = writeln!(out, "  Status codes: {}", codes.join(", "));
        }
        if !self.per_second.is_empty() {
            let series: Vec<String> = self
                .per_second
                .iter()
                .map(|&n| format_count(n as f64))
                .collect();
            let _ = writeln!(out, "  Requests by second: {}", series.join(" "));
        }
        if let Some(s) = &self.schedule {
            let _ = writeln!(
                out,
                "  Schedule: {:.0} req/s asked, {:.2} achieved; at the end {:.1} ms behind, {} due requests never sent",
                s.target_rate, s.achieved_rate, s.max_lag_ms, s.unsent
            );
            let l = &s.lateness;
            let _ = writeln!(
                out,
                "  Send lateness (from when due to the send): p50 {}, p99 {}, max {}",
                format_us(l.p50_us),
                format_us(l.p99_us),
                format_us(l.max_us)
            );
            if s.generator_bound {
                let target = self.uncorrected_latency.as_ref().map_or(0, |u| u.at(99.0));
                let _ = writeln!(
                    out,
                    "  Warning: the load generator's send lateness (p99 {}) is over {:.0}% of the target's own p99 ({}): these figures measure the generator as much as the target",
                    format_us(l.p99_us),
                    GENERATOR_BOUND_SHARE * 100.0,
                    format_us(target as f64)
                );
            }
        }
        write_intervals(&mut out, &self.intervals);
        if self.interrupted {
            let _ = writeln!(out, "  Interrupted: these are the results so far.");
        }
        let _ = writeln!(out, "Requests/sec: {:>10.2}", self.requests_per_sec);
        let _ = writeln!(
            out,
            "Transfer/sec: {:>10}",
            format_bytes(self.bytes_per_sec)
        );
        out
    }
}

fn write_distribution(out: &mut String, title: &str, latency: &LatencySummary) {
    let _ = writeln!(out, "{title}");
    for p in [50.0, 75.0, 90.0, 99.0, 99.9, 99.99] {
        let _ = writeln!(
            out,
            "{}{:>10}",
            format_percentile(p),
            format_us(latency.at(p) as f64)
        );
    }
}

fn write_intervals(out: &mut String, intervals: &[IntervalSummary]) {
    if intervals.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  Intervals:  start  requests  errors       p50       p90       p99     p99.9       max"
    );
    for i in intervals {
        let _ = writeln!(
            out,
            "         {:>6.1}s {:>9} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}",
            i.start_s,
            i.requests,
            i.errors,
            format_us(i.p50_us as f64),
            format_us(i.p90_us as f64),
            format_us(i.p99_us as f64),
            format_us(i.p99_9_us as f64),
            format_us(i.max_us as f64)
        );
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
