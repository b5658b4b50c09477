//! `sluice bench --baseline results.json --max-regression 5%`: each row
//! against the same row of an earlier run (same group, label, system,
//! sweep point and phase), on the figure its group is judged on: req/s
//! (higher is better), p95 latency in the users and open-rate groups, bytes
//! per idle connection in `idle` (lower is better). A row worse by more
//! than the limit regressed when its rounds agree (every round of this
//! run is worse than every round of the baseline's); when they do not,
//! the row is too noisy to judge, reported and not failed.

use std::{fmt::Write as _, path::Path};

use serde::Serialize;

use crate::results::{Figures, Group, Results, Row};
use crate::{fmt::point as sweep_point, report::verdicts_on_p95};

/// What a row's comparison found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Within the limit either way.
    Same,
    /// Better by more than the limit.
    Improved,
    /// Worse by more than the limit, every round of it: the gate fails.
    Regressed,
    /// Worse by more than the limit on the medians, but the rounds of
    /// the two runs overlap: too noisy to judge.
    Noisy,
    /// In this run only.
    New,
    /// In the baseline only.
    Missing,
}

/// One row's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct RowComparison {
    pub group: String,
    pub label: String,
    pub system: String,
    /// `connections=500`, `rate=1000/s warm`, or empty.
    pub point: String,
    /// `req/s`, `p95 µs` or `B/conn`.
    pub figure: &'static str,
    pub baseline: Option<f64>,
    pub current: Option<f64>,
    /// How much worse this run is, as a fraction (negative: better).
    pub worse_by: Option<f64>,
    pub verdict: Verdict,
}

/// Every row's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The limit, as a fraction (0.05 for 5%).
    pub max_regression: f64,
    pub baseline_started: String,
    pub rows: Vec<RowComparison>,
}

/// `5%` or `0.05` as a fraction.
pub fn parse_max_regression(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let value = match trimmed.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().map(|p| p / 100.0),
        None => trimmed.parse::<f64>(),
    };
    match value {
        Ok(v) if v.is_finite() && v > 0.0 && v < 10.0 => Ok(v),
        _ => Err(format!(
            "invalid --max-regression `{text}`: a share like 5% (or 0.05)"
        )),
    }
}

/// Reads an earlier run's results.json.
pub fn read(path: &Path) -> Result<Results, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("--baseline {}: {err}", path.display()))?;
    let results: Results = serde_json::from_str(&text).map_err(|err| {
        format!(
            "--baseline {}: not a sluice bench results.json: {err}",
            path.display()
        )
    })?;
    if !results.schema.starts_with("sluice-bench/") {
        return Err(format!(
            "--baseline {}: schema `{}` is not sluice bench's",
            path.display(),
            results.schema
        ));
    }
    Ok(results)
}

/// How a group's rows are judged: the figure's name, its value, and
/// whether higher is better.
fn figure_of(group: &Group) -> (&'static str, fn(&Row, &Figures) -> f64, bool) {
    if group.rows.iter().any(|r| r.idle.is_some()) {
        (
            "B/conn",
            |row, _| row.idle.map_or(0.0, |idle| idle.bytes_per_connection),
            false,
        )
    } else if verdicts_on_p95(group) {
        ("p95 µs", |_, f| f.latency.p95_us as f64, false)
    } else {
        ("req/s", |_, f| f.requests_per_sec, true)
    }
}

fn key(group: &Group, row: &Row) -> (String, String, String, String) {
    (
        group.name.clone(),
        row.label.clone(),
        row.system.clone(),
        sweep_point(row),
    )
}

/// Each row of `current` against the same row of `baseline`.
pub fn compare(current: &Results, baseline: &Results, max_regression: f64) -> Comparison {
    let mut rows = Vec::new();
    let find = |group: &Group, row: &Row| {
        let wanted = key(group, row);
        baseline
            .groups
            .iter()
            .find_map(|g| g.rows.iter().find(|r| key(g, r) == wanted).map(|r| (g, r)))
    };
    for group in &current.groups {
        let (figure, value, higher_is_better) = figure_of(group);
        for row in &group.rows {
            let now = value(row, &row.figures);
            let mut comparison = RowComparison {
                group: group.name.clone(),
                label: row.label.clone(),
                system: row.system.clone(),
                point: sweep_point(row),
                figure,
                baseline: None,
                current: Some(now),
                worse_by: None,
                verdict: Verdict::New,
            };
            if let Some((_, before)) = find(group, row) {
                let then = value(before, &before.figures);
                let worse_by = if higher_is_better {
                    (then - now) / then.max(f64::MIN_POSITIVE)
                } else {
                    (now - then) / then.max(f64::MIN_POSITIVE)
                };
                comparison.baseline = Some(then);
                comparison.worse_by = Some(worse_by);
                comparison.verdict = if worse_by > max_regression {
                    if rounds_agree(row, before, value, higher_is_better) {
                        Verdict::Regressed
                    } else {
                        Verdict::Noisy
                    }
                } else if worse_by < -max_regression {
                    Verdict::Improved
                } else {
                    Verdict::Same
                };
            }
            rows.push(comparison);
        }
    }
    for group in &baseline.groups {
        let (figure, value, _) = figure_of(group);
        for row in &group.rows {
            let wanted = key(group, row);
            let here = current
                .groups
                .iter()
                .any(|g| g.rows.iter().any(|r| key(g, r) == wanted));
            if !here {
                rows.push(RowComparison {
                    group: group.name.clone(),
                    label: row.label.clone(),
                    system: row.system.clone(),
                    point: sweep_point(row),
                    figure,
                    baseline: Some(value(row, &row.figures)),
                    current: None,
                    worse_by: None,
                    verdict: Verdict::Missing,
                });
            }
        }
    }
    Comparison {
        max_regression,
        baseline_started: baseline.started.clone(),
        rows,
    }
}

/// Whether every round of `now` is worse than every round of `then` (a
/// row without its rounds counts its figures as one).
fn rounds_agree(
    now: &Row,
    then: &Row,
    value: fn(&Row, &Figures) -> f64,
    higher_is_better: bool,
) -> bool {
    let values = |row: &Row| -> Vec<f64> {
        if row.rounds.is_empty() {
            vec![value(row, &row.figures)]
        } else {
            row.rounds.iter().map(|f| value(row, f)).collect()
        }
    };
    let (now, then) = (values(now), values(then));
    let best_now = now.iter().copied().fold(
        if higher_is_better { f64::MIN } else { f64::MAX },
        |a, b| {
            if higher_is_better {
                a.max(b)
            } else {
                a.min(b)
            }
        },
    );
    if higher_is_better {
        then.iter().all(|&t| best_now < t)
    } else {
        then.iter().all(|&t| best_now > t)
    }
}

impl Comparison {
    /// The rows that regressed: the gate fails when there is one.
    pub fn regressions(&self) -> impl Iterator<Item = &RowComparison> {
        self.rows.iter().filter(|r| r.verdict == Verdict::Regressed)
    }

    /// The verdict lines: a count of each, then every row that is not the same.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let count = |v: Verdict| self.rows.iter().filter(|r| r.verdict == v).count();
        let _ = writeln!(
            out,
            "Against the baseline of {} (max regression {:.1}%): {} regressed, {} too noisy to judge, {} improved, {} the same, {} new, {} missing",
            self.baseline_started,
            self.max_regression * 100.0,
            count(Verdict::Regressed),
            count(Verdict::Noisy),
            count(Verdict::Improved),
            count(Verdict::Same),
            count(Verdict::New),
            count(Verdict::Missing),
        );
        for row in self.rows.iter().filter(|r| r.verdict != Verdict::Same) {
            let verdict = match row.verdict {
                Verdict::Regressed => "REGRESSED",
                Verdict::Noisy => "too noisy",
                Verdict::Improved => "improved",
                Verdict::New => "new",
                Verdict::Missing => "missing",
                Verdict::Same => "same",
            };
            let number = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
            let change = row
                .worse_by
                .map_or(String::new(), |w| format!(" ({:+.1}% worse)", w * 100.0));
            let point = if row.point.is_empty() {
                String::new()
            } else {
                format!(" [{}]", row.point)
            };
            let _ = writeln!(
                out,
                "  {verdict:<9} {}: {}{point} ({}): {} {} -> {}{change}",
                row.group,
                row.label,
                row.system,
                row.figure,
                number(row.baseline),
                number(row.current)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests;
