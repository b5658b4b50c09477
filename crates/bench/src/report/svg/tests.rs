//! The SVG drawing helpers.

use super::axis::{log_ticks, nice_ticks, tick_label};
use super::canvas::title_lines;
use super::{bar_chart, Bar, BarChart, BarRow};

#[test]
fn ticks_are_round() {
    assert_eq!(
        nice_ticks(12_000.0, 6),
        [0.0, 2e3, 4e3, 6e3, 8e3, 10e3, 12e3]
    );
    assert_eq!(nice_ticks(0.9, 4), [0.0, 0.5, 1.0]);
    assert_eq!(nice_ticks(0.0, 4).last(), Some(&1.0));
    assert_eq!(log_ticks(0.3, 450.0), [0.1, 1.0, 10.0, 100.0, 1000.0]);
    assert_eq!(log_ticks(0.3, 7.0), [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]);
    assert_eq!(tick_label(12_000.0), "12k");
    assert_eq!(tick_label(1_500.0), "1.5k");
    assert_eq!(tick_label(0.2), "0.2");
    assert_eq!(tick_label(250.0), "250");
}

/// A seed chart's title takes two lines instead of running off both
/// ends of the chart; a short one stays whole.
#[test]
fn long_titles_wrap_within_the_chart() {
    let title = "Each runtime's petstore, alone and behind a proxy (seeds/000 Q5): \
                 requests/s alone and behind each proxy (log scale)";
    let lines = title_lines(title);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines.join(" "), title);
    assert!(lines.iter().all(|l| l.chars().count() <= 92), "{lines:?}");
    assert_eq!(
        title_lines("Throughput per scenario"),
        ["Throughput per scenario"]
    );
}

#[test]
fn text_is_escaped() {
    let chart = BarChart {
        title: "a < b & c".into(),
        x_label: "x".into(),
        rows: vec![BarRow {
            label: "<script>".into(),
            bars: vec![Bar {
                value: 1.0,
                color: "#000000".into(),
                text: "1 & 2".into(),
            }],
        }],
        legend: vec![("\"q\"".into(), "#000000".into())],
        log: false,
    };
    let svg = bar_chart(&chart);
    assert!(svg.contains("a &lt; b &amp; c"));
    assert!(!svg.contains("<script>"));
    assert!(roxmltree::Document::parse(&svg).is_ok(), "{svg}");
}
