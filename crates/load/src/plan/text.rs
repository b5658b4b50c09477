//! A plan's text report: each scenario's block, all of them together, the
//! thresholds' verdicts and what the live outputs ran into.

use std::fmt::Write as _;

use super::PlanReport;
use crate::format::{format_count, format_us};

impl PlanReport {
    /// The text report: one scenario's block as a run always printed it,
    /// then the thresholds.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let several = self.scenarios.len() > 1;
        for report in &self.scenarios {
            if several {
                let name = report.scenario.as_deref().unwrap_or_default();
                let _ = writeln!(out, "Scenario {name}");
            }
            out.push_str(&report.to_text());
        }
        if let Some(all) = &self.overall {
            let checks: (u64, u64) = all
                .checks
                .iter()
                .fold((0, 0), |(p, f), c| (p + c.passed, f + c.failed));
            let _ = writeln!(
                out,
                "All {} scenarios: {} requests in {:.2}s, {} req/s; latency p50 {}, p99 {}, max {}; errors {}, non-2xx/3xx {}; checks {} passed, {} failed",
                self.scenarios.len(),
                all.requests,
                self.elapsed_s,
                format_count(all.requests as f64 / self.elapsed_s.max(1e-9)),
                format_us(all.latency.at(50.0) as f64),
                format_us(all.latency.at(99.0) as f64),
                format_us(all.latency.max_us as f64),
                all.errors.total(),
                all.non_2xx_3xx,
                checks.0,
                checks.1
            );
        }
        let thresholds: Vec<_> = self.all_thresholds().collect();
        if !thresholds.is_empty() {
            let failed = thresholds.iter().filter(|t| !t.passed).count();
            let _ = writeln!(
                out,
                "Thresholds: {} passed, {failed} failed",
                thresholds.len() - failed
            );
            for t in &thresholds {
                let on = t
                    .scenario
                    .as_deref()
                    .map_or_else(|| "all scenarios".to_string(), |s| format!("scenario {s}"));
                let verdict = if t.passed { "ok    " } else { "FAILED" };
                let _ = writeln!(out, "  {verdict} {}  ({on}: {})", t.threshold, t.observed);
            }
        }
        if let Some(why) = &self.aborted {
            let _ = writeln!(out, "Aborted: {why}");
        }
        let live = &self.live;
        if live.otlp_failed > 0 {
            let _ = writeln!(
                out,
                "OTLP: {} pushes failed ({} taken); the last: {}",
                live.otlp_failed,
                live.otlp_pushed,
                live.otlp_error.as_deref().unwrap_or("?")
            );
        }
        if let Some(err) = &live.json_lines_error {
            let _ = writeln!(out, "JSON lines: cannot write: {err}");
        }
        out
    }
}
