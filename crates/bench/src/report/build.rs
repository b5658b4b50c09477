//! The content every output shares: row tables, chart labels, machine
//! facts and settings ([`super::compare`] has the ratio lines,
//! [`super::summary`] the summaries and pivots).

use super::table::{Align, Table};
use crate::fmt;
use crate::results::{Figures, Group, Results, Row};
use crate::window;

/// Systems the row labels may name; dropped when labels are compared:
/// sluice, every peer (crate::machine::PeerKind) and the backend.
pub(crate) const SYSTEMS: [&str; 8] = [
    "sluice", "nginx", "haproxy", "envoy", "traefik", "caddy", "nghttpx", "backend",
];

/// The `idle` group's rows: memory, not load.
fn idle_table(group: &Group) -> Table {
    let mut t = Table::new()
        .col("system", Align::Left)
        .col("protocol", Align::Left)
        .col("connections", Align::Right)
        .col("RSS before KiB", Align::Right)
        .col("RSS idle KiB", Align::Right)
        .col("per connection", Align::Right);
    for row in &group.rows {
        let Some(idle) = &row.idle else { continue };
        t.push(vec![
            row.system.clone(),
            row.load.protocol.clone(),
            fmt::count(row.load.connections as f64),
            idle.rss_before_kib.to_string(),
            idle.rss_idle_kib.to_string(),
            format!("{:.0} B", idle.bytes_per_connection),
        ]);
    }
    t
}

/// The group's sweep values, ascending, each once.
pub(crate) fn sweep_values(group: &Group) -> Vec<f64> {
    let mut values: Vec<f64> = group
        .rows
        .iter()
        .filter_map(|r| r.sweep.as_ref().map(|s| s.value))
        .collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    values
}

/// Whether any row of the group has a sweep point or a phase.
pub(crate) fn has_points(group: &Group) -> bool {
    group
        .rows
        .iter()
        .any(|r| r.sweep.is_some() || r.phase.is_some())
}

/// The rows of a group with every metric. `full` (Markdown, HTML) adds the
/// load shape, CPU seconds and the errors' kinds; the terminal table leaves
/// them out to stay within 130 columns ([`error_lines`] has the kinds).
pub(crate) fn rows_table(group: &Group, full: bool) -> Table {
    if group.rows.iter().any(|r| r.idle.is_some()) {
        return idle_table(group);
    }
    let points = has_points(group);
    let systems = !full && single_system(group).is_some();
    // The terminal leaves out labels that say no more than the system and
    // point do (lb-slow's rows are labelled by their system alone).
    let labels = full || !(labels_are_systems(group) || points && point_is_enough(group));
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
        .tight(if full { "transfer/s" } else { "bytes/s" }, Align::Right);
    if full {
        t = t.col("sent", Align::Right);
    }
    t = if full {
        t.col("errors", Align::Right)
    } else {
        t.tight("errors", Align::Right)
    };
    // The terminal's 130 columns leave room for a short name only.
    t = t.tight(if full { "unanswered" } else { "unans." }, Align::Right);
    // How evenly each system served its connections (issue 52): where
    // many connections share one worker, a rate hides who waited.
    let fairness = group.name.starts_with("lb")
        && group
            .rows
            .iter()
            .any(|r| r.figures.per_connection.is_some());
    if fairness {
        t = t.tight(
            if full {
                "per connection min/median/max"
            } else {
                "per conn"
            },
            Align::Right,
        );
    }
    let rounds = group.rows.iter().any(|r| r.rounds.len() > 1);
    // The spread of the figure the group's verdicts are on.
    let p95 = verdicts_on_p95(group);
    let spread_of: fn(&Figures) -> f64 = if p95 {
        |f| f.latency.p95_us as f64
    } else {
        |f| f.requests_per_sec
    };
    if rounds {
        t = match (full, p95) {
            (true, true) => t.col("p95 min-max", Align::Right),
            (true, false) => t.col("req/s min-max", Align::Right),
            (false, true) => t.tight("p95 ±%", Align::Right),
            (false, false) => t.tight("±%", Align::Right),
        };
    }
    t = if full {
        t.col("peak RSS MiB", Align::Right)
            .col("CPU s", Align::Right)
            .col("CPU µs/req", Align::Right)
    } else {
        t.tight("RSS MiB", Align::Right).col("µs/req", Align::Right)
    };
    for row in &group.rows {
        let l = &row.figures.latency;
        let mut cells = Vec::new();
        if labels {
            // A row that cannot stand in a verdict is marked; the lines
            // under the table say why (`caveat_lines`).
            let mark = if window::comparable(row) {
                ""
            } else {
                NOT_COMPARABLE_MARK
            };
            cells.push(if full {
                format!("{}{mark}", row.label)
            } else {
                format!("{}{mark}", cut(&row.label, LABEL_MAX - mark.len()))
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
        ]);
        if full {
            cells.push(fmt::count(row.figures.sent as f64));
        }
        cells.extend([
            if full {
                fmt::errors(&row.figures.errors)
            } else {
                fmt::count(row.figures.errors.total() as f64)
            },
            fmt::count(row.figures.unanswered as f64),
        ]);
        if fairness {
            cells.push(
                row.figures
                    .per_connection
                    .map_or("-".into(), |s| format!("{}/{}/{}", s.min, s.median, s.max)),
            );
        }
        if rounds {
            let (lo, hi) = row.spread(spread_of);
            cells.push(if row.rounds.len() < 2 {
                "-".into()
            } else if !full {
                fmt::plus_minus(lo, hi, spread_of(&row.figures))
            } else if p95 {
                format!("{}-{}", fmt::micros(lo), fmt::micros(hi))
            } else {
                format!("{}-{}", fmt::count(lo), fmt::count(hi))
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

/// A chart's label for a row: its group and [`system_label`]
/// ("protocols: haproxy: HTTP/1.1 -> h2c").
pub(crate) fn chart_label(group: &Group, row: &Row) -> String {
    format!("{}: {}", group.name, system_label(row))
}

/// A row's label led by its system when the label does not name it, so
/// that rows of different systems never read alike: "backend: petstore
/// (sluice serve)", but "sluice round_robin" as it is.
pub(crate) fn system_label(row: &Row) -> String {
    if names(&row.label, &row.system) {
        row.label.clone()
    } else {
        format!("{}: {}", row.system, row.label)
    }
}

/// The proxy or backend a system is, without its policy: "sluice
/// least_request" is sluice's, "haproxy least_conn" HAProxy's; any other
/// name is its own.
pub(crate) fn base_system(system: &str) -> &str {
    match system.split_whitespace().next() {
        Some(first) if SYSTEMS.contains(&first) => first,
        _ => system,
    }
}

/// Whether `label` holds `system`'s words, in order, as whole words
/// (case aside): "petstore bytes (nginx)" names "nginx", "sluice
/// round_robin" names itself, "sluice serve" does not name "backend".
fn names(label: &str, system: &str) -> bool {
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let (label, system) = (words(label), words(system));
    !system.is_empty() && label.windows(system.len()).any(|w| w == system)
}

/// Whether the group's verdicts are on p95, not req/s: the users and open
/// models, where every system is offered the same load.
pub(crate) fn verdicts_on_p95(group: &Group) -> bool {
    matches!(sweep_name(group), Some("users" | "rate"))
}

/// The name of the group's sweep, if its rows have one.
pub(crate) fn sweep_name(group: &Group) -> Option<&str> {
    group
        .rows
        .iter()
        .find_map(|r| r.sweep.as_ref().map(|s| s.name.as_str()))
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

/// Whether every row's label is its system.
pub(crate) fn labels_are_systems(group: &Group) -> bool {
    group.rows.iter().all(|r| r.label == r.system)
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

/// What marks a row that is not comparable in the tables.
pub(crate) const NOT_COMPARABLE_MARK: &str = " *";

/// "* not comparable: sluice -> spring-mvc @ 5000: window shorter than its
/// latency: ...", one per row that cannot stand in a verdict.
pub(crate) fn caveat_lines(group: &Group) -> Vec<String> {
    group
        .rows
        .iter()
        .filter(|r| !window::comparable(r))
        .map(|r| {
            format!(
                "{} not comparable: {}: {}",
                NOT_COMPARABLE_MARK.trim(),
                r.label,
                r.not_comparable.join("; ")
            )
        })
        .collect()
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
    if !s.runtimes.is_empty() {
        t.push(vec![
            "Runtimes".into(),
            format!(
                "{} (the runtimes groups; hello and petstore pipeline 16 deep)",
                s.runtimes.join(", ")
            ),
        ]);
    }
    t.push(vec!["Started".into(), results.started.clone()]);
    t.push(vec!["Elapsed".into(), fmt::elapsed(results.elapsed_s)]);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every peer is a system the labels may name, with a colour of its own.
    #[test]
    fn every_peer_has_its_name_and_colour() {
        let mut colours = Vec::new();
        for system in ["sluice", "backend"]
            .into_iter()
            .chain(crate::machine::PeerKind::ALL.map(|k| k.name()))
        {
            assert!(SYSTEMS.contains(&system), "{system}");
            let colour = super::super::svg::system_color(system);
            assert!(!colours.contains(&colour), "{system} shares {colour}");
            colours.push(colour);
        }
    }
}
