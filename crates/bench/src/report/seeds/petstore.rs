//! seeds/000 question 5: each runtime's petstore alone and behind each
//! proxy, and the ratio behind ÷ alone.

use super::{backend, backends, via};
use crate::fmt;
use crate::report::svg::{self, Bar, BarChart, BarRow};
use crate::report::table::{Align, Table};
use crate::results::{Group, Row};

/// seeds/000's own "behind ÷ alone": its proxied runs were in Docker, so
/// against its Docker baselines (requests/s, pipelined 16 deep).
fn published(backend: &str) -> Option<(&'static str, f64, f64)> {
    Some(match backend {
        "sluice serve" => ("light-4j", 1_478_098.10, 107_411.98),
        "spring-mvc" => ("Spring Boot", 82_037.22, 38_109.76),
        _ => return None,
    })
}

/// The proxies in front, in order of appearance.
fn proxies(group: &Group) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for row in &group.rows {
        if let Some(proxy) = via(row) {
            if !out.contains(&proxy) {
                out.push(proxy);
            }
        }
    }
    out
}

/// A backend's row alone (`proxy` None) or behind `proxy`.
fn find<'a>(group: &'a Group, name: &str, proxy: Option<&str>) -> Option<&'a Row> {
    group
        .rows
        .iter()
        .find(|r| backend(r) == name && via(r) == proxy)
}

fn rps(row: Option<&Row>) -> Option<f64> {
    row.map(|r| r.figures.requests_per_sec)
}

pub(super) fn table(group: &Group) -> (Table, String) {
    let proxies = proxies(group);
    let mut t = Table::new()
        .col("Backend", Align::Left)
        .col("alone req/s", Align::Right);
    for proxy in &proxies {
        t = t.col(&format!("behind {proxy}"), Align::Right);
    }
    t = t.col("seeds/000", Align::Left);
    for name in backends(group) {
        let alone = rps(find(group, name, None));
        let mut cells = vec![name.to_string(), alone.map_or("-".into(), fmt::count)];
        for proxy in &proxies {
            let behind = rps(find(group, name, Some(proxy)));
            let ratio = alone.zip(behind).and_then(|(a, b)| fmt::ratio(b, a));
            cells.push(behind.map_or("-".into(), |b| {
                format!("{} ({})", fmt::count(b), fmt::times(ratio))
            }));
        }
        cells.push(match published(name) {
            Some((seed, alone, behind)) => {
                format!("{} ({seed})", fmt::times(fmt::ratio(behind, alone)))
            }
            None => "-".into(),
        });
        t.push(cells);
    }
    let caption =
        "seeds/000's question 5: requests/s of each backend's `GET /v1/pets` alone, then \
                   behind each proxy (16 requests pipelined on each connection, as the seed's \
                   wrk ran), with the ratio behind ÷ alone: 1.00x means the proxy costs nothing, \
                   0.50x that it halves what the backend serves alone. The last column is the \
                   seed's own ratio, light-proxy in front of its Docker baselines: Spring Boot \
                   82,037 -> 38,110 req/s, light-4j 1,478,098 -> 107,412."
            .to_string();
    (t, caption)
}

pub(super) fn chart(group: &Group) -> String {
    let proxies = proxies(group);
    let mut legend = vec![(
        "alone".to_string(),
        svg::system_color("backend").to_string(),
    )];
    for proxy in &proxies {
        legend.push((
            format!("behind {proxy}"),
            svg::system_color(proxy).to_string(),
        ));
    }
    let rows = backends(group)
        .into_iter()
        .map(|name| {
            let mut bars = Vec::new();
            let mut add = |row: Option<&Row>, key: &str| {
                if let Some(row) = row {
                    bars.push(Bar {
                        value: row.figures.requests_per_sec,
                        color: svg::system_color(key).into(),
                        text: fmt::count(row.figures.requests_per_sec),
                    });
                }
            };
            add(find(group, name, None), "backend");
            for proxy in &proxies {
                add(find(group, name, Some(proxy)), proxy);
            }
            BarRow {
                label: name.to_string(),
                bars,
            }
        })
        .collect();
    svg::bar_chart(&BarChart {
        title: format!(
            "{}: requests/s alone and behind each proxy (log scale)",
            group.title
        ),
        x_label: "requests/s (log scale)".into(),
        rows,
        legend,
        log: true,
    })
}

/// `behind ÷ alone, req/s: spring-mvc sluice 0.95x, haproxy 0.97x; ...`.
pub(super) fn line(group: &Group) -> String {
    let proxies = proxies(group);
    let parts: Vec<String> = backends(group)
        .into_iter()
        .map(|name| {
            let alone = rps(find(group, name, None));
            let ratios: Vec<String> = proxies
                .iter()
                .map(|proxy| {
                    let behind = rps(find(group, name, Some(proxy)));
                    let ratio = alone.zip(behind).and_then(|(a, b)| fmt::ratio(b, a));
                    format!("{proxy} {}", fmt::times(ratio))
                })
                .collect();
            format!("{name} {}", ratios.join(", "))
        })
        .collect();
    format!("behind ÷ alone, req/s: {}", parts.join("; "))
}
