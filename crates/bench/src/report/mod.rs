//! Renders [`crate::results::Results`]: terminal tables, report.md,
//! results.json and a self-contained report.html with inline SVG charts.
//!
//! Every output draws the same content (`build`) through one table model
//! (`table`), so the terminal, Markdown and HTML never disagree.

pub(crate) mod build;
mod compare;
#[cfg(test)]
mod fixture;
pub(crate) mod fmt;
mod html;
mod markdown;
mod seeds;
mod summary;
mod svg;
mod table;
mod text;

use std::path::Path;

use crate::results::{Group, Results};

#[cfg(test)]
pub(crate) use fixture::fixture;

/// A group's rows as a plain-text table for the terminal (label, system,
/// sweep point, req/s, latency avg/p50/p90/p95/p99/p99.9/max, transfer/s,
/// errors, peak RSS MiB, CPU µs/req), then the ratio lines between systems
/// measured at the same label or sweep point, then the group's notes.
pub fn group_table(group: &Group) -> String {
    text::group_table(group)
}

/// The end-of-run terminal summary, shaped like seeds/000: "Baseline
/// Summary", "Proxy Summary" with a Times row per proxy row, one line per
/// other group and the run's notes.
pub fn summary(results: &Results) -> String {
    text::summary(results)
}

/// report.md: machine facts, settings, notes, the summary, then each group
/// with all its rows, its sweep pivot, notes and ratio lines; a runtimes
/// group with its seed's table and the versions its rows ran on.
pub fn markdown(results: &Results) -> String {
    markdown::markdown(results)
}

/// report.html: the sections of report.md as HTML tables plus inline SVG
/// charts, in one self-contained, well-formed XHTML file.
pub fn html(results: &Results) -> String {
    html::html(results)
}

/// results.json as written by [`write_all`]: pretty JSON.
pub fn json(results: &Results) -> serde_json::Result<String> {
    let mut text = serde_json::to_string_pretty(results)?;
    text.push('\n');
    Ok(text)
}

/// Writes report.md, results.json and report.html into `dir`, creating it.
pub fn write_all(results: &Results, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = json(results).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("results.json"), json)?;
    std::fs::write(dir.join("report.md"), markdown(results))?;
    std::fs::write(dir.join("report.html"), html(results))?;
    Ok(())
}

#[cfg(test)]
mod tests;
