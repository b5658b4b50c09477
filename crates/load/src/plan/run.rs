//! Running a plan: its scenarios together (each on threads of its own) or
//! one after another, the live outputs while they go, the thresholds at
//! the end.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use super::{LiveOutcome, PlanReport, PlanThreshold, TestPlan};
use crate::{
    ensure_fd_limit,
    figures::Figures,
    live::{
        otlp::OtlpPusher, prometheus::MetricsServer, Live, LiveOptions, LiveThreshold, TargetCurve,
    },
    measured::Measured,
    runner::run_measured,
    threshold::Observed,
    ConfigError, LoadConfig, Progress, Report, ReportConfig, RunControl, ThresholdReport,
};

/// Outside control of a plan's run.
#[derive(Default)]
pub struct PlanControl {
    /// Set it (from a Ctrl-C handler) to end every scenario early.
    pub interrupt: Arc<AtomicBool>,
    /// A progress callback; used when the plan has one scenario.
    pub on_progress: Option<Box<dyn FnMut(Progress) + Send>>,
    pub live: LiveOptions,
    /// Keep each second's summary (the reports' `intervals`), as the HTML
    /// report draws them.
    pub intervals: bool,
    /// Told where `/metrics` is served (`--metrics-listen` may ask for port 0).
    pub on_metrics_listen: Option<Box<dyn FnOnce(std::net::SocketAddr) + Send>>,
}

impl std::fmt::Debug for PlanControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanControl")
            .field("live", &self.live)
            .field("intervals", &self.intervals)
            .finish_non_exhaustive()
    }
}

/// Runs `plan` and judges its thresholds. Configuration mistakes (and a
/// `--metrics-listen` address that cannot be bound) are [`ConfigError`]s.
pub fn run_plan(plan: &TestPlan, mut control: PlanControl) -> anyhow::Result<PlanReport> {
    for scenario in &plan.scenarios {
        scenario
            .config
            .validate()
            .map_err(|err| scenario_error(plan, &scenario.name, err))?;
    }
    let connections = plan.scenarios.iter().map(|s| s.config.connections());
    let needed = if plan.sequential {
        connections.max().unwrap_or(0)
    } else {
        connections.sum()
    };
    ensure_fd_limit(needed)?;

    let live_wanted = control.live.metrics_listen.is_some()
        || control.live.otlp.is_some()
        || control.live.json_lines.is_some()
        || plan.aborts();
    let named: Vec<(&str, &LoadConfig)> = plan
        .scenarios
        .iter()
        .map(|s| (s.name.as_str(), &s.config))
        .collect();
    let live = if live_wanted {
        let rules = live_thresholds(plan);
        let live = Live::new(
            &named,
            rules,
            Arc::clone(&control.interrupt),
            control.live.json_lines.as_ref(),
        )
        .map_err(|err| {
            let path = control
                .live
                .json_lines
                .as_ref()
                .map(|p| p.display().to_string());
            ConfigError(format!("--json-lines {}: {err}", path.unwrap_or_default()))
        })?;
        Some(live)
    } else {
        None
    };
    let mut outcome = LiveOutcome::default();
    let server = match (control.live.metrics_listen, &live) {
        (Some(listen), Some(live)) => {
            let server = MetricsServer::start(listen, live.clone())
                .map_err(|err| ConfigError(format!("--metrics-listen {listen}: {err}")))?;
            outcome.metrics_listen = Some(server.addr.to_string());
            if let Some(tell) = control.on_metrics_listen.take() {
                tell(server.addr);
            }
            Some(server)
        }
        _ => None,
    };
    let pusher = match (&control.live.otlp, &live) {
        (Some(target), Some(live)) => Some(OtlpPusher::start(target.clone(), live.clone())?),
        _ => None,
    };

    let started = Instant::now();
    let single = plan.scenarios.len() == 1;
    let mut progress = control.on_progress.take();
    let run_one = |index: usize, progress: Option<Box<dyn FnMut(Progress) + Send>>| {
        let scenario = &plan.scenarios[index];
        if wait(scenario.start_time, &control.interrupt) {
            return None;
        }
        let mut config = scenario.config.clone();
        config.intervals |= control.intervals;
        let run = RunControl {
            interrupt: Arc::clone(&control.interrupt),
            on_progress: progress,
            on_measure: None,
        };
        let result = run_measured(&config, run, live.as_ref().map(|live| live.feed(index)));
        if result.is_err() {
            // One scenario cannot go on: none does.
            control.interrupt.store(true, Ordering::Relaxed);
        }
        Some(result)
    };
    let results: Vec<Option<anyhow::Result<(ReportConfig, Measured)>>> = if plan.sequential {
        let mut results = Vec::new();
        for index in 0..plan.scenarios.len() {
            let progress = if single { progress.take() } else { None };
            results.push(run_one(index, progress));
            if control.interrupt.load(Ordering::Relaxed) {
                break;
            }
        }
        results
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..plan.scenarios.len())
                .map(|index| {
                    let progress = if single { progress.take() } else { None };
                    scope.spawn(move || run_one(index, progress))
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|_| Some(Err(anyhow::anyhow!("a scenario panicked"))))
                })
                .collect()
        })
    };
    let elapsed = started.elapsed();

    if let Some(pusher) = pusher {
        let pushed = pusher.finish();
        outcome.otlp_pushed = pushed.pushed;
        outcome.otlp_failed = pushed.failed;
        outcome.otlp_error = pushed.last_error;
    }
    let aborted = live.as_ref().and_then(Live::aborted);
    let mut measured = Vec::new();
    for (scenario, result) in plan.scenarios.iter().zip(results) {
        match result {
            Some(Ok(run)) => measured.push((scenario, run)),
            Some(Err(err)) => {
                return Err(match err.downcast::<ConfigError>() {
                    Ok(config) => scenario_error(plan, &scenario.name, config).into(),
                    Err(other) => other.context(format!("scenario {}", scenario.name)),
                })
            }
            // Not started: the run was stopped first.
            None => {}
        }
    }
    let overall = overall_figures(&measured);
    let mut reports = Vec::with_capacity(measured.len());
    for (scenario, (config, figures)) in measured {
        let observed = observe(&scenario.config, &figures, &config.checks);
        let thresholds = judge(&scenario.thresholds, &observed, Some(&scenario.name));
        let mut report = Report::build(config, figures, 0);
        report.scenario = Some(scenario.name.clone());
        report.thresholds = thresholds;
        reports.push(report);
    }
    let thresholds = match &overall {
        Some((figures, names, due, unsent)) => judge(
            &plan.thresholds,
            &Observed {
                figures,
                elapsed_s: elapsed.as_secs_f64(),
                due: *due,
                unsent: *unsent,
                check_names: names,
            },
            None,
        ),
        None => Vec::new(),
    };
    let overall = (reports.len() > 1)
        .then(|| {
            overall.map(|(figures, names, _, _)| overall_report(&reports, figures, names, elapsed))
        })
        .flatten();
    let mut report = PlanReport {
        tool: format!("sluice load {}", env!("CARGO_PKG_VERSION")),
        scenarios: reports,
        overall,
        thresholds,
        passed: false,
        aborted,
        elapsed_s: elapsed.as_secs_f64(),
        live: outcome,
    };
    report.passed = report.aborted.is_none() && report.all_thresholds().all(|t| t.passed);
    if let Some(live) = &live {
        let summary = serde_json::json!({
            "passed": report.passed,
            "aborted": report.aborted,
            "thresholds": report.all_thresholds().collect::<Vec<_>>(),
        });
        report.live.json_lines_error = live.finish(summary);
    }
    drop(server);
    Ok(report)
}

/// `scenario NAME: ...` when the plan has several.
fn scenario_error(plan: &TestPlan, name: &str, err: ConfigError) -> ConfigError {
    if plan.scenarios.len() == 1 {
        err
    } else {
        ConfigError(format!("scenario {name}: {}", err.0))
    }
}

/// Sleeps `delay` unless interrupted first (then true).
fn wait(delay: Duration, interrupt: &AtomicBool) -> bool {
    let until = Instant::now() + delay;
    while Instant::now() < until {
        if interrupt.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep((until - Instant::now()).min(Duration::from_millis(10)));
    }
    false
}

fn live_thresholds(plan: &TestPlan) -> Vec<LiveThreshold> {
    let rule = |t: &PlanThreshold, scenario| LiveThreshold {
        threshold: t.threshold.clone(),
        scenario,
        abort_on_fail: t.abort_on_fail,
        grace: t.grace,
    };
    let mut rules: Vec<LiveThreshold> = plan
        .scenarios
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.thresholds.iter().map(move |t| rule(t, Some(i))))
        .collect();
    rules.extend(plan.thresholds.iter().map(|t| rule(t, None)));
    rules
}

/// What a scenario's thresholds read at its end.
fn observe<'a>(config: &LoadConfig, measured: &'a Measured, names: &'a [String]) -> Observed<'a> {
    Observed {
        figures: &measured.figures,
        elapsed_s: measured.elapsed.as_secs_f64(),
        due: TargetCurve::new(config).due(measured.elapsed),
        unsent: measured.unsent,
        check_names: names,
    }
}

fn judge(
    thresholds: &[PlanThreshold],
    observed: &Observed<'_>,
    scenario: Option<&str>,
) -> Vec<ThresholdReport> {
    thresholds
        .iter()
        .map(|t| {
            let (passed, observed) = t.threshold.evaluate(observed);
            ThresholdReport {
                threshold: t.threshold.text.clone(),
                scenario: scenario.map(str::to_string),
                passed,
                observed,
                abort_on_fail: t.abort_on_fail,
            }
        })
        .collect()
}

type Overall = (Figures, Vec<String>, Option<f64>, u64);

/// All scenarios' figures together (checks side by side), their check
/// names, the requests due and those never sent.
fn overall_figures(measured: &[(&super::Scenario, (ReportConfig, Measured))]) -> Option<Overall> {
    let mut all: Option<Figures> = None;
    let (mut names, mut checks) = (Vec::new(), Vec::new());
    let (mut due, mut unsent) = (None, 0);
    for (scenario, (config, figures)) in measured {
        match &mut all {
            Some(all) => all.add(&figures.figures),
            None => all = Some(figures.figures.clone()),
        }
        names.extend(config.checks.iter().cloned());
        checks.extend(figures.figures.checks.iter().copied());
        if let Some(d) = TargetCurve::new(&scenario.config).due(figures.elapsed) {
            due = Some(due.unwrap_or(0.0) + d);
        }
        unsent += figures.unsent;
    }
    let mut all = all?;
    all.checks = checks;
    Some((all, names, due, unsent))
}

/// The report of all scenarios together.
fn overall_report(
    reports: &[Report],
    figures: Figures,
    names: Vec<String>,
    elapsed: Duration,
) -> Report {
    let mut config = reports[0].config.clone();
    config.urls = reports
        .iter()
        .flat_map(|r| r.config.urls.iter().cloned())
        .collect();
    // `-n` of all together only when every scenario has one.
    config.total_requests = reports.iter().map(|r| r.config.total_requests).sum();
    // The weights line up with the URLs (a scenario without weights: 1 each).
    config.weights = match reports.iter().all(|r| r.config.weights.is_empty()) {
        true => Vec::new(),
        false => reports
            .iter()
            .flat_map(|r| match r.config.weights.is_empty() {
                true => vec![1; r.config.urls.len()],
                false => r.config.weights.clone(),
            })
            .collect(),
    };
    config.threads = reports.iter().map(|r| r.config.threads).sum();
    config.connections = reports.iter().map(|r| r.config.connections).sum();
    config.rate = None;
    config.stages = None;
    config.checks = names;
    config.duration_s = Some(elapsed.as_secs_f64());
    let measured = Measured {
        status: figures.statuses().collect(),
        figures,
        per_second: Vec::new(),
        // Not carried in the scenarios' reports: each has its own spread.
        per_connection: Vec::new(),
        thread_samples: Vec::new(),
        max_lag: Duration::ZERO,
        unsent: reports
            .iter()
            .filter_map(|r| r.schedule.map(|s| s.unsent))
            .sum(),
        accounting: reports
            .iter()
            .try_fold(crate::Accounting::default(), |mut all, r| {
                all.add(&r.accounting?);
                Some(all)
            }),
        elapsed,
        interrupted: reports.iter().any(|r| r.interrupted),
        intervals: Vec::new(),
        stages: None,
    };
    let mut report = Report::build(config, measured, 0);
    report.scenario = Some("*".into());
    report
}
