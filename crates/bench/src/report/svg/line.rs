//! Line charts over a shared x axis.

use std::fmt::Write as _;

use crate::report::table::esc;

use super::axis::{nice_ticks, tick_label, Scale};
use super::canvas::{below_title, legend_height, Key, Svg, WIDTH};

/// One line of a line chart.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) color: String,
    pub(crate) dashed: bool,
    /// (x, y), drawn in x order.
    pub(crate) points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone)]
pub(crate) struct LineChart {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) series: Vec<Series>,
}

/// Lines over a shared x axis, both axes from 0.
pub(crate) fn line_chart(chart: &LineChart) -> String {
    let left = 70.0;
    let right = WIDTH - 24.0;
    let legend: Vec<(String, String, Key)> = chart
        .series
        .iter()
        .map(|s| {
            let key = if s.dashed { Key::Dashed } else { Key::Line };
            (s.name.clone(), s.color.clone(), key)
        })
        .collect();
    let head = below_title(&chart.title);
    let top = head + legend_height(&legend, left) + 16.0;
    let plot_h = 240.0;
    let bottom = top + plot_h;
    let height = bottom + 50.0;

    let points = || chart.series.iter().flat_map(|s| &s.points);
    let x_max = points()
        .map(|p| p.0)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let y_max = points()
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let x_ticks = nice_ticks(x_max, 8);
    let y_ticks = nice_ticks(y_max, 6);
    let xs = Scale::linear(&x_ticks, left, right);
    let ys = Scale::linear(&y_ticks, bottom, top);

    let mut svg = Svg::new(&chart.title, WIDTH, height);
    svg.legend(&legend, left, head + 12.0);
    for t in &y_ticks {
        let y = ys.map(*t);
        svg.line(left, y, right, y, "#e3e3e3");
        svg.text(
            left - 6.0,
            y,
            "end",
            " dominant-baseline=\"middle\"",
            &tick_label(*t),
        );
    }
    for t in &x_ticks {
        let x = xs.map(*t);
        svg.line(x, bottom, x, bottom + 4.0, "#555555");
        svg.text(x, bottom + 16.0, "middle", "", &tick_label(*t));
    }
    svg.axes((left, right), (top, bottom), &chart.x_label, 36.0);
    let cy = (top + bottom) / 2.0;
    svg.text(
        16.0,
        cy,
        "middle",
        &format!(" transform=\"rotate(-90 16 {cy:.1})\""),
        &chart.y_label,
    );

    for series in &chart.series {
        let mut pts: Vec<(f64, f64)> = series
            .points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let coords: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", xs.map(*x), ys.map(*y)))
            .collect();
        let color = esc(&series.color);
        if coords.len() > 1 {
            let _ = writeln!(
                svg.out,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{} points=\"{}\"/>",
                if series.dashed {
                    " stroke-dasharray=\"6 4\""
                } else {
                    ""
                },
                coords.join(" ")
            );
        }
        for (x, y) in &pts {
            let _ = writeln!(
                svg.out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"><title>{}</title></circle>",
                xs.map(*x),
                ys.map(*y),
                esc(&format!(
                    "{}: {} = {}, {} = {}",
                    series.name,
                    chart.x_label,
                    tick_label(*x),
                    chart.y_label,
                    tick_label(*y)
                ))
            );
        }
    }
    svg.finish()
}
