//! The content every output shares: row tables, ratio lines, the
//! Baseline/Proxy summaries with their Times rows, one line per other
//! group, sweep pivots, machine facts and settings.

use super::fmt;
use super::table::{Align, Table};
use crate::results::{Figures, Group, Results, Row};

/// Systems the row labels may name; dropped when labels are compared.
const SYSTEMS: [&str; 4] = ["sluice", "nginx", "haproxy", "backend"];

/// Whether any row of the group has a sweep point or a phase.
fn has_points(group: &Group) -> bool {
    group
        .rows
        .iter()
        .any(|r| r.sweep.is_some() || r.phase.is_some())
}

/// The rows of a group with every metric. `full` (Markdown, HTML) adds the
/// load shape, CPU seconds and the errors' kinds; the terminal table leaves
/// them out to stay within 130 columns ([`error_lines`] has the kinds).
pub(crate) fn rows_table(group: &Group, full: bool) -> Table {
    let points = has_points(group);
    let systems = !full && single_system(group).is_some();
    let labels = full || !points || !point_is_enough(group);
    let mut t = Table::new();
    if labels {
        t = t.col("label", Align::Left);
    }
    if !systems {
        t = t.col("system", Align::Left);
    }
    if points {
        t = t.col("point", Align::Left);
    }
    if full {
        t = t.col("load", Align::Left);
    }
    t = t
        .col("req/s", Align::Right)
        .col("avg", Align::Right)
        .tight("p50", Align::Right)
        .tight("p90", Align::Right)
        .tight("p95", Align::Right)
        .tight("p99", Align::Right)
        .tight("p99.9", Align::Right)
        .tight("max", Align::Right)
        .tight("transfer/s", Align::Right)
        .col("errors", Align::Right);
    let rounds = group.rows.iter().any(|r| r.rounds.len() > 1);
    if rounds {
        t = if full {
            t.col("req/s min-max", Align::Right)
        } else {
            t.tight("±%", Align::Right)
        };
    }
    t = if full {
        t.col("peak RSS MiB", Align::Right)
            .col("CPU s", Align::Right)
            .col("CPU µs/req", Align::Right)
    } else {
        t.col("RSS MiB", Align::Right).col("µs/req", Align::Right)
    };
    for row in &group.rows {
        let l = &row.figures.latency;
        let mut cells = Vec::new();
        if labels {
            cells.push(if full {
                row.label.clone()
            } else {
                cut(&row.label, LABEL_MAX)
            });
        }
        if !systems {
            cells.push(row.system.clone());
        }
        if points {
            cells.push(fmt::point(row));
        }
        if full {
            cells.push(fmt::load(&row.load));
        }
        cells.extend([
            fmt::count(row.figures.requests_per_sec),
            fmt::micros(l.avg_us),
            fmt::micros(l.p50_us as f64),
            fmt::micros(l.p90_us as f64),
            fmt::micros(l.p95_us as f64),
            fmt::micros(l.p99_us as f64),
            fmt::micros(l.p999_us as f64),
            fmt::micros(l.max_us as f64),
            fmt::bytes(row.figures.bytes_per_sec),
            if full {
                fmt::errors(&row.figures.errors)
            } else {
                fmt::count(row.figures.errors.total() as f64)
            },
        ]);
        if rounds {
            let (lo, hi) = row.spread(|f| f.requests_per_sec);
            cells.push(if row.rounds.len() < 2 {
                "-".into()
            } else if full {
                format!("{}-{}", fmt::count(lo), fmt::count(hi))
            } else {
                fmt::plus_minus(lo, hi, row.figures.requests_per_sec)
            });
        }
        match &row.figures.process {
            Some(p) => {
                cells.push(fmt::mib(p.peak_rss_kib));
                if full {
                    cells.push(format!("{:.2}", p.cpu_s));
                }
                cells.push(format!("{:.1}", p.cpu_us_per_request));
            }
            None => {
                cells.push("-".into());
                if full {
                    cells.push("-".into());
                }
                cells.push("-".into());
            }
        }
        t.push(cells);
    }
    t
}

/// A chart's label for a row: its group, and its label led by the system
/// when the label does not name it ("protocols: haproxy: HTTP/1.1 ->
/// h2c"), so that rows of different systems never read alike.
pub(crate) fn chart_label(group: &Group, row: &Row) -> String {
    let named = row.system == "backend"
        || row
            .label
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w.eq_ignore_ascii_case(&row.system));
    if named {
        format!("{}: {}", group.name, row.label)
    } else {
        format!("{}: {}: {}", group.name, row.system, row.label)
    }
}

/// The longest label the terminal table shows whole.
const LABEL_MAX: usize = 30;

/// A text cut to `max` characters, the cut marked with `…`.
pub(crate) fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Whether system, sweep point and phase tell the rows apart, so that a
/// sweep's terminal table can leave out labels like "sluice c=500".
fn point_is_enough(group: &Group) -> bool {
    let keys: Vec<(&str, String)> = group
        .rows
        .iter()
        .map(|r| (r.system.as_str(), fmt::point(r)))
        .collect();
    keys.iter().enumerate().all(|(i, k)| !keys[..i].contains(k))
}

/// The one system all the group's rows measured, if there is only one.
pub(crate) fn single_system(group: &Group) -> Option<&str> {
    let first = group.rows.first()?;
    group
        .rows
        .iter()
        .all(|r| r.system == first.system)
        .then_some(first.system.as_str())
}

/// "errors in haproxy -> petstore: read 10, http 2", one per row with errors.
pub(crate) fn error_lines(group: &Group) -> Vec<String> {
    group
        .rows
        .iter()
        .filter(|r| r.figures.errors.total() > 0)
        .map(|r| {
            format!(
                "errors in {}: {}",
                r.label,
                fmt::error_kinds(&r.figures.errors)
            )
        })
        .collect()
}

/// A label's words without system names and bare punctuation, lowercased:
/// "sluice -> petstore" and "haproxy -> petstore" both give "petstore".
fn stem(label: &str, systems: &[&str]) -> String {
    label
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .filter(|w| !systems.iter().any(|s| s.eq_ignore_ascii_case(w)))
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The name of the group's sweep, if its rows have one.
pub(crate) fn sweep_name(group: &Group) -> Option<&str> {
    group
        .rows
        .iter()
        .find_map(|r| r.sweep.as_ref().map(|s| s.name.as_str()))
}

/// The system the others are compared with: sluice, else the backend,
/// else the first one.
fn subject<'a>(systems: &[&'a str]) -> Option<&'a str> {
    ["sluice", "backend"]
        .iter()
        .find_map(|s| systems.iter().find(|x| **x == *s).copied())
        .or_else(|| systems.first().copied())
}

/// "sluice vs haproxy: 1.12x req/s (3/3 rounds agree), 0.89x avg, 0.85x p99";
/// in the users and open models, where the load is the same for everyone,
/// latency only (and the rounds' agreement on p95).
fn compare(a: &Row, b: &Row, latency_only: bool) -> String {
    let (la, lb) = (&a.figures.latency, &b.figures.latency);
    let p99 = fmt::times(fmt::ratio(la.p99_us as f64, lb.p99_us as f64));
    if latency_only {
        let p95 = fmt::times(fmt::ratio(la.p95_us as f64, lb.p95_us as f64));
        let agree = agreement(a, b, |f| f.latency.p95_us as f64);
        format!(
            "{} vs {}: {p95} p95{agree}, {p99} p99 latency",
            a.system, b.system
        )
    } else {
        let rps = fmt::times(fmt::ratio(
            a.figures.requests_per_sec,
            b.figures.requests_per_sec,
        ));
        let agree = agreement(a, b, |f| f.requests_per_sec);
        let avg = fmt::times(fmt::ratio(la.avg_us, lb.avg_us));
        format!(
            "{} vs {}: {rps} req/s{agree}, {avg} avg, {p99} p99 latency",
            a.system, b.system
        )
    }
}

/// " (2/3 rounds agree)": in how many rounds `a` stood on the same side
/// of `b` as the medians do; "" with a single round.
fn agreement(a: &Row, b: &Row, get: fn(&Figures) -> f64) -> String {
    let rounds = a.rounds.len().min(b.rounds.len());
    if rounds < 2 {
        return String::new();
    }
    let ahead = get(&a.figures) >= get(&b.figures);
    let agree = a
        .rounds
        .iter()
        .zip(&b.rounds)
        .filter(|(x, y)| (get(x) >= get(y)) == ahead)
        .count();
    format!(" ({agree}/{rounds} rounds agree)")
}

/// Ratio lines between systems measured at the same label (system names
/// aside), sweep point and phase.
pub(crate) fn ratios(group: &Group) -> Vec<String> {
    let mut systems: Vec<&str> = SYSTEMS.to_vec();
    for row in &group.rows {
        if !systems.contains(&row.system.as_str()) {
            systems.push(&row.system);
        }
    }
    let latency_only = matches!(sweep_name(group), Some("users" | "rate"));
    // Rows by key, keys in order of first appearance.
    type Key = (String, Option<u64>, Option<String>);
    let mut keys: Vec<(Key, Vec<&Row>)> = Vec::new();
    for row in &group.rows {
        let key: Key = (
            stem(&row.label, &systems),
            row.sweep.as_ref().map(|s| s.value.to_bits()),
            row.phase.clone(),
        );
        match keys.iter_mut().find(|(k, _)| *k == key) {
            Some((_, rows)) => rows.push(row),
            None => keys.push((key, vec![row])),
        }
    }
    let mut lines = Vec::new();
    for (_, rows) in &keys {
        let mut present: Vec<&str> = Vec::new();
        for r in rows {
            if !present.contains(&r.system.as_str()) {
                present.push(&r.system);
            }
        }
        if present.len() < 2 {
            continue;
        }
        let Some(subject) = subject(&present) else {
            continue;
        };
        let Some(a) = rows.iter().find(|r| r.system == subject) else {
            continue;
        };
        let context = context(a, &systems);
        for b in rows.iter().filter(|r| r.system != subject) {
            lines.push(format!("{context}{}", compare(a, b, latency_only)));
        }
    }
    if lines.is_empty() && !has_points(group) {
        // One row per system whose labels differ in more than the system name.
        let mut present: Vec<&str> = Vec::new();
        for r in &group.rows {
            if !present.contains(&r.system.as_str()) {
                present.push(&r.system);
            }
        }
        if present.len() >= 2 && present.len() == group.rows.len() {
            if let Some(subject) = subject(&present) {
                if let Some(a) = group.rows.iter().find(|r| r.system == subject) {
                    for b in group.rows.iter().filter(|r| r.system != subject) {
                        lines.push(format!(
                            "{} / {}: {}",
                            a.label,
                            b.label,
                            compare(a, b, latency_only)
                        ));
                    }
                }
            }
        }
    }
    lines
}

/// "petstore, connections 500: " or "".
fn context(row: &Row, systems: &[&str]) -> String {
    // Sweep labels read "sluice -> customers @ 1000 req/s, cold": the point
    // after the `@` is said better by the point itself.
    let label = row.label.split(" @ ").next().unwrap_or(&row.label);
    let mut words = stem(label, systems);
    if row.sweep.is_some() || row.phase.is_some() {
        words = words
            .split(' ')
            .filter(|w| !w.chars().any(|c| c.is_ascii_digit()))
            .filter(|w| Some(*w) != row.phase.as_deref())
            .collect::<Vec<_>>()
            .join(" ");
    }
    let parts: Vec<String> = [words, fmt::point(row)]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("{}: ", parts.join(", "))
    }
}

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
    let mut line = match sweep_name(group) {
        Some(name) => sweep_line(group, name),
        None => best_worst(group),
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
    format!("{head}: {line}")
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
            "{} ({}) {} req/s, avg {}",
            r.label,
            r.system,
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
                    "p95 {} ({} req/s)",
                    fmt::micros(l.p95_us as f64),
                    fmt::count(r.figures.requests_per_sec)
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
            format!("{} {metric}", r.system)
        })
        .collect();
    format!(
        "at {}{}: {}",
        fmt::sweep(&point),
        if warm { " (warm)" } else { "" },
        parts.join("; ")
    )
}

/// Sweep values in ascending order and systems in order of appearance.
fn sweep_axes(group: &Group) -> (Vec<f64>, Vec<&str>, Vec<Option<&str>>) {
    let mut values: Vec<f64> = group
        .rows
        .iter()
        .filter_map(|r| r.sweep.as_ref().map(|s| s.value))
        .collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
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

fn kv_table() -> Table {
    Table::new().col("", Align::Left).col("", Align::Left)
}

/// The facts of the machine, one per line.
pub(crate) fn machine_table(results: &Results) -> Table {
    let m = &results.machine;
    let mut t = kv_table();
    t.columns[0].name = "Fact".into();
    t.columns[1].name = "Value".into();
    t.push(vec!["CPU".into(), m.cpu_model.clone()]);
    t.push(vec!["Cores".into(), m.cores.to_string()]);
    t.push(vec!["Kernel".into(), m.kernel.clone()]);
    t.push(vec!["OS".into(), m.os.clone()]);
    t.push(vec![
        "Memory".into(),
        format!("{:.1} GiB", m.memory_kib as f64 / (1024.0 * 1024.0)),
    ]);
    t.push(vec![
        "Open-file limit".into(),
        fmt::count(m.open_file_limit as f64),
    ]);
    t.push(vec!["sluice".into(), m.sluice_version.clone()]);
    if m.peers.is_empty() {
        t.push(vec!["Peers".into(), "none on PATH".into()]);
    }
    for peer in &m.peers {
        t.push(vec![
            peer.name.clone(),
            format!("{} ({})", peer.version, peer.path),
        ]);
    }
    t
}

fn yes(b: bool) -> String {
    if b { "yes" } else { "no" }.to_owned()
}

/// How the run was asked to go.
pub(crate) fn settings_table(results: &Results) -> Table {
    let s = &results.settings;
    let mut t = kv_table();
    t.columns[0].name = "Setting".into();
    t.columns[1].name = "Value".into();
    t.push(vec!["Groups".into(), s.only.join(", ")]);
    t.push(vec![
        "Duration".into(),
        format!("{}s per row and round", fmt::value(s.duration_s)),
    ]);
    t.push(vec![
        "Rounds".into(),
        format!(
            "{} (each row's figures are the median; rows in rotated order each round)",
            s.rounds
        ),
    ]);
    t.push(vec![
        "Warm-up".into(),
        format!("{}s, discarded", fmt::value(s.warmup_s)),
    ]);
    t.push(vec!["Connections".into(), fmt::count(s.connections as f64)]);
    t.push(vec!["Pipeline".into(), s.pipeline.to_string()]);
    t.push(vec!["Pinned to CPUs".into(), yes(s.pin)]);
    t.push(vec!["Quick".into(), yes(s.quick)]);
    t.push(vec!["lb sweep top".into(), fmt::count(s.max_conns as f64)]);
    t.push(vec!["Started".into(), results.started.clone()]);
    t.push(vec!["Elapsed".into(), fmt::elapsed(results.elapsed_s)]);
    t
}
