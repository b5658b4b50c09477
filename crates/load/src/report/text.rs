//! The wrk-style text block a wrk user recognises, with what wrk leaves
//! out: the percentile spectrum, errors by kind, statuses, the schedule
//! and, where a run has them, phases, stages, checks and thresholds.

use std::fmt::Write as _;

use super::*;
use crate::format::{format_bytes, format_count, format_percentile, format_us};

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
        if let Some(s) = self.per_connection.filter(|s| s.connections > 1) {
            let _ = writeln!(
                out,
                "  Responses per connection: min {}, median {}, max {} ({} connections)",
                format_count(s.min as f64),
                format_count(s.median as f64),
                format_count(s.max as f64),
                format_count(s.connections as f64)
            );
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
        write_phases(&mut out, &self.phases);
        write_stages(&mut out, &self.stages, self.config.rate.is_some());
        write_checks(&mut out, &self.checks);
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

/// The phases, when a request or connection was timed.
fn write_phases(out: &mut String, phases: &PhaseReport) {
    if phases.waiting.count == 0 && phases.connect.count == 0 && phases.tls.count == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "  Phases         count       p50       p90       p99       max"
    );
    for (name, phase) in [
        ("dns", &phases.dns),
        ("connect", &phases.connect),
        ("tls", &phases.tls),
        ("waiting", &phases.waiting),
        ("receiving", &phases.receiving),
    ] {
        if phase.count == 0 {
            continue;
        }
        let _ = writeln!(
            out,
            "    {name:<10}{:>9}{:>10}{:>10}{:>10}{:>10}",
            phase.count,
            format_us(phase.at(50.0) as f64),
            format_us(phase.at(90.0) as f64),
            format_us(phase.at(99.0) as f64),
            format_us(phase.max_us as f64)
        );
    }
}

/// Each stage's target and what it got.
fn write_stages(out: &mut String, stages: &[StageReport], open: bool) {
    if stages.is_empty() {
        return;
    }
    let unit = if open { "req/s" } else { "users" };
    let _ = writeln!(
        out,
        "  Stages ({unit})      from        to       due      sent  requests  achieved/s"
    );
    for s in stages {
        let optional = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.0}"));
        let _ = writeln!(
            out,
            "    {:>2} {:>6.1}s {:>10} {:>9} {:>9} {:>9} {:>9} {:>11}",
            s.stage,
            s.duration_s,
            format!("{:.0}", s.from),
            format!("{:.0}", s.to),
            optional(s.due),
            optional(s.sent.map(|n| n as f64)),
            s.requests,
            format_count(s.achieved_rate)
        );
    }
}

/// Each check's passes and failures.
fn write_checks(out: &mut String, checks: &[CheckReport]) {
    if checks.is_empty() {
        return;
    }
    let failing = checks.iter().filter(|c| c.failed > 0).count();
    let _ = writeln!(
        out,
        "  Checks: {} of {} always passed",
        checks.len() - failing,
        checks.len()
    );
    for c in checks {
        let _ = writeln!(
            out,
            "    {:>7.3}%  {}  ({} passed, {} failed)",
            c.passed_pct(),
            c.name,
            c.passed,
            c.failed
        );
    }
}
