//! The terminal: one table after each group, a summary at the end.

use super::build;
use super::compare;
use crate::results::{Group, Results};

/// A group's rows as an aligned table, then its ratio lines and notes.
pub(super) fn group_table(group: &Group) -> String {
    let mut out = format!("== {} ({}) ==\n", group.title, group.name);
    if !group.question.is_empty() {
        out.push_str(&group.question);
        out.push('\n');
    }
    out.push('\n');
    let seed = super::seeds::table(group);
    if group.rows.is_empty() {
        out.push_str("(no rows)\n");
    } else if let Some((table, caption)) = &seed {
        // Its rows differ by runtime, not by system: the seed's table
        // tells them apart (report.md has every figure of every row).
        out.push_str(&table.text());
        out.push_str(caption);
        out.push('\n');
        for line in build::error_lines(group)
            .into_iter()
            .chain(build::caveat_lines(group))
        {
            out.push_str(&line);
            out.push('\n');
        }
    } else {
        if let Some(system) = build::single_system(group) {
            out.push_str(&format!("system: {system}\n"));
        }
        out.push_str(&build::rows_table(group, false).text());
        for line in build::error_lines(group)
            .into_iter()
            .chain(build::caveat_lines(group))
        {
            out.push_str(&line);
            out.push('\n');
        }
    }
    let ratios = compare::ratios(group);
    if !ratios.is_empty() {
        out.push('\n');
        for line in ratios {
            out.push_str(&line);
            out.push('\n');
        }
    }
    if !group.notes.is_empty() {
        out.push('\n');
        for note in &group.notes {
            out.push_str("note: ");
            out.push_str(note);
            out.push('\n');
        }
    }
    out
}

/// The end-of-run summary: Baseline Summary, Proxy Summary with its Times
/// rows, one line per other group, the run's notes.
pub(super) fn summary(results: &Results) -> String {
    let mut out = String::from("Baseline Summary\n\n");
    let baseline = super::summary::baseline_summary(results);
    if baseline.is_empty() {
        out.push_str("(no baseline rows)\n");
    } else {
        out.push_str(&baseline.text());
    }
    out.push_str("\nProxy Summary\n\n");
    let proxy = super::summary::proxy_summary(results);
    if proxy.is_empty() {
        out.push_str("(no baseline or proxy rows)\n");
    } else {
        out.push_str(&proxy.text());
        if proxy.strong.iter().any(|s| *s) {
            out.push('\n');
            out.push_str(super::summary::TIMES_NOTE);
            out.push('\n');
        }
    }
    let others: Vec<String> = results
        .groups
        .iter()
        .filter(|g| g.name != "baseline" && g.name != "proxy")
        .map(super::summary::group_line)
        .collect();
    if !others.is_empty() {
        out.push_str("\nOther groups\n\n");
        for line in others {
            out.push_str(&line);
            out.push('\n');
        }
    }
    if !results.notes.is_empty() {
        out.push_str("\nNotes\n\n");
        for note in &results.notes {
            out.push_str("- ");
            out.push_str(note);
            out.push('\n');
        }
    }
    out
}
