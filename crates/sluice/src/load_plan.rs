//! `sluice load` as a CI step: scenario files (`--scenario`), stages,
//! thresholds that fail the run (exit 99), live outputs (`--metrics-listen`,
//! `--otlp`, `--json-lines`) and the HTML report (`--html`).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use clap::Args;
use load::{
    live::{otlp::OtlpTarget, LiveOptions},
    plan::{PlanReport, PlanThreshold, TestPlan},
    ConfigError, LoadConfig, Stage, Stages, Threshold,
};

use crate::cli::parse_duration;

/// The exit status of a run whose thresholds failed (k6's).
pub(crate) const THRESHOLDS_FAILED: u8 = 99;

/// The run flags a scenario file stands for.
const RUN_FLAGS: [&str; 24] = [
    "urls",
    "connections",
    "users",
    "think",
    "ramp",
    "threads",
    "duration",
    "requests",
    "pipeline",
    "h2",
    "h3",
    "streams",
    "rate",
    "headers",
    "method",
    "body",
    "body_file",
    "requests_file",
    "timeout",
    "warmup",
    "insecure",
    "cacert",
    "stages",
    "rate_stages",
];

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// Run the scenarios of this YAML file (docs/LOAD.md, "Scenario
    /// files") instead of the one the flags describe.
    #[arg(short = 'f', long = "scenario", value_name = "FILE", conflicts_with_all = RUN_FLAGS)]
    scenario: Option<PathBuf>,
    /// Exit 99 unless this holds at the end of the run: `p99 < 5ms`,
    /// `errors < 0.1%`, `rate >= 0.98 * target`, `checks > 99.9%`
    /// (repeatable; with --scenario, on all scenarios together).
    #[arg(long = "threshold", value_name = "EXPR", value_parser = Threshold::parse)]
    thresholds: Vec<Threshold>,
    /// Ramp the users (connections) linearly to USERS over DUR (repeatable,
    /// k6's --stage; a first 0s stage sets where they start). Sets -c and -d.
    #[arg(long = "stage", value_name = "DUR:USERS", value_parser = parse_stage,
        conflicts_with_all = ["rate_stages", "connections", "users", "duration", "rate", "ramp"])]
    stages: Vec<Stage>,
    /// Open model: ramp the rate linearly to RATE over DUR (repeatable, k6's
    /// ramping-arrival-rate; a first 0s stage sets where it starts). Sets --rate and -d.
    #[arg(long = "rate-stage", value_name = "DUR:RATE", value_parser = parse_stage,
        conflicts_with_all = ["duration", "rate"])]
    rate_stages: Vec<Stage>,
    /// Serve the figures so far at http://ADDR/metrics (Prometheus text) while the run goes.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Push the figures as OTLP metrics (OTLP/HTTP, JSON) to this URL
    /// while the run goes (http://collector:4318, /v1/metrics is added).
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
    /// How often to push to --otlp.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DUR")]
    otlp_interval: Duration,
    /// --otlp over https: trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    otlp_cacert: Option<PathBuf>,
    /// Write one JSON line per scenario per second while the run goes (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    json_lines: Option<PathBuf>,
    /// Write an HTML report (charts inline, no external assets).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// `30s:1000`.
fn parse_stage(text: &str) -> Result<Stage, String> {
    let invalid =
        |why: String| format!("invalid stage `{text}`: {why} (expected DUR:TARGET like 30s:100)");
    let (duration, target) = text
        .split_once(':')
        .ok_or_else(|| invalid("no `:`".into()))?;
    let duration = parse_duration(duration.trim()).map_err(invalid)?;
    let target: f64 = target
        .trim()
        .parse()
        .map_err(|_| invalid(format!("`{target}` is not a number")))?;
    Ok(Stage { duration, target })
}

/// Stages from flags: a first 0s stage is where they start.
fn stages_of(flags: &[Stage]) -> Option<Stages> {
    let (from, steps) = match flags {
        [] => return None,
        [first, rest @ ..] if first.duration.is_zero() => (first.target, rest.to_vec()),
        all => (0.0, all.to_vec()),
    };
    Some(Stages { from, steps })
}

impl PlanArgs {
    /// Applies `--stage` or `--rate-stage` to the flags' configuration.
    pub(crate) fn apply_stages(&self, config: &mut LoadConfig) {
        if let Some(stages) = stages_of(&self.stages) {
            config.connections = stages.peak().ceil() as usize;
            config.duration = stages.duration();
            config.stages = Some(stages);
        } else if let Some(stages) = stages_of(&self.rate_stages) {
            config.rate = Some(stages.peak());
            config.duration = stages.duration();
            config.stages = Some(stages);
        }
    }

    /// The plan: the scenario file's, or one scenario of `flags`; the
    /// `--threshold`s on it.
    pub(crate) fn plan(
        &self,
        flags: impl FnOnce() -> Result<LoadConfig, ConfigError>,
        apply: impl Fn(&mut LoadConfig) -> Result<(), ConfigError>,
    ) -> Result<TestPlan, ConfigError> {
        let thresholds = self.thresholds.iter().cloned().map(PlanThreshold::at_end);
        let mut plan = match &self.scenario {
            None => TestPlan::single(flags()?, thresholds.collect()),
            Some(path) => {
                let mut plan = load::plan::load(path)?;
                plan.thresholds.extend(thresholds);
                plan
            }
        };
        for scenario in &mut plan.scenarios {
            apply(&mut scenario.config)?;
        }
        if plan.scenarios.len() > 1 && plan.scenarios.iter().any(|s| s.config.log.is_some()) {
            return Err(ConfigError(
                "--log writes one scenario's log: this file has several".into(),
            ));
        }
        for scenario in &plan.scenarios {
            scenario
                .config
                .validate()
                .map_err(|err| match plan.scenarios.len() {
                    1 => err,
                    _ => ConfigError(format!("scenario {}: {}", scenario.name, err.0)),
                })?;
        }
        Ok(plan)
    }

    /// Where the live figures go.
    pub(crate) fn live(&self) -> Result<LiveOptions, ConfigError> {
        let otlp = match &self.otlp {
            Some(url) => Some(
                OtlpTarget::new(url, self.otlp_cacert.clone(), self.otlp_interval)
                    .map_err(ConfigError)?,
            ),
            None => None,
        };
        Ok(LiveOptions {
            metrics_listen: self.metrics_listen,
            otlp,
            json_lines: self.json_lines.clone(),
        })
    }

    /// Whether the reports keep each second (the HTML report draws them).
    pub(crate) fn wants_intervals(&self) -> bool {
        self.html.is_some()
    }

    /// Prints the text, writes the JSON and the HTML; 99 when a threshold
    /// failed, 1 when a file cannot be written.
    pub(crate) fn finish(
        &self,
        report: &PlanReport,
        to_stderr: bool,
        json: Option<&Path>,
    ) -> ExitCode {
        if to_stderr {
            eprint!("{}", report.to_text());
        } else {
            print!("{}", report.to_text());
        }
        let mut written = Ok(());
        if let Some(path) = json {
            written = serde_json::to_vec_pretty(&report.to_json())
                .map_err(std::io::Error::other)
                .and_then(|json| std::fs::write(path, json))
                .map_err(|err| format!("cannot write {}: {err}", path.display()));
        }
        if let (Ok(()), Some(path)) = (&written, &self.html) {
            written = std::fs::write(path, bench::report::load_page(report))
                .map_err(|err| format!("cannot write {}: {err}", path.display()));
        }
        if let Err(err) = written {
            eprintln!("sluice load: error: {err}");
            return ExitCode::FAILURE;
        }
        if report.passed {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(THRESHOLDS_FAILED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_parse_and_a_first_0s_one_is_the_start() {
        let stage = parse_stage("30s:100").unwrap();
        assert_eq!(
            (stage.duration, stage.target),
            (Duration::from_secs(30), 100.0)
        );
        for bad in ["30s", "soon:1", "30s:many"] {
            let err = parse_stage(bad).unwrap_err();
            assert!(err.starts_with("invalid stage"), "{bad}: {err}");
        }
        let flags = [
            parse_stage("0s:50").unwrap(),
            parse_stage("10s:200").unwrap(),
        ];
        let stages = stages_of(&flags).unwrap();
        assert_eq!(stages.from, 50.0);
        assert_eq!(stages.steps.len(), 1);
        assert_eq!(stages_of(&flags[1..]).unwrap().from, 0.0);
    }
}
