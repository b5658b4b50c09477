//! The figures while a run goes: each scenario's complete intervals add up
//! here (histograms add), and from here go a JSON-lines stream (one line
//! per interval per scenario), a Prometheus endpoint (`--metrics-listen`,
//! [`prometheus`]), an OTLP metrics push ([`otlp`]), and the thresholds'
//! verdicts so far, which stop the run when one that aborts fails after
//! its grace period. The figures are the report's: the same histograms
//! and counters, so far. The HDR interval log (`--log`) stays the exact
//! record.

pub mod otlp;
pub mod prometheus;

use std::{
    io::{self, Write},
    net::SocketAddr,
    path::PathBuf,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, MutexGuard,
    },
    time::{Duration, SystemTime},
};

use serde_json::json;

use crate::{
    figures::Figures,
    report::IntervalSummary,
    stages::Curve,
    threshold::{Observed, Threshold},
    LoadConfig,
};

/// Where the live figures go.
#[derive(Debug, Clone, Default)]
pub struct LiveOptions {
    /// Serve `/metrics` (Prometheus text format) here while the run goes.
    pub metrics_listen: Option<SocketAddr>,
    /// Push OTLP metrics (OTLP/HTTP with JSON) to this URL every interval.
    pub otlp: Option<otlp::OtlpTarget>,
    /// Write one JSON line per scenario per interval here (`-`: stdout).
    pub json_lines: Option<PathBuf>,
}

/// A threshold as the live figures evaluate it.
#[derive(Debug, Clone)]
pub struct LiveThreshold {
    pub threshold: Threshold,
    /// The scenario (its index) it is on; `None`: all together.
    pub scenario: Option<usize>,
    /// Stop the whole run when it fails, once `grace` of measuring has passed.
    pub abort_on_fail: bool,
    pub grace: Duration,
}

/// The live figures of a plan's scenarios; cloned into each scenario's run.
#[derive(Debug, Clone)]
pub struct Live {
    state: Arc<Mutex<State>>,
}

pub(crate) struct State {
    pub(crate) started: SystemTime,
    pub(crate) scenarios: Vec<ScenarioLive>,
    pub(crate) thresholds: Vec<(LiveThreshold, Option<(bool, String)>)>,
    lines: Option<Box<dyn Write + Send>>,
    /// Set when an aborting threshold fails: every scenario stops.
    abort: Arc<AtomicBool>,
    pub(crate) aborted: Option<String>,
    /// The first failure to write the JSON lines (they stop then).
    pub(crate) lines_error: Option<String>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("scenarios", &self.scenarios.len())
            .finish_non_exhaustive()
    }
}

/// One scenario's figures so far.
#[derive(Debug)]
pub(crate) struct ScenarioLive {
    pub(crate) name: String,
    pub(crate) checks: Vec<String>,
    pub(crate) target: TargetCurve,
    /// Everything since measuring started; `None` before its first interval.
    pub(crate) cumulative: Option<Figures>,
    pub(crate) elapsed: Duration,
    pub(crate) last: Option<IntervalSummary>,
}

/// What a scenario asks for over time: a rate (open model) or users.
#[derive(Debug, Clone)]
pub(crate) struct TargetCurve {
    /// Open model: this process's rate (with stages: its part of their peak).
    rate: Option<f64>,
    curve: Option<Curve>,
    /// This process's part of the stages' targets.
    share: f64,
    connections: usize,
}

impl TargetCurve {
    pub(crate) fn new(config: &LoadConfig) -> Self {
        let rate = config.rate();
        let share = match (&config.stages, rate) {
            (Some(stages), Some(rate)) if stages.peak() > 0.0 => rate / stages.peak(),
            _ => config.connections() as f64 / config.connections.max(1) as f64,
        };
        Self {
            rate,
            curve: config.stages.as_ref().map(Curve::new),
            share,
            connections: config.connections(),
        }
    }

    /// Open model: requests due in the first `elapsed` of measuring.
    pub(crate) fn due(&self, elapsed: Duration) -> Option<f64> {
        let rate = self.rate?;
        let seconds = elapsed.as_secs_f64();
        Some(match &self.curve {
            Some(curve) => curve.integral(seconds) * self.share,
            None => rate * seconds,
        })
    }

    /// The rate (open model) or the users (else) asked for at `elapsed`.
    pub(crate) fn at(&self, elapsed: Duration) -> f64 {
        let seconds = elapsed.as_secs_f64();
        match (&self.curve, self.rate) {
            (Some(curve), _) => curve.value(seconds) * self.share,
            (None, Some(rate)) => rate,
            (None, None) => self.connections as f64,
        }
    }

    /// Whether the target is a rate (else users).
    pub(crate) fn is_rate(&self) -> bool {
        self.rate.is_some()
    }
}

impl Live {
    /// Live figures for `scenarios` (name and configuration each), their
    /// thresholds, and `abort`, the flag that stops every scenario.
    pub fn new(
        scenarios: &[(&str, &LoadConfig)],
        thresholds: Vec<LiveThreshold>,
        abort: Arc<AtomicBool>,
        json_lines: Option<&PathBuf>,
    ) -> io::Result<Self> {
        let lines: Option<Box<dyn Write + Send>> = match json_lines {
            None => None,
            Some(path) if path.as_os_str() == "-" => Some(Box::new(io::stdout())),
            Some(path) => Some(Box::new(io::BufWriter::new(std::fs::File::create(path)?))),
        };
        let scenarios = scenarios
            .iter()
            .map(|(name, config)| ScenarioLive {
                name: name.to_string(),
                checks: config.checks.iter().map(|c| c.name.clone()).collect(),
                target: TargetCurve::new(config),
                cumulative: None,
                elapsed: Duration::ZERO,
                last: None,
            })
            .collect();
        Ok(Self {
            state: Arc::new(Mutex::new(State {
                started: SystemTime::now(),
                scenarios,
                thresholds: thresholds.into_iter().map(|t| (t, None)).collect(),
                lines,
                abort,
                aborted: None,
                lines_error: None,
            })),
        })
    }

    /// What scenario `index`'s run hands its intervals to.
    pub fn feed(&self, index: usize) -> Feed {
        Feed {
            live: self.clone(),
            index,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding it leaves figures that are still whole.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Why the run was stopped early, if an aborting threshold failed.
    pub fn aborted(&self) -> Option<String> {
        self.lock().aborted.clone()
    }

    /// Writes a last line (`type: "summary"`) and flushes the stream;
    /// the error of a stream that could not be written, if any.
    pub fn finish(&self, summary: serde_json::Value) -> Option<String> {
        let mut state = self.lock();
        if let Some(lines) = &mut state.lines {
            let line = json!({"type": "summary", "summary": summary});
            let written = writeln!(lines, "{line}").and_then(|()| lines.flush());
            if let Err(err) = written {
                state.lines_error.get_or_insert(err.to_string());
            }
        }
        state.lines_error.clone()
    }
}

/// A scenario's way into the live figures.
#[derive(Debug, Clone)]
pub struct Feed {
    live: Live,
    index: usize,
}

impl Feed {
    /// Interval `index` of the scenario is complete: `duration` long, `figures`.
    pub(crate) fn interval(&self, index: u64, duration: Duration, figures: &Figures) {
        let mut state = self.live.lock();
        let state = &mut *state;
        let Some(scenario) = state.scenarios.get_mut(self.index) else {
            return;
        };
        match &mut scenario.cumulative {
            Some(all) => all.add(figures),
            None => scenario.cumulative = Some(figures.clone()),
        }
        let start = crate::log::INTERVAL * index as u32;
        scenario.elapsed = start + duration;
        let summary = IntervalSummary::new(start, duration, figures);
        scenario.last = Some(summary);
        let line = interval_line(scenario, &summary, figures);
        state.evaluate();
        if let Some(lines) = &mut state.lines {
            let written = writeln!(lines, "{line}").and_then(|()| lines.flush());
            if let Err(err) = written {
                state.lines_error.get_or_insert(err.to_string());
                state.lines = None;
            }
        }
    }
}

impl State {
    /// Every threshold on the figures so far; an aborting one that fails
    /// after its grace stops the run.
    fn evaluate(&mut self) {
        let overall = self.overall();
        for (rule, verdict) in &mut self.thresholds {
            let observed = match rule.scenario {
                Some(index) => self.scenarios.get(index).and_then(ScenarioLive::observed),
                None => overall
                    .as_ref()
                    .map(|(figures, names, elapsed, due)| Observed {
                        figures,
                        elapsed_s: elapsed.as_secs_f64(),
                        due: *due,
                        unsent: 0,
                        check_names: names,
                    }),
            };
            let Some(observed) = observed else { continue };
            let (passed, shown) = rule.threshold.evaluate(&observed);
            let measured = Duration::from_secs_f64(observed.elapsed_s);
            if !passed && rule.abort_on_fail && measured >= rule.grace && self.aborted.is_none() {
                let on = match rule.scenario.and_then(|i| self.scenarios.get(i)) {
                    Some(scenario) => format!(" on scenario {}", scenario.name),
                    None => String::new(),
                };
                self.aborted = Some(format!(
                    "threshold `{}`{on} failed at {:.1}s ({shown}): aborted",
                    rule.threshold, observed.elapsed_s
                ));
                self.abort.store(true, Ordering::Relaxed);
            }
            *verdict = Some((passed, shown));
        }
    }

    /// All scenarios' figures together (checks side by side), their
    /// check names, the longest measured time and the requests due.
    pub(crate) fn overall(&self) -> Option<(Figures, Vec<String>, Duration, Option<f64>)> {
        let mut all: Option<Figures> = None;
        let mut names = Vec::new();
        let mut checks = Vec::new();
        let mut due: Option<f64> = None;
        let mut elapsed = Duration::ZERO;
        for scenario in &self.scenarios {
            let Some(figures) = &scenario.cumulative else {
                continue;
            };
            match &mut all {
                Some(all) => all.add(figures),
                None => all = Some(figures.clone()),
            }
            names.extend(scenario.checks.iter().cloned());
            checks.extend(figures.checks.iter().copied());
            if let Some(d) = scenario.target.due(scenario.elapsed) {
                due = Some(due.unwrap_or(0.0) + d);
            }
            elapsed = elapsed.max(scenario.elapsed);
        }
        let mut all = all?;
        all.checks = checks;
        Some((all, names, elapsed, due))
    }
}

impl ScenarioLive {
    fn observed(&self) -> Option<Observed<'_>> {
        Some(Observed {
            figures: self.cumulative.as_ref()?,
            elapsed_s: self.elapsed.as_secs_f64(),
            due: self.target.due(self.elapsed),
            unsent: 0,
            check_names: &self.checks,
        })
    }
}

/// One interval of one scenario as a JSON line.
fn interval_line(
    scenario: &ScenarioLive,
    summary: &IntervalSummary,
    figures: &Figures,
) -> serde_json::Value {
    let seconds = summary.duration_s.max(1e-9);
    let quantiles = |h: &hdrhistogram::Histogram<u64>| {
        json!({
            "p50": h.value_at_quantile(0.5),
            "p90": h.value_at_quantile(0.9),
            "p99": h.value_at_quantile(0.99),
            "max": h.max(),
        })
    };
    let checks: Vec<_> = scenario
        .checks
        .iter()
        .zip(&figures.checks)
        .map(|(name, c)| json!({"name": name, "passed": c.passed, "failed": c.failed}))
        .collect();
    let status: serde_json::Map<String, serde_json::Value> = figures
        .statuses()
        .map(|(code, n)| (code.to_string(), n.into()))
        .collect();
    let target_key = if scenario.target.is_rate() {
        "target_rate"
    } else {
        "target_users"
    };
    let mut line = json!({
        "type": "interval",
        "time": humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        "scenario": scenario.name,
        "start_s": summary.start_s,
        "duration_s": summary.duration_s,
        "requests": summary.requests,
        "rate": summary.requests as f64 / seconds,
        "errors": figures.errors,
        "non_2xx_3xx": summary.non_2xx_3xx,
        "status": status,
        "latency_us": {
            "p50": summary.p50_us,
            "p90": summary.p90_us,
            "p99": summary.p99_us,
            "p99_9": summary.p99_9_us,
            "max": summary.max_us,
        },
        "waiting_us": quantiles(&figures.phases.waiting),
        "receiving_us": quantiles(&figures.phases.receiving),
        "new_connections": figures.phases.connect.len().max(figures.phases.tls.len()),
        "checks": checks,
        "bytes_read": summary.bytes_read,
    });
    line[target_key] = scenario.target.at(scenario.elapsed).into();
    line
}
