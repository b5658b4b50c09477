//! The runtimes groups, one per seed: each gets a table shaped like the
//! seed's own (read against `sluice serve`, with the seed's published
//! ratio where it gave one), one chart, a summary line, and the versions
//! its rows ran on. The generic sweep pivot does not apply to them: their
//! backends all load as system `backend` and differ by runtime.

mod hello;
mod io;
mod open;
mod petstore;

use super::table::{Align, Table};
use crate::fmt;
use crate::results::{Group, Row};

/// Whether a group is one of the runtimes groups.
pub(crate) fn is_seed(group: &Group) -> bool {
    group.name.starts_with("runtimes-")
}

/// What a seed's section draws from its group.
struct Seed {
    table: fn(&Group) -> Option<(Table, String)>,
    chart: fn(&Group) -> String,
    line: fn(&Group) -> String,
}

/// The seed of a runtimes group with rows; `None` for the other groups
/// and for a runtimes group without rows (it says why in its notes).
fn seed(group: &Group) -> Option<Seed> {
    if group.rows.is_empty() {
        return None;
    }
    Some(match group.name.as_str() {
        "runtimes-hello" => Seed {
            table: |g| Some(hello::table(g)),
            chart: hello::chart,
            line: hello::line,
        },
        "runtimes-petstore" => Seed {
            table: |g| Some(petstore::table(g)),
            chart: petstore::chart,
            line: petstore::line,
        },
        "runtimes-io" => Seed {
            table: io::table,
            chart: io::chart,
            line: io::line,
        },
        "runtimes-open" => Seed {
            table: |g| Some(open::table(g)),
            chart: open::chart,
            line: open::line,
        },
        _ => return None,
    })
}

/// The seed's table and what its cells are (a caption).
pub(crate) fn table(group: &Group) -> Option<(Table, String)> {
    seed(group).and_then(|s| (s.table)(group))
}

/// The seed's chart as inline SVG.
pub(crate) fn chart(group: &Group) -> Option<String> {
    seed(group).map(|s| (s.chart)(group))
}

/// The summary line's body (after the group's name and title).
pub(crate) fn line(group: &Group) -> Option<String> {
    seed(group).map(|s| (s.line)(group))
}

/// Each backend's runtime and framework versions, and how many rounds of
/// its rows were discarded as warm-up.
pub(crate) fn versions(group: &Group) -> Option<Table> {
    let mut t = Table::new()
        .col("Backend", Align::Left)
        .col("Runs on", Align::Left)
        .col("Framework", Align::Left)
        .col("Warm-up rounds", Align::Right);
    let mut seen: Vec<&str> = Vec::new();
    for row in &group.rows {
        let Some(runtime) = &row.runtime else {
            continue;
        };
        if seen.contains(&runtime.name.as_str()) {
            continue;
        }
        seen.push(&runtime.name);
        let warmups = group
            .rows
            .iter()
            .filter(|r| r.runtime.as_ref().is_some_and(|x| x.name == runtime.name))
            .map(|r| r.warmup_rounds)
            .max()
            .unwrap_or(0);
        t.push(vec![
            runtime.name.clone(),
            runtime.version.clone(),
            runtime.framework.clone(),
            warmups.to_string(),
        ]);
    }
    (!t.is_empty()).then_some(t)
}

/// What the versions table's last column means.
pub(crate) const VERSIONS_NOTE: &str = "Warm-up rounds: whole rounds run before the measured ones \
     and discarded (1 for a backend on a JVM, as the seeds discarded their first run; none for \
     cold and warm rows, where the first run after a start is the point).";

/// The backend a row stands on: its runtime's name, else its system.
fn backend(row: &Row) -> &str {
    row.runtime
        .as_ref()
        .map_or(row.system.as_str(), |r| r.name.as_str())
}

/// The proxy in front, if the row went through one.
fn via(row: &Row) -> Option<&str> {
    let system = row.system.as_str();
    (system != "backend" && system != backend(row)).then_some(system)
}

/// Backends in order of appearance.
fn backends(group: &Group) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for row in &group.rows {
        let name = backend(row);
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The colour of a backend, the same in every seed chart.
fn color(name: &str) -> &'static str {
    match name {
        "sluice serve" => "#1f6fb4",
        "spring-mvc" => "#6db33f",
        "webflux" => "#a0522d",
        "go-http" => "#00add8",
        "node" => "#e0a800",
        "grizzly" => "#8e5cc4",
        "payara" => "#f0781e",
        other => super::svg::system_color(other),
    }
}

/// Failed requests, every kind, summed over the rounds: `1,234`.
fn failures(row: &Row) -> String {
    fmt::count(row.figures.errors.total() as f64)
}

#[cfg(test)]
mod tests;
