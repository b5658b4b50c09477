//! seeds/003: users with think time in front of a slow downstream, p95
//! and failures per user count, blocking against non-blocking.

use super::{backend, color, failures, via};
use crate::report::fmt;
use crate::report::summary::sweep_values;
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
    let mut t = Table::new().col("users", Align::Right);
    for key in &series {
        t = t.col(&name(*key), Align::Right);
    }
    for value in sweep_values(group) {
        let mut cells = vec![fmt::value(value)];
        for key in &series {
            cells.push(at(group, *key, value).map_or("-".into(), |row| {
                format!(
                    "{}, {}/s, {} failed",
                    fmt::micros(row.figures.latency.p95_us as f64),
                    fmt::count(row.figures.requests_per_sec),
                    failures(row)
                )
            }));
        }
        t.push(cells);
    }
    let think = group
        .rows
        .first()
        .and_then(|r| r.load.think_ms)
        .map_or(String::new(), |[lo, hi]| {
            format!(", thinking {lo}-{hi} ms between requests")
        });
    let caption = format!(
        "seeds/003's figure: p95 latency, the responses per second, and the requests that \
         failed (timeouts, refused connections, answers that were not 2xx; summed over the \
         rounds), per number of users{think}, each posting the seed's message to its passthrough, which \
         forwards it to a downstream that waits before answering. A request still unanswered \
         when the measured time ends counts as neither answered nor failed: a backend that \
         falls behind shows fewer responses per second. The seed found Spring Boot 1 \
         (blocking) failing and slow from 3,000 users while WebFlux kept p95 near 312 ms at \
         5,000."
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

/// `at 5,000 users, p95: spring-mvc 3.56s (667/s, 0 failed); ...`.
pub(super) fn line(group: &Group) -> String {
    let Some(top) = sweep_values(group).last().copied() else {
        return "no sweep".into();
    };
    let parts: Vec<String> = series(group)
        .into_iter()
        .filter_map(|key| {
            let row = at(group, key, top)?;
            Some(format!(
                "{} {} ({}/s, {} failed)",
                name(key),
                fmt::micros(row.figures.latency.p95_us as f64),
                fmt::count(row.figures.requests_per_sec),
                failures(row)
            ))
        })
        .collect();
    format!("at {} users, p95: {}", fmt::value(top), parts.join("; "))
}
