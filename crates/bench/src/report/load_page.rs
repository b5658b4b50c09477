//! `sluice load --html FILE`: a load run's report as one self-contained,
//! well-formed XHTML page in report.html's style (inline style and SVG,
//! no script, nothing fetched): the verdicts, then per scenario its
//! latency percentiles and rate over time, errors and checks over time,
//! and the tables of phases, stages, checks and statuses.

use std::fmt::Write as _;

use load::{format_count, format_us, plan::PlanReport, IntervalSummary, LatencySummary, Report};

use super::html::{anchor, page_start};
use super::svg::{line_chart, LineChart, Series};
use super::table::{esc, Align, Table};

const P50: &str = "#1f6fb4";
const P90: &str = "#2a9d3a";
const P99: &str = "#d0542c";
const MAX: &str = "#777777";
const TARGET: &str = "#8e5cc4";

/// The page.
pub(super) fn load_page(report: &PlanReport) -> String {
    let mut out = page_start(
        "sluice load report",
        "p.pass { color: #1b7a33; font-weight: bold; } p.fail { color: #b3261e; font-weight: bold; }\n",
    );
    let thresholds: Vec<_> = report.all_thresholds().collect();
    let failed = thresholds.iter().filter(|t| !t.passed).count();
    let verdict = match (&report.aborted, failed) {
        (Some(why), _) => format!("Stopped early: {why}"),
        (None, 0) if thresholds.is_empty() => "No thresholds.".to_string(),
        (None, 0) => format!("All {} thresholds passed.", thresholds.len()),
        (None, n) => format!("{n} of {} thresholds failed.", thresholds.len()),
    };
    let class = if report.passed { "pass" } else { "fail" };
    let _ = writeln!(
        out,
        "<p>{}, {} scenario(s), {:.1} s.</p>\n<p class=\"{class}\" id=\"verdict\">{}</p>",
        esc(&report.tool),
        report.scenarios.len(),
        report.elapsed_s,
        esc(&verdict)
    );
    if !thresholds.is_empty() {
        let mut table = Table::new()
            .col("verdict", Align::Left)
            .col("threshold", Align::Left)
            .col("on", Align::Left)
            .col("observed", Align::Left);
        for t in &thresholds {
            table.push(vec![
                if t.passed { "passed" } else { "FAILED" }.into(),
                t.threshold.clone(),
                t.scenario.clone().unwrap_or_else(|| "all scenarios".into()),
                t.observed.clone(),
            ]);
        }
        out.push_str("<h2 id=\"thresholds\">Thresholds</h2>\n");
        out.push_str(&table.html("thresholds"));
    }
    for scenario in &report.scenarios {
        out.push_str(&scenario_section(scenario));
    }
    if let Some(all) = &report.overall {
        out.push_str("<h2 id=\"overall\">All scenarios together</h2>\n");
        out.push_str(&summary_table(all).html("summary"));
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn scenario_section(report: &Report) -> String {
    let name = report.scenario.as_deref().unwrap_or("default");
    let c = &report.config;
    let mut out = format!(
        "<h2 id=\"s-{}\">Scenario {}</h2>\n",
        esc(&anchor(name)),
        esc(name)
    );
    let model = match (&c.stages, c.rate) {
        (Some(stages), Some(_)) => format!("open model, {} rate stages", stages.steps.len()),
        (None, Some(rate)) => format!("open model at {} req/s", format_count(rate)),
        (Some(stages), None) => format!("closed model, {} user stages", stages.steps.len()),
        (None, None) => format!("closed model, {} connections", c.connections),
    };
    let _ = writeln!(
        out,
        "<p>{} on {}: {}, {} thread(s), {} connection(s); {} requests in {:.2} s.</p>",
        esc(&c.protocol.to_string()),
        esc(&c.target),
        esc(&model),
        c.threads,
        c.connections,
        report.requests,
        report.elapsed_s
    );
    out.push_str(&summary_table(report).html("summary"));
    out.push_str(&charts(report));
    if !report.checks.is_empty() {
        let mut table = Table::new()
            .col("check", Align::Left)
            .col("passed", Align::Right)
            .col("failed", Align::Right)
            .col("passed %", Align::Right);
        for check in &report.checks {
            table.push(vec![
                check.name.clone(),
                check.passed.to_string(),
                check.failed.to_string(),
                format!("{:.3}", check.passed_pct()),
            ]);
        }
        out.push_str("<h3>Checks</h3>\n");
        out.push_str(&table.html("checks"));
    }
    let phases = [
        ("dns", &report.phases.dns),
        ("connect", &report.phases.connect),
        ("tls", &report.phases.tls),
        ("waiting (to first byte)", &report.phases.waiting),
        ("receiving", &report.phases.receiving),
    ];
    let mut table = Table::new()
        .col("phase", Align::Left)
        .col("count", Align::Right)
        .col("p50", Align::Right)
        .col("p90", Align::Right)
        .col("p99", Align::Right)
        .col("max", Align::Right);
    for (phase, summary) in phases.iter().filter(|(_, s)| s.count > 0) {
        table.push(percentile_cells(phase, summary));
    }
    if !table.is_empty() {
        out.push_str("<h3>Phases</h3>\n");
        out.push_str(&table.html("phases"));
    }
    if !report.stages.is_empty() {
        let mut table = Table::new()
            .col("stage", Align::Right)
            .col("from s", Align::Right)
            .col("seconds", Align::Right)
            .col("target from", Align::Right)
            .col("target to", Align::Right)
            .col("due", Align::Right)
            .col("sent", Align::Right)
            .col("requests", Align::Right)
            .col("achieved/s", Align::Right);
        for s in &report.stages {
            table.push(vec![
                s.stage.to_string(),
                format!("{:.1}", s.start_s),
                format!("{:.1}", s.duration_s),
                format!("{:.0}", s.from),
                format!("{:.0}", s.to),
                s.due.map_or("-".into(), |d| format!("{d:.0}")),
                s.sent.map_or("-".into(), |n| n.to_string()),
                s.requests.to_string(),
                format!("{:.1}", s.achieved_rate),
            ]);
        }
        out.push_str("<h3>Stages</h3>\n");
        out.push_str(&table.html("stages"));
    }
    let mut table = Table::new()
        .col("status", Align::Left)
        .col("responses", Align::Right);
    for (code, n) in &report.status {
        table.push(vec![code.to_string(), n.to_string()]);
    }
    if !table.is_empty() {
        out.push_str("<h3>Statuses</h3>\n");
        out.push_str(&table.html("statuses"));
    }
    out
}

fn percentile_cells(label: &str, s: &LatencySummary) -> Vec<String> {
    vec![
        label.to_string(),
        s.count.to_string(),
        format_us(s.at(50.0) as f64),
        format_us(s.at(90.0) as f64),
        format_us(s.at(99.0) as f64),
        format_us(s.max_us as f64),
    ]
}

/// Requests, rate, errors and the latency percentiles.
fn summary_table(report: &Report) -> Table {
    let mut table = Table::new()
        .col("requests", Align::Right)
        .col("req/s", Align::Right)
        .col("errors", Align::Right)
        .col("non-2xx/3xx", Align::Right)
        .col("p50", Align::Right)
        .col("p90", Align::Right)
        .col("p99", Align::Right)
        .col("p99.9", Align::Right)
        .col("max", Align::Right);
    let l = &report.latency;
    let e = &report.errors;
    let errors = if e.total() == 0 {
        "0".to_string()
    } else {
        let kinds: Vec<String> = e
            .by_kind()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        kinds.join(", ")
    };
    table.push(vec![
        report.requests.to_string(),
        format!("{:.1}", report.requests_per_sec),
        errors,
        report.non_2xx_3xx.to_string(),
        format_us(l.at(50.0) as f64),
        format_us(l.at(90.0) as f64),
        format_us(l.at(99.0) as f64),
        format_us(l.at(99.9) as f64),
        format_us(l.max_us as f64),
    ]);
    table
}

/// Latency percentiles, rate and failures over time, from the intervals.
fn charts(report: &Report) -> String {
    // A last interval cut short (the run ends a little after a whole
    // second) would draw a rate from a few milliseconds: left out.
    let intervals: Vec<&IntervalSummary> = report
        .intervals
        .iter()
        .filter(|i| i.duration_s >= 0.5)
        .collect();
    if intervals.is_empty() {
        return "<p class=\"empty\">No intervals were kept: no charts over time.</p>\n".into();
    }
    let name = report.scenario.as_deref().unwrap_or("default");
    let at = |i: &IntervalSummary| i.start_s + i.duration_s;
    let line =
        |label: &str, color: &str, dashed: bool, value: &dyn Fn(&IntervalSummary) -> f64| Series {
            name: label.into(),
            color: color.into(),
            dashed,
            points: intervals.iter().map(|i| (at(i), value(i))).collect(),
        };
    let ms = |us: u64| us as f64 / 1000.0;
    let corrected = if report.uncorrected_latency.is_some() {
        " (from each request's intended send time)"
    } else {
        ""
    };
    let mut out = line_chart(&LineChart {
        title: format!("{name}: latency percentiles over time{corrected}"),
        x_label: "seconds".into(),
        y_label: "ms".into(),
        series: vec![
            line("p50", P50, false, &|i| ms(i.p50_us)),
            line("p90", P90, false, &|i| ms(i.p90_us)),
            line("p99", P99, false, &|i| ms(i.p99_us)),
            line("max", MAX, true, &|i| ms(i.max_us)),
        ],
    });
    let rate = |i: &IntervalSummary| i.requests as f64 / i.duration_s.max(1e-9);
    let mut series = vec![line("responses/s", P50, false, &rate)];
    let c = &report.config;
    if let Some(peak_share) = c.rate {
        let target = |i: &IntervalSummary| match &c.stages {
            Some(stages) if stages.peak() > 0.0 => {
                stages.value_at(i.start_s + i.duration_s / 2.0) * peak_share / stages.peak()
            }
            _ => peak_share,
        };
        series.push(line("target rate", TARGET, true, &target));
    }
    out.push_str(&line_chart(&LineChart {
        title: format!("{name}: rate over time"),
        x_label: "seconds".into(),
        y_label: "per second".into(),
        series,
    }));
    if let (Some(stages), None) = (&c.stages, c.rate) {
        out.push_str(&line_chart(&LineChart {
            title: format!("{name}: users asked for"),
            x_label: "seconds".into(),
            y_label: "users".into(),
            series: vec![line("users", TARGET, true, &|i| stages.value_at(i.start_s))],
        }));
    }
    let mut failures = vec![
        line("errors", P99, false, &|i| i.errors as f64),
        line("non-2xx/3xx", MAX, false, &|i| i.non_2xx_3xx as f64),
    ];
    if !report.checks.is_empty() {
        failures.push(line("failed checks", TARGET, false, &|i| {
            i.checks_failed as f64
        }));
        failures.push(line("passed checks", P90, true, &|i| {
            i.checks_passed as f64
        }));
    }
    out.push_str(&line_chart(&LineChart {
        title: format!("{name}: errors and checks over time"),
        x_label: "seconds".into(),
        y_label: "count".into(),
        series: failures,
    }));
    out
}
