//! seeds/003: users with think time in front of a slow downstream, p95
//! and failures per user count, blocking against non-blocking.

use super::{backend, color, failures, via};
use crate::fmt;
use crate::report::build::sweep_values;
use crate::report::svg::{self, LineChart, Series};
use crate::report::table::{Align, Table};
use crate::results::{Group, Row};

/// A line of the table and chart: a backend, alone or behind a proxy.
fn series(group: &Group) -> Vec<(&str, Option<&str>)> {
    let mut out: Vec<(&str, Option<&str>)> = Vec::new();
    for row in &group.rows {
        let key = (backend(row), via(row));
        if !out.contains(&key) {
            out.push(key);
        }
    }
    out
}

fn name((backend, via): (&str, Option<&str>)) -> String {
    match via {
        Some(proxy) => format!("{proxy} -> {backend}"),
        None => backend.to_string(),
    }
}

fn at<'a>(group: &'a Group, key: (&str, Option<&str>), users: f64) -> Option<&'a Row> {
    group
        .rows
        .iter()
        .find(|r| (backend(r), via(r)) == key && r.sweep.as_ref().is_some_and(|s| s.value == users))
}

pub(super) fn table(group: &Group) -> Option<(Table, String)> {
    let series = series(group);
    // A line per backend and user count: the seed's figure, the answered
    // rate and what did not come back fit a terminal this way round.
    let mut t = Table::new()
        .col("users", Align::Right)
        .col("backend", Align::Left)
        .col("p95", Align::Right)
        .col("answered/s", Align::Right)
        .col("failed", Align::Right)
        .col("unanswered", Align::Right);
    for value in sweep_values(group) {
        for key in &series {
            let Some(row) = at(group, *key, value) else {
                continue;
            };
            t.push(vec![
                fmt::value(value),
                format!("{}{}", name(*key), mark(row)),
                fmt::micros(row.figures.latency.p95_us as f64),
                fmt::count(row.figures.requests_per_sec),
                failures(row),
                fmt::count(row.figures.unanswered as f64),
            ]);
        }
    }
    let think = group
        .rows
        .first()
        .and_then(|r| r.load.think_ms)
        .map_or(String::new(), |[lo, hi]| {
            format!(", thinking {lo}-{hi} ms between requests")
        });
    let caption = format!(
        "seeds/003's figure, a line per backend and number of users: p95 latency, the \
         requests answered per second, the requests that \
         failed (timeouts, refused connections, answers that were not 2xx; summed over the \
         rounds) and those still unanswered when the measured time ended (neither answered \
         nor failed: a backend that falls behind holds them; medians over the rounds), \
         users{think}, each posting the seed's message to its passthrough, which \
         forwards it to a downstream that waits before answering. Each row started once its \
         backend had worked off the row before it; a backend marked{mark} is not comparable \
         (its window was shorter than 3x the latency it saw, or its backend never drained: \
         the lines under every row say why). \
         The seed found Spring Boot 1 (blocking) failing and slow from 3,000 users while \
         WebFlux kept p95 near 312 ms at 5,000.",
        mark = crate::report::build::NOT_COMPARABLE_MARK
    );
    (!t.is_empty()).then_some((t, caption))
}

pub(super) fn chart(group: &Group) -> String {
    let lines = series(group)
        .into_iter()
        .map(|key| Series {
            name: name(key),
            color: color(key.0).into(),
            dashed: key.1.is_some(),
            points: group
                .rows
                .iter()
                .filter(|r| (backend(r), via(r)) == key)
                .filter_map(|r| {
                    let users = r.sweep.as_ref()?.value;
                    Some((users, r.figures.latency.p95_us as f64 / 1000.0))
                })
                .collect(),
        })
        .collect();
    svg::line_chart(&LineChart {
        title: format!(
            "{}: p95 latency vs users (behind sluice dashed)",
            group.title
        ),
        x_label: "users".into(),
        y_label: "p95 latency, ms".into(),
        series: lines,
    })
}

/// A row's mark when it is not comparable.
fn mark(row: &Row) -> &'static str {
    if crate::window::comparable(row) {
        ""
    } else {
        crate::report::build::NOT_COMPARABLE_MARK
    }
}

/// A row's figures: "3.06s, 658/s answered, 0 failed, 2,004 unanswered",
/// marked when the row is not comparable.
fn cell(row: &Row) -> String {
    let mark = mark(row);
    format!(
        "{}, {}/s answered, {} failed, {} unanswered{mark}",
        fmt::micros(row.figures.latency.p95_us as f64),
        fmt::count(row.figures.requests_per_sec),
        failures(row),
        fmt::count(row.figures.unanswered as f64)
    )
}

/// `at 5,000 users, p95: spring-mvc 3.56s, 667/s answered, 0 failed, 4,012
/// unanswered; ...`.
pub(super) fn line(group: &Group) -> String {
    let Some(top) = sweep_values(group).last().copied() else {
        return "no sweep".into();
    };
    let parts: Vec<String> = series(group)
        .into_iter()
        .filter_map(|key| {
            let row = at(group, key, top)?;
            Some(format!("{} {}", name(key), cell(row)))
        })
        .collect();
    format!("at {} users, p95: {}", fmt::value(top), parts.join("; "))
}
