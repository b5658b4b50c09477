//! Horizontal bar charts, on a linear or a log axis.

use crate::report::build::cut;

use super::axis::{log_ticks, nice_ticks, tick_label, Scale};
use super::canvas::{below_title, legend_height, Key, Svg, CHAR_W, WIDTH};

/// One bar: its value, colour and the text drawn after it.
#[derive(Debug, Clone)]
pub(crate) struct Bar {
    pub(crate) value: f64,
    pub(crate) color: String,
    pub(crate) text: String,
}

/// A labelled group of bars drawn under each other.
#[derive(Debug, Clone)]
pub(crate) struct BarRow {
    pub(crate) label: String,
    pub(crate) bars: Vec<Bar>,
}

#[derive(Debug, Clone)]
pub(crate) struct BarChart {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) rows: Vec<BarRow>,
    /// (name, colour) pairs.
    pub(crate) legend: Vec<(String, String)>,
    /// A log10 axis (latency percentiles over several decades).
    pub(crate) log: bool,
}

/// Horizontal bars, one row per label, its bars under each other.
pub(crate) fn bar_chart(chart: &BarChart) -> String {
    const BAR_H: f64 = 11.0;
    const LABEL_MAX: usize = 44;
    let label_w = chart
        .rows
        .iter()
        .map(|r| cut(&r.label, LABEL_MAX).chars().count())
        .max()
        .unwrap_or(0) as f64
        * CHAR_W;
    let left = (label_w + 16.0).clamp(80.0, 320.0);
    let right = WIDTH - 80.0;
    let legend: Vec<(String, String, Key)> = chart
        .legend
        .iter()
        .map(|(n, c)| (n.clone(), c.clone(), Key::Box))
        .collect();
    let head = below_title(&chart.title);
    let top = head + legend_height(&legend, 10.0) + 8.0;
    let row_h: Vec<f64> = chart
        .rows
        .iter()
        .map(|r| r.bars.len().max(1) as f64 * BAR_H + 8.0)
        .collect();
    let plot_h: f64 = row_h.iter().sum::<f64>().max(BAR_H);
    let height = top + plot_h + 48.0;

    let values = chart.rows.iter().flat_map(|r| &r.bars).map(|b| b.value);
    let (ticks, scale) = if chart.log {
        let positive: Vec<f64> = values.filter(|v| *v > 0.0 && v.is_finite()).collect();
        let min = positive.iter().copied().fold(f64::INFINITY, f64::min);
        let max = positive.iter().copied().fold(0.0, f64::max);
        let ticks = if positive.is_empty() {
            vec![1.0, 10.0]
        } else {
            log_ticks(min, max)
        };
        let (d0, d1) = (ticks[0], ticks[ticks.len() - 1]);
        let scale = Scale {
            d0,
            d1,
            r0: left,
            r1: right,
            log: true,
        };
        (ticks, scale)
    } else {
        let max = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
        let ticks = nice_ticks(max, 6);
        let scale = Scale::linear(&ticks, left, right);
        (ticks, scale)
    };

    let mut svg = Svg::new(&chart.title, WIDTH, height);
    svg.legend(&legend, 10.0, head + 12.0);
    let bottom = top + plot_h;
    for t in &ticks {
        let x = scale.map(*t);
        svg.line(x, top, x, bottom, "#e3e3e3");
        svg.text(x, bottom + 14.0, "middle", "", &tick_label(*t));
    }
    svg.axes((left, right), (top, bottom), &chart.x_label, 32.0);

    let mut y = top + 4.0;
    for (row, h) in chart.rows.iter().zip(&row_h) {
        svg.text(
            left - 6.0,
            y + h / 2.0,
            "end",
            " dominant-baseline=\"middle\"",
            &cut(&row.label, LABEL_MAX),
        );
        for (i, bar) in row.bars.iter().enumerate() {
            let by = y + i as f64 * BAR_H;
            if !(bar.value.is_finite() && (bar.value > 0.0 || !chart.log)) {
                continue;
            }
            let x1 = scale.map(bar.value);
            svg.rect(
                left,
                by,
                x1 - left,
                BAR_H - 2.0,
                &bar.color,
                &format!("{}: {}", row.label, bar.text),
            );
            svg.text(
                x1 + 4.0,
                by + BAR_H - 3.0,
                "start",
                " font-size=\"9\"",
                &bar.text,
            );
        }
        y += h;
    }
    svg.finish()
}
