//! The Baseline/Proxy summaries with their Times rows, one line per other
//! group, and the sweep pivots.

use super::build::{sweep_name, sweep_values, SYSTEMS};
use super::compare::stem;
use super::table::{Align, Table};
use crate::fmt;
use crate::results::{Group, Results, Row};
use crate::window;

pub(crate) fn group<'a>(results: &'a Results, name: &str) -> Option<&'a Group> {
    results.groups.iter().find(|g| g.name == name)
}

fn summary_table() -> Table {
    Table::new()
        .col("Test Case", Align::Left)
        .col("Max Throughput", Align::Right)
        .col("Avg Latency", Align::Right)
        .col("Transfer", Align::Right)
}

fn summary_row(t: &mut Table, row: &Row) {
    t.push(vec![
        row.label.clone(),
        fmt::count(row.figures.requests_per_sec),
        fmt::micros(row.figures.latency.avg_us),
        format!("{}/s", fmt::bytes(row.figures.bytes_per_sec)),
    ]);
}

/// The baseline group's rows, like seeds/000's "Baseline Summary".
pub(crate) fn baseline_summary(results: &Results) -> Table {
    let mut t = summary_table();
    for row in group(results, "baseline").iter().flat_map(|g| &g.rows) {
        summary_row(&mut t, row);
    }
    t
}

/// What a Times row means.
pub(crate) const TIMES_NOTE: &str = "Times: how many times the backend alone is ahead of the row \
     behind the proxy: throughput and transfer backend ÷ row, latency row ÷ backend.";

/// The baseline rows, then the proxy rows, then one Times row per proxy
/// row against the backend row it stands in front of.
pub(crate) fn proxy_summary(results: &Results) -> Table {
    let mut t = baseline_summary(results);
    let baseline: Vec<&Row> = group(results, "baseline")
        .iter()
        .flat_map(|g| &g.rows)
        .collect();
    let proxied: Vec<&Row> = group(results, "proxy")
        .iter()
        .flat_map(|g| &g.rows)
        .collect();
    for row in &proxied {
        summary_row(&mut t, row);
    }
    for row in proxied.iter().filter(|r| r.system != "backend") {
        let Some(backend) = backend_for(row, &baseline) else {
            continue;
        };
        t.push_strong(vec![
            format!("Times ({} ÷ {})", backend.label, row.label),
            fmt::times(fmt::ratio(
                backend.figures.requests_per_sec,
                row.figures.requests_per_sec,
            )),
            fmt::times(fmt::ratio(
                row.figures.latency.avg_us,
                backend.figures.latency.avg_us,
            )),
            fmt::times(fmt::ratio(
                backend.figures.bytes_per_sec,
                row.figures.bytes_per_sec,
            )),
        ]);
    }
    t
}

/// The request's path: "GET http://127.0.0.1:1/v1/pets" -> "GET /v1/pets".
fn path(row: &Row) -> String {
    fmt::request(&row.load.request)
}

/// The backend row a proxy row stands in front of: the baseline row of
/// system `backend` (any row when there is none) with the same request
/// path and protocol and the most label words in common.
fn backend_for<'a>(row: &Row, baseline: &[&'a Row]) -> Option<&'a Row> {
    let backends: Vec<&'a Row> = baseline
        .iter()
        .copied()
        .filter(|r| r.system == "backend")
        .collect();
    let pool = if backends.is_empty() {
        baseline.to_vec()
    } else {
        backends
    };
    let words = stem(&row.label, &SYSTEMS);
    let words: Vec<&str> = words.split(' ').collect();
    let mut best: Option<(usize, &'a Row)> = None;
    for candidate in pool {
        let theirs = stem(&candidate.label, &SYSTEMS);
        let mut score = theirs
            .split(' ')
            .filter(|w| !w.is_empty() && words.contains(w))
            .count();
        if path(candidate) == path(row) {
            score += 2;
        }
        if candidate.load.protocol == row.load.protocol {
            score += 1;
        }
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, r)| r)
}

/// One line for a group outside the summaries: the best and worst rows,
/// or a sweep's top point per system.
pub(crate) fn group_line(group: &Group) -> String {
    let head = format!("{} ({})", group.name, group.title);
    if group.rows.is_empty() {
        let mut line = format!("{head}: no rows");
        if !group.notes.is_empty() {
            line.push_str(&format!(" ({})", group.notes.join("; ")));
        }
        return line;
    }
    if group.rows.iter().any(|r| r.idle.is_some()) {
        return format!("{head}: {}", idle_line(group));
    }
    let mut line = match (super::seeds::line(group), sweep_name(group)) {
        (Some(line), _) => line,
        (None, Some(name)) => sweep_line(group, name),
        (None, None) => best_worst(group),
    };
    let failing = group
        .rows
        .iter()
        .filter(|r| r.figures.errors.total() > 0)
        .count();
    if failing > 0 {
        line.push_str(&format!(
            "; errors in {failing} row{}",
            if failing == 1 { "" } else { "s" }
        ));
    }
    let unfit = group.rows.iter().filter(|r| !window::comparable(r)).count();
    if unfit > 0 {
        line.push_str(&format!(
            "; {unfit} row{} not comparable (marked{})",
            if unfit == 1 { "" } else { "s" },
            super::build::NOT_COMPARABLE_MARK
        ));
    }
    format!("{head}: {line}")
}

/// Bytes per idle connection at the largest count, per protocol and system.
fn idle_line(group: &Group) -> String {
    let top = group
        .rows
        .iter()
        .map(|r| r.load.connections)
        .max()
        .unwrap_or(0);
    let mut parts: Vec<String> = Vec::new();
    for protocol in ["HTTP/1.1", "HTTP/2"] {
        let figures: Vec<String> = group
            .rows
            .iter()
            .filter(|r| r.load.connections == top && r.load.protocol == protocol)
            .filter_map(|r| {
                let idle = r.idle.as_ref()?;
                Some(format!("{} {:.0} B", r.system, idle.bytes_per_connection))
            })
            .collect();
        if !figures.is_empty() {
            parts.push(format!("{protocol}: {}", figures.join(", ")));
        }
    }
    format!(
        "per idle connection at {}: {}",
        fmt::count(top as f64),
        parts.join("; ")
    )
}

fn best_worst(group: &Group) -> String {
    let n = group.rows.len();
    let by_rps = |a: &&Row, b: &&Row| {
        a.figures
            .requests_per_sec
            .total_cmp(&b.figures.requests_per_sec)
    };
    let (Some(best), Some(worst)) = (
        group.rows.iter().max_by(by_rps),
        group.rows.iter().min_by(by_rps),
    ) else {
        return "no rows".to_owned();
    };
    let describe = |r: &Row| {
        format!(
            "{}{} {} req/s, avg {}",
            super::build::system_label(r),
            mark(r),
            fmt::count(r.figures.requests_per_sec),
            fmt::micros(r.figures.latency.avg_us)
        )
    };
    if n == 1 {
        return format!("1 row: {}", describe(best));
    }
    format!(
        "{n} rows; best {}; worst {} ({} of best)",
        describe(best),
        describe(worst),
        fmt::times(fmt::ratio(
            worst.figures.requests_per_sec,
            best.figures.requests_per_sec
        ))
    )
}

fn sweep_line(group: &Group, name: &str) -> String {
    let top = group
        .rows
        .iter()
        .filter_map(|r| r.sweep.as_ref())
        .map(|s| s.value)
        .fold(f64::NEG_INFINITY, f64::max);
    let at_top: Vec<&Row> = group
        .rows
        .iter()
        .filter(|r| r.sweep.as_ref().is_some_and(|s| s.value == top))
        .collect();
    let warm = at_top.iter().any(|r| r.phase.as_deref() == Some("warm"));
    let rows: Vec<&Row> = at_top
        .into_iter()
        .filter(|r| !warm || r.phase.as_deref() == Some("warm"))
        .collect();
    let point = crate::results::SweepPoint {
        name: name.to_owned(),
        value: top,
    };
    let parts: Vec<String> = rows
        .iter()
        .map(|r| {
            let l = &r.figures.latency;
            let metric = match name {
                "connections" => format!(
                    "{} req/s, avg {}",
                    fmt::count(r.figures.requests_per_sec),
                    fmt::micros(l.avg_us)
                ),
                "users" => format!(
                    "p95 {} ({} answered/s, {} unanswered at the end)",
                    fmt::micros(l.p95_us as f64),
                    fmt::count(r.figures.requests_per_sec),
                    fmt::count(r.figures.unanswered as f64)
                ),
                "rate" => format!(
                    "p95 {}, p99 {}",
                    fmt::micros(l.p95_us as f64),
                    fmt::micros(l.p99_us as f64)
                ),
                _ => format!(
                    "{} req/s, p95 {}",
                    fmt::count(r.figures.requests_per_sec),
                    fmt::micros(l.p95_us as f64)
                ),
            };
            format!("{}{} {metric}", r.system, mark(r))
        })
        .collect();
    format!(
        "at {}{}: {}",
        fmt::sweep(&point),
        if warm { " (warm)" } else { "" },
        parts.join("; ")
    )
}

/// A row's mark in a summary line when it is not comparable.
fn mark(row: &Row) -> &'static str {
    if window::comparable(row) {
        ""
    } else {
        super::build::NOT_COMPARABLE_MARK
    }
}

/// Sweep values in ascending order and systems in order of appearance.
fn sweep_axes(group: &Group) -> (Vec<f64>, Vec<&str>, Vec<Option<&str>>) {
    let values = sweep_values(group);
    let mut systems: Vec<&str> = Vec::new();
    let mut phases: Vec<Option<&str>> = Vec::new();
    for r in group.rows.iter().filter(|r| r.sweep.is_some()) {
        if !systems.contains(&r.system.as_str()) {
            systems.push(&r.system);
        }
        let phase = r.phase.as_deref();
        if !phases.contains(&phase) {
            phases.push(phase);
        }
    }
    // cold before warm, whatever the order they ran in.
    phases.sort_by_key(|p| match p {
        Some("cold") => 0,
        Some("warm") => 1,
        _ => 2,
    });
    (values, systems, phases)
}

/// The first row of a system at a sweep value and phase.
pub(crate) fn at<'a>(
    group: &'a Group,
    system: &str,
    value: f64,
    phase: Option<&str>,
) -> Option<&'a Row> {
    group.rows.iter().find(|r| {
        r.system == system
            && r.sweep.as_ref().is_some_and(|s| s.value == value)
            && r.phase.as_deref() == phase
    })
}

/// A sweep group as one line per sweep value and columns per system:
/// lb req/s and mean latency, io p95, open p95/p99 per phase.
pub(crate) fn pivot(group: &Group) -> Option<Table> {
    let name = sweep_name(group)?;
    let (values, systems, phases) = sweep_axes(group);
    type Metric = fn(&Row) -> String;
    let req: Metric = |r| fmt::count(r.figures.requests_per_sec);
    let avg: Metric = |r| fmt::millis(r.figures.latency.avg_us);
    let p95: Metric = |r| fmt::millis(r.figures.latency.p95_us as f64);
    let p99: Metric = |r| fmt::millis(r.figures.latency.p99_us as f64);
    let metrics: Vec<(&str, Metric)> = match name {
        "connections" => vec![("req/s", req), ("avg ms", avg)],
        "users" => vec![("p95 ms", p95)],
        "rate" => vec![("p95 ms", p95), ("p99 ms", p99)],
        _ => vec![("req/s", req), ("p95 ms", p95)],
    };
    let mut t = Table::new().col(if name == "rate" { "rate/s" } else { name }, Align::Right);
    for system in &systems {
        for phase in &phases {
            for (metric, _) in &metrics {
                let head = match phase {
                    Some(p) => format!("{system} {p} {metric}"),
                    None => format!("{system} {metric}"),
                };
                t = t.col(&head, Align::Right);
            }
        }
    }
    for value in values {
        let mut cells = vec![fmt::value(value)];
        for system in &systems {
            for phase in &phases {
                let row = at(group, system, value, *phase);
                for (_, metric) in &metrics {
                    cells.push(row.map(metric).unwrap_or_else(|| "-".into()));
                }
            }
        }
        t.push(cells);
    }
    Some(t)
}

/// What the pivot's cells are, for its caption.
pub(crate) fn pivot_caption(group: &Group) -> String {
    match sweep_name(group) {
        Some("connections") => "Requests/s and mean latency (ms) per connection count.".into(),
        Some("users") => "p95 latency (ms) per number of users.".into(),
        Some("rate") => {
            "p95 and p99 latency (ms, from each request's intended send time) per arrival rate, \
             cold (first run after start) and warm."
                .into()
        }
        Some(other) => format!("Per {other}."),
        None => String::new(),
    }
}
