//! A small hand-made SVG chart kit: horizontal bar charts (linear or log
//! axis) and line charts, with axes, round ticks, labels and a legend.
//! Every text is escaped; the output is well-formed XML.
//!
//! `canvas` writes the document (title, texts, lines, boxes, legend),
//! `axis` maps values to pixels and picks the ticks, `bar` and `line`
//! draw one kind of chart each.

mod axis;
mod bar;
mod canvas;
mod line;
#[cfg(test)]
mod tests;

pub(crate) use bar::{bar_chart, Bar, BarChart, BarRow};
pub(crate) use line::{line_chart, LineChart, Series};

/// The colour of a system, the same in every chart.
pub(crate) fn system_color(system: &str) -> &'static str {
    const OTHERS: [&str; 3] = ["#8c564b", "#7f7f00", "#1b9e77"];
    match system {
        "sluice" => "#1f6fb4",
        "nginx" => "#2a9d3a",
        "haproxy" => "#d0542c",
        "envoy" => "#8e5cc4",
        "traefik" => "#17a2b8",
        "caddy" => "#b8860b",
        "nghttpx" => "#d63384",
        "backend" => "#777777",
        other => {
            let sum: usize = other.bytes().map(usize::from).sum();
            OTHERS[sum % OTHERS.len()]
        }
    }
}
