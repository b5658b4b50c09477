//! report.md.

use super::build;
use super::compare;
use super::fmt;
use super::seeds;
use super::summary;
use super::table::md_text;
use crate::results::{Group, Results, SCHEMA};

pub(super) fn markdown(results: &Results) -> String {
    let mut out = String::from("# sluice bench report\n\n");
    out.push_str(&format!(
        "Run started {}, took {}; results schema `{}`{}.\n\n",
        md_text(&results.started),
        fmt::elapsed(results.elapsed_s),
        md_text(&results.schema),
        if results.schema == SCHEMA {
            ""
        } else {
            " (read by a sluice that writes a newer format)"
        }
    ));
    out.push_str(
        "Latency is measured by the load generator; in the open model it counts from each \
         request's intended send time. Transfer counts response bytes, headers included. \
         Peak RSS and CPU are the system under test's process (the proxy; the backend when \
         it is loaded alone).\n\n",
    );

    out.push_str("## Machine\n\n");
    out.push_str(&build::machine_table(results).markdown());
    out.push_str("\n## Settings\n\n");
    out.push_str(&build::settings_table(results).markdown());
    out.push_str("\n## Notes\n\n");
    if results.notes.is_empty() {
        out.push_str("None.\n");
    }
    for note in &results.notes {
        out.push_str(&format!("- {}\n", md_text(note)));
    }

    out.push_str("\n## Summary\n\n### Baseline Summary\n\n");
    let baseline = summary::baseline_summary(results);
    if baseline.is_empty() {
        out.push_str("No baseline rows.\n");
    } else {
        out.push_str(&baseline.markdown());
    }
    out.push_str("\n### Proxy Summary\n\n");
    let proxy = summary::proxy_summary(results);
    if proxy.is_empty() {
        out.push_str("No baseline or proxy rows.\n");
    } else {
        out.push_str(&proxy.markdown());
        if proxy.strong.iter().any(|s| *s) {
            out.push('\n');
            out.push_str(summary::TIMES_NOTE);
            out.push('\n');
        }
    }
    let others: Vec<&Group> = results
        .groups
        .iter()
        .filter(|g| g.name != "baseline" && g.name != "proxy")
        .collect();
    if !others.is_empty() {
        out.push_str("\n### Other groups\n\n");
        for g in others {
            out.push_str(&format!("- {}\n", md_text(&summary::group_line(g))));
        }
    }

    for group in &results.groups {
        out.push('\n');
        out.push_str(&group_section(group));
    }
    out
}

fn group_section(group: &Group) -> String {
    let mut out = format!(
        "## {} (`{}`)\n\n",
        md_text(&group.title),
        md_text(&group.name)
    );
    if !group.question.is_empty() {
        out.push_str(&format!("*{}*\n\n", md_text(&group.question)));
    }
    if let Some((table, caption)) = seeds::table(group) {
        out.push_str(&format!("{}\n\n", md_text(&caption)));
        out.push_str(&table.markdown());
        if let Some(versions) = seeds::versions(group) {
            out.push_str("\nVersions:\n\n");
            out.push_str(&versions.markdown());
            out.push_str(&format!("\n{}\n", md_text(seeds::VERSIONS_NOTE)));
        }
        out.push_str("\nEvery row:\n\n");
    }
    if group.rows.is_empty() {
        out.push_str("No rows.\n");
    } else {
        out.push_str(&build::rows_table(group, true).markdown());
    }
    if let Some(pivot) = summary::pivot(group).filter(|_| !seeds::is_seed(group)) {
        if !pivot.is_empty() {
            out.push_str(&format!(
                "\n{}\n\n",
                md_text(&summary::pivot_caption(group))
            ));
            out.push_str(&pivot.markdown());
        }
    }
    let caveats = build::caveat_lines(group);
    if !caveats.is_empty() {
        out.push_str("\nNot comparable:\n\n");
        for line in &caveats {
            out.push_str(&format!("- {}\n", md_text(line)));
        }
    }
    if !group.notes.is_empty() {
        out.push_str("\nNotes:\n\n");
        for note in &group.notes {
            out.push_str(&format!("- {}\n", md_text(note)));
        }
    }
    let ratios = compare::ratios(group);
    if !ratios.is_empty() {
        out.push_str("\nRatios:\n\n");
        for line in ratios {
            out.push_str(&format!("- {}\n", md_text(&line)));
        }
    }
    out
}
