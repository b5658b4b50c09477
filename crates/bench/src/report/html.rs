//! report.html: one self-contained, well-formed XHTML file (inline style,
//! inline SVG charts, no scripts and nothing fetched).

use std::fmt::Write as _;

use super::build;
use super::compare;
use super::fmt;
use super::seeds;
use super::summary;
use super::svg::{self, Bar, BarChart, BarRow, LineChart, Series};
use super::table::esc;
use crate::results::{Group, Results, Row};

const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
h3 { margin-top: 1.4em; }
p.q { font-style: italic; color: #444; }
p.empty { color: #777; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.85em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.5em; text-align: left; white-space: nowrap; }
th { background: #f3f3f3; }
td.r, th.r { text-align: right; font-variant-numeric: tabular-nums; }
tr.strong td { font-weight: bold; background: #fbf6e5; }
div.wide { overflow-x: auto; }
svg.chart { display: block; max-width: 100%; height: auto; margin: 1em 0; border: 1px solid #eee; }
ul.ratios li, ul.notes li { margin: 0.15em 0; }
nav a { margin-right: 0.8em; }
";

pub(super) fn html(results: &Results) -> String {
    let mut out = String::new();
    out.push_str(
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n\
         <meta charset=\"utf-8\"/>\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n\
         <title>sluice bench report</title>\n<style>",
    );
    out.push_str(STYLE);
    out.push_str("</style>\n</head>\n<body>\n<h1>sluice bench report</h1>\n");
    let _ = writeln!(
        out,
        "<p>Run started {}, took {}; results schema <code>{}</code>.</p>",
        esc(&results.started),
        esc(&fmt::elapsed(results.elapsed_s)),
        esc(&results.schema)
    );
    out.push_str(
        "<p>Latency is measured by the load generator; in the open model it counts from each \
         request's intended send time. Transfer counts response bytes, headers included. Peak \
         RSS and CPU are the system under test's process (the proxy; the backend when it is \
         loaded alone).</p>\n",
    );

    // Contents.
    out.push_str("<nav><a href=\"#machine\">Machine</a><a href=\"#summary\">Summary</a><a href=\"#charts\">Charts</a>");
    for g in &results.groups {
        let _ = write!(
            out,
            "<a href=\"#g-{}\">{}</a>",
            esc(&anchor(&g.name)),
            esc(&g.name)
        );
    }
    out.push_str("</nav>\n");

    out.push_str("<h2 id=\"machine\">Machine</h2>\n");
    out.push_str(&build::machine_table(results).html("kv"));
    out.push_str("<h2 id=\"settings\">Settings</h2>\n");
    out.push_str(&build::settings_table(results).html("kv"));
    out.push_str("<h2 id=\"notes\">Notes</h2>\n");
    out.push_str(&list(&results.notes, "notes", "None."));

    out.push_str("<h2 id=\"summary\">Summary</h2>\n<h3>Baseline Summary</h3>\n");
    let baseline = summary::baseline_summary(results);
    if baseline.is_empty() {
        out.push_str("<p class=\"empty\">No baseline rows.</p>\n");
    } else {
        out.push_str(&baseline.html("summary"));
    }
    out.push_str("<h3>Proxy Summary</h3>\n");
    let proxy = summary::proxy_summary(results);
    if proxy.is_empty() {
        out.push_str("<p class=\"empty\">No baseline or proxy rows.</p>\n");
    } else {
        out.push_str(&proxy.html("summary"));
        if proxy.strong.iter().any(|s| *s) {
            let _ = writeln!(out, "<p>{}</p>", esc(summary::TIMES_NOTE));
        }
    }
    let others: Vec<String> = results
        .groups
        .iter()
        .filter(|g| g.name != "baseline" && g.name != "proxy")
        .map(summary::group_line)
        .collect();
    if !others.is_empty() {
        out.push_str("<h3>Other groups</h3>\n");
        out.push_str(&list(&others, "notes", ""));
    }

    out.push_str("<h2 id=\"charts\">Charts</h2>\n");
    out.push_str(&charts(results));

    for group in &results.groups {
        out.push_str(&group_section(group));
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// An id fragment made of letters, digits and dashes.
fn anchor(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn list(items: &[String], class: &str, empty: &str) -> String {
    if items.is_empty() {
        return if empty.is_empty() {
            String::new()
        } else {
            format!("<p class=\"empty\">{}</p>\n", esc(empty))
        };
    }
    let mut out = format!("<ul class=\"{}\">\n", esc(class));
    for item in items {
        let _ = writeln!(out, "<li>{}</li>", esc(item));
    }
    out.push_str("</ul>\n");
    out
}

fn group_section(group: &Group) -> String {
    let mut out = format!(
        "<h2 id=\"g-{}\">{} <small>(<code>{}</code>)</small></h2>\n",
        esc(&anchor(&group.name)),
        esc(&group.title),
        esc(&group.name)
    );
    if !group.question.is_empty() {
        let _ = writeln!(out, "<p class=\"q\">{}</p>", esc(&group.question));
    }
    if let Some((table, caption)) = seeds::table(group) {
        let _ = writeln!(out, "<p>{}</p>", esc(&caption));
        out.push_str("<div class=\"wide\">\n");
        out.push_str(&table.html("seed"));
        out.push_str("</div>\n");
        out.push_str(&seeds::chart(group).unwrap_or_default());
        if let Some(versions) = seeds::versions(group) {
            out.push_str("<p>Versions:</p>\n");
            out.push_str(&versions.html("kv"));
            let _ = writeln!(out, "<p>{}</p>", esc(seeds::VERSIONS_NOTE));
        }
        out.push_str("<p>Every row:</p>\n");
    }
    if group.rows.is_empty() {
        out.push_str("<p class=\"empty\">No rows.</p>\n");
    } else {
        out.push_str("<div class=\"wide\">\n");
        out.push_str(&build::rows_table(group, true).html("rows"));
        out.push_str("</div>\n");
    }
    if let Some(pivot) = summary::pivot(group).filter(|_| !seeds::is_seed(group)) {
        if !pivot.is_empty() {
            let _ = writeln!(out, "<p>{}</p>", esc(&summary::pivot_caption(group)));
            out.push_str("<div class=\"wide\">\n");
            out.push_str(&pivot.html("pivot"));
            out.push_str("</div>\n");
        }
    }
    let caveats = build::caveat_lines(group);
    if !caveats.is_empty() {
        out.push_str("<p>Not comparable:</p>\n");
        out.push_str(&list(&caveats, "notes", ""));
    }
    if !group.notes.is_empty() {
        out.push_str("<p>Notes:</p>\n");
        out.push_str(&list(&group.notes, "notes", ""));
    }
    let ratios = compare::ratios(group);
    if !ratios.is_empty() {
        out.push_str("<p>Ratios:</p>\n");
        out.push_str(&list(&ratios, "ratios", ""));
    }
    out
}

fn rows_of<'a>(results: &'a Results, names: &[&str]) -> Vec<(&'a Group, &'a Row)> {
    results
        .groups
        .iter()
        .filter(|g| names.contains(&g.name.as_str()))
        .flat_map(|g| g.rows.iter().map(move |r| (g, r)))
        .collect()
}

/// The systems in order of appearance, as legend entries.
fn system_legend<'a>(systems: impl Iterator<Item = &'a str>) -> Vec<(String, String)> {
    let mut legend: Vec<(String, String)> = Vec::new();
    for s in systems {
        if !legend.iter().any(|(n, _)| n == s) {
            legend.push((s.to_owned(), svg::system_color(s).to_owned()));
        }
    }
    legend
}

fn skipped(what: &str) -> String {
    format!("<p class=\"empty\">{}</p>\n", esc(what))
}

fn charts(results: &Results) -> String {
    let mut out = String::new();
    out.push_str(&throughput_chart(results));
    out.push_str(&latency_chart(results));
    out.push_str(&lb_charts(results));
    out.push_str(&io_chart(results));
    out.push_str(&open_charts(results));
    out.push_str(&rss_chart(results));
    out
}

/// A bar chart's rows, each with the system its figures are of.
pub(super) type SystemBars<'a> = Vec<(&'a str, BarRow)>;

/// The rows of a chart whose bars are coloured by system, and its legend:
/// one entry per system, a policy's bars under the proxy that runs it.
fn by_system(bars: SystemBars<'_>) -> (Vec<BarRow>, Vec<(String, String)>) {
    let legend = system_legend(bars.iter().map(|(system, _)| build::base_system(system)));
    (bars.into_iter().map(|(_, bar)| bar).collect(), legend)
}

/// A bar's colour: its proxy's, for systems that are a proxy's policy
/// ("sluice least_request", "haproxy least_conn"), which would otherwise
/// share a few spare colours among themselves and look alike.
fn bar_color(system: &str) -> &'static str {
    svg::system_color(build::base_system(system))
}

/// (a) Requests/s of every throughput row, coloured by system.
fn throughput_chart(results: &Results) -> String {
    let bars = throughput_bars(results);
    if bars.is_empty() {
        return skipped(
            "Throughput chart: no rows in the baseline, proxy, middleware or protocols groups.",
        );
    }
    let (rows, legend) = by_system(bars);
    let chart = BarChart {
        title: "Throughput per scenario".into(),
        x_label: "requests/s".into(),
        rows,
        legend,
        log: false,
    };
    svg::bar_chart(&chart)
}

pub(super) fn throughput_bars(results: &Results) -> SystemBars<'_> {
    rows_of(results, &["baseline", "proxy", "middleware", "protocols"])
        .into_iter()
        .map(|(g, r)| {
            let bar = BarRow {
                label: build::chart_label(g, r),
                bars: vec![Bar {
                    value: r.figures.requests_per_sec,
                    color: bar_color(&r.system).into(),
                    text: fmt::count(r.figures.requests_per_sec),
                }],
            };
            (r.system.as_str(), bar)
        })
        .collect()
}

const PERCENTILES: [(&str, &str); 4] = [
    ("p50", "#9ecae1"),
    ("p90", "#6baed6"),
    ("p99", "#3182bd"),
    ("p99.9", "#08519c"),
];

/// (b) p50/p90/p99/p99.9 of the baseline, proxy and protocols rows, log axis.
fn latency_chart(results: &Results) -> String {
    let bars = latency_bars(results);
    if bars.is_empty() {
        return skipped("Latency chart: no rows in the baseline, proxy or protocols groups.");
    }
    let chart = BarChart {
        title: "Latency percentiles (log scale)".into(),
        x_label: "latency, ms (log scale)".into(),
        rows: bars.into_iter().map(|(_, bar)| bar).collect(),
        legend: PERCENTILES
            .iter()
            .map(|(n, c)| ((*n).to_owned(), (*c).to_owned()))
            .collect(),
        log: true,
    };
    svg::bar_chart(&chart)
}

pub(super) fn latency_bars(results: &Results) -> SystemBars<'_> {
    rows_of(results, &["baseline", "proxy", "protocols"])
        .into_iter()
        .map(|(g, r)| {
            let l = &r.figures.latency;
            let values = [l.p50_us, l.p90_us, l.p99_us, l.p999_us];
            let bar = BarRow {
                label: build::chart_label(g, r),
                bars: values
                    .iter()
                    .zip(PERCENTILES)
                    .map(|(us, (name, color))| Bar {
                        value: *us as f64 / 1000.0,
                        color: color.into(),
                        text: format!("{name} {}", fmt::micros(*us as f64)),
                    })
                    .collect(),
            };
            (r.system.as_str(), bar)
        })
        .collect()
}

/// The group whose rows sweep `sweep`, preferring the group named `name`.
fn sweep_group<'a>(results: &'a Results, name: &str, sweep: &str) -> Option<&'a Group> {
    summary::group(results, name)
        .filter(|g| build::sweep_name(g) == Some(sweep))
        .or_else(|| {
            results
                .groups
                .iter()
                .find(|g| !seeds::is_seed(g) && build::sweep_name(g) == Some(sweep))
        })
}

/// One series per system (and phase): the metric at each sweep value.
fn sweep_series(group: &Group, phase: Option<&str>, metric: fn(&Row) -> f64) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for row in &group.rows {
        let Some(point) = &row.sweep else { continue };
        if phase.is_some() && row.phase.as_deref() != phase {
            continue;
        }
        let name = match &row.phase {
            Some(p) => format!("{} {p}", row.system),
            None => row.system.clone(),
        };
        let index = match series.iter().position(|s| s.name == name) {
            Some(i) => i,
            None => {
                series.push(Series {
                    name: name.clone(),
                    color: svg::system_color(&row.system).into(),
                    dashed: row.phase.as_deref() == Some("cold"),
                    points: Vec::new(),
                });
                series.len() - 1
            }
        };
        // The first row at a value wins, as in the pivot tables.
        if !series[index].points.iter().any(|p| p.0 == point.value) {
            series[index].points.push((point.value, metric(row)));
        }
    }
    series
}

/// (c) The lb sweep: req/s and mean latency against connections.
fn lb_charts(results: &Results) -> String {
    let Some(group) = sweep_group(results, "lb", "connections").filter(|g| !g.rows.is_empty())
    else {
        return skipped("Concurrency sweep charts: the lb group has no rows.");
    };
    let mut out = svg::line_chart(&LineChart {
        title: format!("{}: throughput vs connections", group.title),
        x_label: "connections".into(),
        y_label: "requests/s".into(),
        series: sweep_series(group, None, |r| r.figures.requests_per_sec),
    });
    out.push_str(&svg::line_chart(&LineChart {
        title: format!("{}: mean latency vs connections", group.title),
        x_label: "connections".into(),
        y_label: "mean latency, ms".into(),
        series: sweep_series(group, None, |r| r.figures.latency.avg_us / 1000.0),
    }));
    out
}

/// (d) The io sweep: p95 against users.
fn io_chart(results: &Results) -> String {
    let Some(group) = sweep_group(results, "io", "users").filter(|g| !g.rows.is_empty()) else {
        return skipped("Users sweep chart: the io group has no rows.");
    };
    svg::line_chart(&LineChart {
        title: format!("{}: p95 latency vs users", group.title),
        x_label: "users".into(),
        y_label: "p95 latency, ms".into(),
        series: sweep_series(group, None, |r| r.figures.latency.p95_us as f64 / 1000.0),
    })
}

/// (e) The open model: p95 and p99 against the arrival rate, cold dashed.
fn open_charts(results: &Results) -> String {
    let Some(group) = sweep_group(results, "open", "rate").filter(|g| !g.rows.is_empty()) else {
        return skipped("Open model charts: the open group has no rows.");
    };
    let mut out = svg::line_chart(&LineChart {
        title: format!("{}: p95 latency vs arrival rate (cold dashed)", group.title),
        x_label: "requests/s asked for".into(),
        y_label: "p95 latency, ms".into(),
        series: sweep_series(group, None, |r| r.figures.latency.p95_us as f64 / 1000.0),
    });
    out.push_str(&svg::line_chart(&LineChart {
        title: format!("{}: p99 latency vs arrival rate (cold dashed)", group.title),
        x_label: "requests/s asked for".into(),
        y_label: "p99 latency, ms".into(),
        series: sweep_series(group, None, |r| r.figures.latency.p99_us as f64 / 1000.0),
    }));
    out
}

/// (f) Peak RSS: each row of the throughput groups, and the highest per
/// system over each sweep (the runtimes groups, whose backends share the
/// system `backend`, show theirs in their rows).
fn rss_chart(results: &Results) -> String {
    let bars = rss_bars(results);
    if bars.is_empty() {
        return skipped("Memory chart: no row has process figures.");
    }
    let (rows, legend) = by_system(bars);
    svg::bar_chart(&BarChart {
        title: "Peak RSS of the system under test".into(),
        x_label: "MiB".into(),
        rows,
        legend,
        log: false,
    })
}

pub(super) fn rss_bars(results: &Results) -> SystemBars<'_> {
    let bar = |label: String, system: &str, kib: u64| BarRow {
        label,
        bars: vec![Bar {
            value: kib as f64 / 1024.0,
            color: bar_color(system).into(),
            text: format!("{} MiB", fmt::mib(kib)),
        }],
    };
    let mut bars = Vec::new();
    for group in results.groups.iter().filter(|g| !seeds::is_seed(g)) {
        if build::sweep_name(group).is_some() {
            let mut peaks: Vec<(&str, u64)> = Vec::new();
            for row in &group.rows {
                let Some(p) = &row.figures.process else {
                    continue;
                };
                match peaks.iter_mut().find(|(s, _)| *s == row.system) {
                    Some((_, peak)) => *peak = (*peak).max(p.peak_rss_kib),
                    None => peaks.push((&row.system, p.peak_rss_kib)),
                }
            }
            for (system, kib) in peaks {
                let label = format!("{}: {system} (highest over the sweep)", group.name);
                bars.push((system, bar(label, system, kib)));
            }
        } else {
            for row in &group.rows {
                let Some(p) = &row.figures.process else {
                    continue;
                };
                let label = build::chart_label(group, row);
                bars.push((row.system.as_str(), bar(label, &row.system, p.peak_rss_kib)));
            }
        }
    }
    bars
}
