//! From a scenario file to a [`TestPlan`]: every mistake names the file,
//! the line and column, and the key (`scenarios[1].stages`), and the
//! process exits 2 before anything runs.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use bytes::Bytes;
use serde_saphyr::{Location, Spanned};

use super::{
    file::{
        DurationText, Model, PlanFile, Problem, Protocol, ScenarioFile, StringOr, ThresholdFile,
    },
    requests::{header_list, read_body, requests},
    PlanThreshold, Scenario, TestPlan,
};
use crate::{
    config::ThinkTime,
    stages::{Stage, Stages},
    threshold::Threshold,
    ConfigError,
};

/// Most scenarios in one file.
pub const MAX_SCENARIOS: usize = 100;
/// Most thresholds in one file.
pub const MAX_THRESHOLDS: usize = 1_000;
/// Longest scenario name: it is a label in the metrics.
const MAX_NAME: usize = 64;

/// A mistake in a scenario file: where, which key, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    pub file: PathBuf,
    /// 1-based; 0 when the whole file is at fault.
    pub line: usize,
    pub column: usize,
    /// The key at fault, as `scenarios[0].stages[2].target`.
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for PlanError {}

impl From<PlanError> for ConfigError {
    fn from(err: PlanError) -> Self {
        ConfigError(err.to_string())
    }
}

/// Reads and checks a scenario file.
pub fn load(path: &Path) -> Result<TestPlan, PlanError> {
    let text = std::fs::read_to_string(path).map_err(|err| PlanError {
        file: path.to_path_buf(),
        line: 0,
        column: 0,
        key: String::new(),
        message: format!("cannot read the file: {err}"),
    })?;
    parse(&text, path)
}

/// The same from text; `file` names it in errors and is where `body_file`s
/// are found from.
pub fn parse(text: &str, file: &Path) -> Result<TestPlan, PlanError> {
    let fail = |location: Location, key: String, message: String| PlanError {
        file: file.to_path_buf(),
        line: location.line() as usize,
        column: location.column() as usize,
        key: one_line(&key),
        message: one_line(&message),
    };
    let mut key = String::new();
    let parsed: Result<PlanFile, _> = serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize(de).map_err(|err| {
            key = err.path().to_string();
            err.into_inner()
        })
    });
    let parsed = parsed.map_err(|err| {
        let (line, column) = err
            .location()
            .map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
        let text = serde_saphyr::MessageFormatter::format_message(
            &serde_saphyr::DefaultMessageFormatter,
            &err,
        );
        PlanError {
            file: file.to_path_buf(),
            line,
            column,
            key: one_line(&clean_key(&key)),
            message: one_line(text.lines().next().unwrap_or_default()),
        }
    })?;
    let base = file.parent().unwrap_or_else(|| Path::new("."));
    build(parsed, base).map_err(|(location, key, message)| fail(location, key, message))
}

fn build(file: PlanFile, base: &Path) -> Result<TestPlan, Problem> {
    if file.scenarios.is_empty() {
        return Err((
            Location::UNKNOWN,
            "scenarios".into(),
            "give at least one scenario".into(),
        ));
    }
    if file.scenarios.len() > MAX_SCENARIOS {
        return Err((
            Location::UNKNOWN,
            "scenarios".into(),
            format!(
                "at most {MAX_SCENARIOS} scenarios, got {}",
                file.scenarios.len()
            ),
        ));
    }
    let total: usize = file.thresholds.len()
        + file
            .scenarios
            .iter()
            .map(|s| s.value.thresholds.len())
            .sum::<usize>();
    if total > MAX_THRESHOLDS {
        return Err((
            Location::UNKNOWN,
            "thresholds".into(),
            format!("at most {MAX_THRESHOLDS} thresholds in a file, got {total}"),
        ));
    }
    let mut scenarios: Vec<Scenario> = Vec::with_capacity(file.scenarios.len());
    for (i, scenario) in file.scenarios.into_iter().enumerate() {
        let key = format!("scenarios[{i}]");
        let built = scenario_from(scenario.value, &key, base, file.sequential)?;
        if let Some(other) = scenarios.iter().find(|s| s.name == built.0.name) {
            return Err((
                built.1,
                format!("{key}.name"),
                format!("`{}` is the name of another scenario", other.name),
            ));
        }
        scenarios.push(built.0);
    }
    let mut thresholds = Vec::with_capacity(file.thresholds.len());
    for (i, threshold) in file.thresholds.into_iter().enumerate() {
        let key = format!("thresholds[{i}]");
        let names: Vec<&str> = scenarios
            .iter()
            .flat_map(|s| s.config.checks.iter().map(|c| c.name.as_str()))
            .collect();
        thresholds.push(threshold_from(threshold, &key, &names)?);
    }
    Ok(TestPlan {
        scenarios,
        sequential: file.sequential,
        thresholds,
    })
}

fn scenario_from(
    file: ScenarioFile,
    key: &str,
    base: &Path,
    sequential: bool,
) -> Result<(Scenario, Location), Problem> {
    let at = file.name.referenced;
    let name = file.name.value.trim().to_string();
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
        return Err((
            at,
            format!("{key}.name"),
            format!("a name of 1 to {MAX_NAME} printable characters"),
        ));
    }
    let fail = |location: Location, field: &str, message: String| {
        Err((location, format!("{key}.{field}"), message))
    };
    let mut config = requests(&file, key, base, at)?;
    if let Some(headers) = &file.headers {
        config.headers = header_list(&headers.value)
            .map_err(|why| (headers.referenced, format!("{key}.headers"), why))?;
    }
    config.body = match (&file.body, &file.body_file) {
        (Some(_), Some(path)) => {
            return fail(
                path.referenced,
                "body_file",
                "give `body` or `body_file`, not both".into(),
            )
        }
        (Some(body), None) => Bytes::from(body.clone()),
        (None, Some(path)) => read_body(base, &path.value)
            .map_err(|why| (path.referenced, format!("{key}.body_file"), why))?,
        (None, None) => Bytes::new(),
    };
    config.protocol = match file.protocol {
        Protocol::Http1 => crate::Protocol::Http1,
        Protocol::H2 => crate::Protocol::Http2,
        Protocol::H3 => crate::Protocol::Http3,
    };
    let model = match (&file.model, &file.rate, &file.think) {
        (Some(model), _, _) => model.value,
        (None, Some(_), _) => Model::Open,
        (None, None, Some(_)) => Model::Users,
        (None, None, None) if file.stages.is_some() => {
            return fail(at, "model", "stages need the model said: open (the targets are rates) or closed/users (the targets are users)".into())
        }
        (None, None, None) => Model::Closed,
    };
    let connections = match (file.connections, file.users) {
        (Some(_), Some(_)) => {
            return fail(
                at,
                "users",
                "give `connections` or `users` (the same thing), not both".into(),
            )
        }
        (one, other) => one.or(other),
    };
    config.threads = file.threads.unwrap_or(1);
    config.pipeline = file.pipeline.unwrap_or(1);
    config.streams = file.streams.unwrap_or(1);
    config.total_requests = file.total_requests;
    config.insecure = file.insecure;
    config.cacert = file.cacert.as_ref().map(|path| base.join(path));
    let seconds = |d: &Option<DurationText>| d.map(|d| d.0);
    config.timeout = seconds(&file.timeout).unwrap_or(config.timeout);
    config.warmup = seconds(&file.warmup).unwrap_or_default();
    config.ramp = seconds(&file.ramp).unwrap_or_default();
    if let Some(think) = &file.think {
        config.think = Some(
            ThinkTime::parse(&think.value)
                .map_err(|why| (think.referenced, format!("{key}.think"), why))?,
        );
    }
    let stages = stages_from(&file, model, key)?;
    match (model, &file.rate, &stages) {
        (Model::Open, Some(rate), Some(_)) => {
            return fail(
                rate.referenced,
                "rate",
                "with stages the rates are the stages' targets: no `rate`".into(),
            )
        }
        (Model::Open, Some(rate), None) => config.rate = Some(rate.value),
        (Model::Open, None, Some(stages)) => config.rate = Some(stages.peak()),
        (Model::Open, None, None) => {
            return fail(
                at,
                "rate",
                "the open model needs a `rate` (or stages of rates)".into(),
            )
        }
        (_, Some(rate), _) => {
            return fail(
                rate.referenced,
                "rate",
                "a rate is the open model's: say `model: open`".into(),
            )
        }
        (_, None, _) => {}
    }
    config.connections = match (&stages, model, connections) {
        (Some(stages), Model::Closed | Model::Users, None) => stages.peak().ceil() as usize,
        (_, _, Some(n)) => n,
        (_, _, None) => config.connections,
    };
    if let Some(stages) = &stages {
        config.duration = stages.duration();
        if file.duration.is_some() {
            let duration = file.duration.as_ref().map_or(at, |d| d.referenced);
            return fail(
                duration,
                "duration",
                "stages set the duration: no `duration` with them".into(),
            );
        }
    } else if let Some(duration) = &file.duration {
        config.duration = duration.value.0;
    }
    config.stages = stages;
    config.check_body_limit = file.check_body_limit.unwrap_or(config.check_body_limit);
    let mut checks = Vec::with_capacity(file.checks.len());
    for (j, spec) in file.checks.into_iter().enumerate() {
        let check_key = format!("{key}.checks[{j}]");
        let check = spec
            .value
            .into_check()
            .map_err(|why| (spec.referenced, check_key.clone(), why))?;
        if checks.iter().any(|c: &crate::Check| c.name == check.name) {
            return Err((
                spec.referenced,
                check_key,
                format!("two checks are named `{}`: name one", check.name),
            ));
        }
        checks.push(check);
    }
    config.checks = checks;
    let names: Vec<&str> = config.checks.iter().map(|c| c.name.as_str()).collect();
    let mut thresholds = Vec::with_capacity(file.thresholds.len());
    for (j, threshold) in file.thresholds.into_iter().enumerate() {
        thresholds.push(threshold_from(
            threshold,
            &format!("{key}.thresholds[{j}]"),
            &names,
        )?);
    }
    let start_time = match &file.start_time {
        Some(start) if sequential => {
            return fail(
                start.referenced,
                "start_time",
                "start_time goes with scenarios run together, not `sequential: true`".into(),
            )
        }
        Some(start) => start.value.0,
        None => Duration::ZERO,
    };
    config
        .validate()
        .map_err(|err| (at, key.to_string(), err.0))?;
    Ok((
        Scenario {
            name,
            config,
            start_time,
            thresholds,
        },
        at,
    ))
}

fn stages_from(file: &ScenarioFile, model: Model, key: &str) -> Result<Option<Stages>, Problem> {
    let (start, other) = match model {
        Model::Open => (&file.start_rate, &file.start_users),
        Model::Closed | Model::Users => (&file.start_users, &file.start_rate),
    };
    if let Some(wrong) = other {
        let (field, why) = match model {
            Model::Open => ("start_users", "start_users goes with closed or users stages; the open model starts at `start_rate`"),
            _ => ("start_rate", "start_rate goes with the open model; closed and users stages start at `start_users`"),
        };
        return Err((wrong.referenced, format!("{key}.{field}"), why.into()));
    }
    let Some(stages) = &file.stages else {
        if let Some(start) = start {
            return Err((
                start.referenced,
                format!("{key}.stages"),
                "a starting target goes with stages".into(),
            ));
        }
        return Ok(None);
    };
    let built = Stages {
        from: start.as_ref().map_or(0.0, |s| s.value),
        steps: stages
            .value
            .iter()
            .map(|s| Stage {
                duration: s.duration.0,
                target: s.target,
            })
            .collect(),
    };
    let what = if model == Model::Open {
        "rate"
    } else {
        "number of users"
    };
    built
        .check(what)
        .map_err(|why| (stages.referenced, format!("{key}.stages"), why))?;
    Ok(Some(built))
}

fn threshold_from(
    file: Spanned<ThresholdFile>,
    key: &str,
    checks: &[&str],
) -> Result<PlanThreshold, Problem> {
    let at = file.referenced;
    let (text, abort_on_fail, grace) = match file.value {
        StringOr::Text(text) => (text, false, None),
        StringOr::Full(full) => (full.threshold, full.abort_on_fail, full.grace),
    };
    let threshold = Threshold::parse(&text).map_err(|why| (at, key.to_string(), why))?;
    if let Some(name) = threshold.check_name() {
        if !checks.contains(&name) {
            return Err((
                at,
                key.to_string(),
                format!(
                    "no check is named `{name}` (the checks: {})",
                    checks.join(", ")
                ),
            ));
        }
    }
    if grace.is_some() && !abort_on_fail {
        return Err((
            at,
            format!("{key}.grace"),
            "grace goes with abort_on_fail: true".into(),
        ));
    }
    Ok(PlanThreshold {
        threshold,
        abort_on_fail,
        grace: grace.map_or(Duration::ZERO, |g| g.0),
    })
}

/// serde's path to a key, without the root's `.` and the `value` that
/// each located (`Spanned`) value adds (the schema has no key of that name).
fn clean_key(key: &str) -> String {
    if key == "." {
        return String::new();
    }
    key.replace(".value", "")
}

/// `text` with control characters escaped: an error is one line.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
