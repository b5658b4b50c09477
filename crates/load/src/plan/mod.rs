//! Test plans: several named scenarios, run together or one after
//! another, each with its model, requests, stages, protocol, checks and
//! thresholds (docs/LOAD.md, "Scenario files"). `sluice load`'s flags
//! make a plan of one scenario, `default`.

mod build;
mod file;
mod requests;
mod run;
mod text;

use std::time::Duration;

use serde::Serialize;

pub use build::{load, parse, PlanError, MAX_SCENARIOS, MAX_THRESHOLDS};
pub use run::{run_plan, PlanControl};

use crate::{threshold::Threshold, LoadConfig, Report, ThresholdReport};

/// What to run.
#[derive(Debug, Clone)]
pub struct TestPlan {
    pub scenarios: Vec<Scenario>,
    /// One after another, in order (else all together).
    pub sequential: bool,
    /// On all scenarios together.
    pub thresholds: Vec<PlanThreshold>,
}

/// One named scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub config: LoadConfig,
    /// Run together with the others: start this long after them.
    pub start_time: Duration,
    pub thresholds: Vec<PlanThreshold>,
}

/// A threshold and what it does when it fails.
#[derive(Debug, Clone)]
pub struct PlanThreshold {
    pub threshold: Threshold,
    /// Stop every scenario as soon as it fails, once `grace` of measuring has passed.
    pub abort_on_fail: bool,
    pub grace: Duration,
}

impl PlanThreshold {
    /// Checked at the end only.
    pub fn at_end(threshold: Threshold) -> Self {
        Self {
            threshold,
            abort_on_fail: false,
            grace: Duration::ZERO,
        }
    }
}

impl TestPlan {
    /// The plan of `sluice load`'s flags: one scenario, `default`.
    pub fn single(config: LoadConfig, thresholds: Vec<PlanThreshold>) -> Self {
        Self {
            scenarios: vec![Scenario {
                name: "default".into(),
                config,
                start_time: Duration::ZERO,
                thresholds,
            }],
            sequential: false,
            thresholds: Vec::new(),
        }
    }

    /// Whether a threshold stops the run early when it fails.
    pub fn aborts(&self) -> bool {
        self.scenarios
            .iter()
            .flat_map(|s| &s.thresholds)
            .chain(&self.thresholds)
            .any(|t| t.abort_on_fail)
    }
}

/// What a plan's run measured and judged.
#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    pub tool: String,
    /// Each scenario's report (its thresholds in it).
    pub scenarios: Vec<Report>,
    /// All scenarios together, when there are several.
    pub overall: Option<Report>,
    /// The thresholds on all scenarios together.
    pub thresholds: Vec<ThresholdReport>,
    /// Every threshold passed and none stopped the run.
    pub passed: bool,
    /// Why a threshold stopped the run early.
    pub aborted: Option<String>,
    /// From the first scenario's start to the last one's end, in seconds.
    pub elapsed_s: f64,
    /// How the live outputs went.
    pub live: LiveOutcome,
}

/// How the live outputs went (problems are reported, not fatal).
#[derive(Debug, Clone, Default, Serialize)]
pub struct LiveOutcome {
    /// OTLP pushes that the collector took, and those that failed.
    pub otlp_pushed: u64,
    pub otlp_failed: u64,
    pub otlp_error: Option<String>,
    /// The JSON-lines stream could not be written.
    pub json_lines_error: Option<String>,
    /// Where `/metrics` was served.
    pub metrics_listen: Option<String>,
}

impl PlanReport {
    /// Every threshold's verdict, the scenarios' and the overall ones.
    pub fn all_thresholds(&self) -> impl Iterator<Item = &ThresholdReport> {
        self.scenarios
            .iter()
            .flat_map(|r| &r.thresholds)
            .chain(&self.thresholds)
    }

    /// The JSON report: a plan of one scenario writes its report as a run
    /// always did (every threshold in its `thresholds`, `aborted`, `passed`
    /// and `live` beside them); a plan of several writes the whole plan.
    pub fn to_json(&self) -> serde_json::Value {
        match self.scenarios.as_slice() {
            [only] => {
                let mut only = only.clone();
                only.thresholds.extend(self.thresholds.iter().cloned());
                let mut value = serde_json::to_value(&only).unwrap_or_default();
                value["passed"] = self.passed.into();
                value["aborted"] = serde_json::to_value(&self.aborted).unwrap_or_default();
                value["live"] = serde_json::to_value(&self.live).unwrap_or_default();
                value
            }
            _ => serde_json::to_value(self).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests;
