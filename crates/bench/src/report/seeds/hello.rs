//! seeds/001: the hello world of each runtime, pipelined 16 deep.

use super::{backend, color};
use crate::fmt;
use crate::report::svg::{self, Bar, BarChart, BarRow};
use crate::report::table::{Align, Table};
use crate::results::{Group, Row};

/// seeds/001's light-java, the fast server its others are read against:
/// `wrk -t4 -c128 -d30s -s pipeline.lua -- / 16`, requests/s.
const LIGHT_JAVA: f64 = 1_457_257.99;

/// seeds/001's counterpart of each backend here and its requests/s.
fn published(backend: &str) -> Option<(&'static str, f64)> {
    Some(match backend {
        "sluice serve" => ("light-java", LIGHT_JAVA),
        "spring-mvc" => ("Spring Tomcat", 33_086.22),
        "webflux" => ("Spring Reactor", 243_240.17),
        "go-http" => ("Go net/http", 170_313.02),
        "node" => ("Node express", 42_443.34),
        _ => return None,
    })
}

/// A row whose failed requests outnumber its answers is not serving:
/// its rate is no speed to divide by (Envoy's `direct_response` answers
/// the first of a connection's pipelined requests and closes it).
fn failing(row: &Row) -> bool {
    row.figures.errors.total() > row.figures.requests
}

/// The `sluice serve` row everything is read against.
fn reference(group: &Group) -> Option<&Row> {
    group.rows.iter().find(|r| backend(r) == "sluice serve")
}

pub(super) fn table(group: &Group) -> (Table, String) {
    let mut t = Table::new()
        .col("Backend", Align::Left)
        .col("Requests/sec", Align::Right)
        .col("Avg Latency", Align::Right)
        .col("Transfer/sec", Align::Right)
        .col("Errors", Align::Right)
        .col("sluice serve ÷ it", Align::Right)
        .col("seeds/001 counterpart", Align::Left)
        .col("its light-java ÷ it", Align::Right);
    let sluice = reference(group).map(|r| r.figures.requests_per_sec);
    for row in &group.rows {
        let f = &row.figures;
        let (counterpart, seed) = match published(backend(row)) {
            Some((name, rps)) => (
                format!("{name}: {}", fmt::count(rps)),
                fmt::times(fmt::ratio(LIGHT_JAVA, rps)),
            ),
            None => ("-".into(), "-".into()),
        };
        t.push(vec![
            backend(row).to_string(),
            fmt::count(f.requests_per_sec),
            fmt::micros(f.latency.avg_us),
            format!("{}/s", fmt::bytes(f.bytes_per_sec)),
            fmt::count(f.errors.total() as f64),
            match failing(row) {
                true => "- (failing)".into(),
                false => fmt::times(sluice.and_then(|s| fmt::ratio(s, f.requests_per_sec))),
            },
            counterpart,
            seed,
        ]);
    }
    let caption = "seeds/001's table: hello-world requests/s with 16 requests pipelined on each \
                   connection (`wrk -t4 -c128 -s pipeline.lua -- / 16`). \"sluice serve ÷ it\" \
                   reads each backend against sluice serve here, as \"its light-java ÷ it\" \
                   reads the seed's counterpart against light-java there: compare those two \
                   ratios, not the absolute numbers (the machines differ). A backend whose \
                   failed requests outnumber its answers gets no ratio: it is not serving."
        .to_string();
    (t, caption)
}

pub(super) fn chart(group: &Group) -> String {
    let mut legend: Vec<(String, String)> = Vec::new();
    let rows = group
        .rows
        .iter()
        .map(|row| {
            let name = backend(row);
            if !legend.iter().any(|(n, _)| n == name) {
                legend.push((name.to_string(), color(name).to_string()));
            }
            BarRow {
                label: name.to_string(),
                bars: vec![Bar {
                    value: row.figures.requests_per_sec,
                    color: color(name).into(),
                    text: fmt::count(row.figures.requests_per_sec),
                }],
            }
        })
        .collect();
    svg::bar_chart(&BarChart {
        title: format!("{}: requests/s, pipelined 16 deep (log scale)", group.title),
        x_label: "requests/s (log scale)".into(),
        rows,
        legend,
        log: true,
    })
}

/// `sluice serve 512,004 req/s; go-http 0.31x, node 0.12x, spring-mvc
/// 0.04x of it (seeds/001: 0.12x, 0.03x, 0.02x of light-java)`.
pub(super) fn line(group: &Group) -> String {
    let Some(sluice) = reference(group) else {
        return format!("{} rows", group.rows.len());
    };
    let base = sluice.figures.requests_per_sec;
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for row in group.rows.iter().filter(|r| backend(r) != "sluice serve") {
        let name = backend(row);
        if failing(row) {
            ours.push(format!("{name} failing"));
        } else {
            let ratio = fmt::times(fmt::ratio(row.figures.requests_per_sec, base));
            ours.push(format!("{name} {ratio}"));
        }
        if let Some((_, rps)) = published(name) {
            theirs.push(format!(
                "{name} {}",
                fmt::times(fmt::ratio(rps, LIGHT_JAVA))
            ));
        }
    }
    let mut line = format!(
        "sluice serve {} req/s; {} of it",
        fmt::count(base),
        ours.join(", ")
    );
    if !theirs.is_empty() {
        line.push_str(&format!(
            " (seeds/001, of light-java: {})",
            theirs.join(", ")
        ));
    }
    line
}
