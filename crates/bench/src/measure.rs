//! One row: load runs against a system under test (one per round), each
//! with its warm-up discarded, and the system's CPU time and peak RSS
//! from /proc; the row holds every round and their median.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context;
use load::{LoadConfig, RunControl};

use crate::{
    process::{Component, Usage},
    results::{Errors, Figures, Latency, LoadShape, ProcessUsage, Row, RuntimeInfo, SweepPoint},
    stage::{Bench, Round},
};

/// What a row measures and how it is labelled.
#[derive(Debug, Clone)]
pub(crate) struct RowSpec {
    pub(crate) label: String,
    pub(crate) system: String,
    pub(crate) sweep: Option<SweepPoint>,
    pub(crate) phase: Option<String>,
    /// The backend it stands on (the runtimes groups).
    pub(crate) runtime: Option<RuntimeInfo>,
    /// Whole rounds to run first and discard (a JVM's JIT warm-up).
    pub(crate) warmup_rounds: usize,
    /// The status every answer must have for the row to measure what it
    /// says (the oidc row: the upstream's 200, not a 302 to the login);
    /// other 2xx and 3xx answers count as `unexpected_status` errors.
    pub(crate) expect_status: Option<u16>,
    /// The load, warm-up included.
    pub(crate) load: LoadConfig,
}

impl RowSpec {
    pub(crate) fn new(label: impl Into<String>, system: &str, load: LoadConfig) -> Self {
        Self {
            label: label.into(),
            system: system.to_string(),
            sweep: None,
            phase: None,
            runtime: None,
            warmup_rounds: 0,
            expect_status: None,
            load,
        }
    }

    /// Every answer must have `status` ([`RowSpec::expect_status`]).
    pub(crate) fn expect_status(mut self, status: u16) -> Self {
        self.expect_status = Some(status);
        self
    }

    pub(crate) fn sweep(mut self, name: &str, value: f64) -> Self {
        self.sweep = Some(SweepPoint {
            name: name.to_string(),
            value,
        });
        self
    }

    pub(crate) fn phase(mut self, phase: &str) -> Self {
        self.phase = Some(phase.to_string());
        self
    }

    /// The backend the row stands on, and whether its first round is a
    /// warm-up to discard.
    pub(crate) fn on(mut self, runtime: RuntimeInfo, warmup_rounds: usize) -> Self {
        self.runtime = Some(runtime);
        self.warmup_rounds = warmup_rounds;
        self
    }
}

impl Bench<'_> {
    /// One round of one row against the system under test, `stage[0]`;
    /// afterwards every component on the stage must still be alive.
    pub(crate) fn sample(
        &mut self,
        group: &str,
        spec: &RowSpec,
        round: Round,
        stage: &mut [&mut Component],
    ) -> anyhow::Result<(LoadShape, Figures)> {
        let (pid, sut_name) = match stage.first() {
            Some(sut) => (sut.pid(), sut.name.clone()),
            None => anyhow::bail!("{group}: {}: nothing to measure", spec.label),
        };
        if self
            .options
            .interrupt
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            anyhow::bail!("interrupted");
        }
        let planned = spec.load.warmup + spec.load.duration;
        self.observer
            .row_started(group, &spec.label, round, planned);
        let at_start = Arc::new(Mutex::new(None));
        let sample = Arc::clone(&at_start);
        let control = RunControl {
            interrupt: Arc::clone(&self.options.interrupt),
            on_progress: self.observer.progress(),
            on_measure: Some(Box::new(move || {
                if let Ok(mut slot) = sample.lock() {
                    *slot = Some(Usage::of(pid));
                }
            })),
        };
        let report = load::run(&spec.load, control)
            .with_context(|| format!("{group}: {}: the load run failed", spec.label))?;
        let after = Usage::of(pid);
        let before = at_start.lock().ok().and_then(|slot| *slot);
        for component in stage.iter_mut() {
            component.check_alive(&format!("{group}: {}", spec.label))?;
        }
        let mut figures = to_figures(&report, &sut_name, before, after);
        if let Some(expected) = spec.expect_status {
            let unexpected = unexpected_statuses(&report, expected);
            figures.errors.unexpected_status = unexpected.iter().map(|(_, n)| n).sum();
            if !unexpected.is_empty() {
                let seen: Vec<String> = unexpected
                    .iter()
                    .map(|(status, n)| format!("{n} x {status}"))
                    .collect();
                self.observer.note(&format!(
                    "{group}: {}: answers other than the {expected} it measures: {} (marked \
                     not comparable)",
                    spec.label,
                    seen.join(", ")
                ));
            }
        }
        self.observer.row_finished(&spec.label, round, &figures);
        Ok((load_shape(&report), figures))
    }
}

/// A row's rounds as they come in.
#[derive(Debug)]
pub(crate) struct Measured {
    spec: RowSpec,
    load: Option<LoadShape>,
    rounds: Vec<Figures>,
}

impl Measured {
    pub(crate) fn new(spec: RowSpec) -> Self {
        Self {
            spec,
            load: None,
            rounds: Vec::new(),
        }
    }

    /// A round's run; the row's load is its last run's (a lengthened
    /// window shows).
    pub(crate) fn add(&mut self, (load, figures): (LoadShape, Figures)) {
        self.load = Some(load);
        self.rounds.push(figures);
    }

    /// The row: the rounds' median and each round; `None` if no round ran.
    pub(crate) fn finish(self) -> Option<Row> {
        let figures = Figures::combine(&self.rounds)?;
        Some(Row {
            label: self.spec.label,
            system: self.spec.system,
            sweep: self.spec.sweep,
            phase: self.spec.phase,
            runtime: self.spec.runtime,
            warmup_rounds: self.spec.warmup_rounds,
            load: self.load?,
            figures,
            not_comparable: crate::window::reasons(&self.rounds),
            rounds: self.rounds,
            idle: None,
        })
    }
}

/// The 2xx and 3xx statuses of `report` other than `expected`, with
/// their counts (the others are `non_2xx_3xx` errors already).
fn unexpected_statuses(report: &load::Report, expected: u16) -> Vec<(u16, u64)> {
    report
        .status
        .iter()
        .filter(|(&status, &n)| status != expected && (200..400).contains(&status) && n > 0)
        .map(|(&status, &n)| (status, n))
        .collect()
}

fn load_shape(report: &load::Report) -> LoadShape {
    let c = &report.config;
    LoadShape {
        request: c.urls.join(", "),
        protocol: c.protocol.to_string(),
        connections: c.connections,
        pipeline: c.pipeline,
        rate: c.rate,
        think_ms: c.think_ms,
        duration_s: report.elapsed_s,
        warmup_s: c.warmup_s,
    }
}

fn to_figures(
    report: &load::Report,
    process: &str,
    before: Option<Usage>,
    after: Usage,
) -> Figures {
    let l = &report.latency;
    let cpu_s = before.map_or(0.0, |b| (after.cpu_s - b.cpu_s).max(0.0));
    let accounting = report.accounting.unwrap_or_default();
    Figures {
        requests: report.requests,
        sent: accounting.sent,
        carried_in: accounting.carried_in,
        lost: accounting.lost,
        unanswered: accounting.unanswered,
        per_connection: report.per_connection,
        measured_s: report.elapsed_s,
        drain: None,
        requests_per_sec: report.requests_per_sec,
        bytes_per_sec: report.bytes_per_sec,
        latency: Latency {
            avg_us: l.mean_us,
            p50_us: l.at(50.0),
            p90_us: l.at(90.0),
            p95_us: l.at(95.0),
            p99_us: l.at(99.0),
            p999_us: l.at(99.9),
            max_us: l.max_us,
        },
        errors: Errors {
            failed: report.errors,
            non_2xx_3xx: report.non_2xx_3xx,
            unexpected_status: 0,
        },
        process: (after != Usage::default()).then(|| ProcessUsage {
            name: process.to_string(),
            peak_rss_kib: after.peak_rss_kib,
            cpu_s,
            cpu_us_per_request: if report.requests == 0 {
                0.0
            } else {
                cpu_s * 1e6 / report.requests as f64
            },
        }),
    }
}

/// A load config for `url`, with the run's warm-up and duration.
pub(crate) fn load_config(
    url: &str,
    connections: usize,
    duration: Duration,
    warmup: Duration,
) -> anyhow::Result<LoadConfig> {
    let mut config = LoadConfig::new(&[(http::Method::GET, url.to_string())])
        .map_err(|err| anyhow::anyhow!("{err}"))?;
    config.connections = connections;
    config.duration = duration;
    config.warmup = warmup;
    Ok(config)
}
