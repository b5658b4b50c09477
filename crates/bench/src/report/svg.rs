//! A small hand-made SVG chart kit: horizontal bar charts (linear or log
//! axis) and line charts, with axes, round ticks, labels and a legend.
//! Every text is escaped; the output is well-formed XML.

use std::fmt::Write as _;

use super::build::cut;
use super::table::esc;

const WIDTH: f64 = 760.0;
const FONT: f64 = 11.0;
/// Roughly how wide a character of the 11px sans-serif font is.
const CHAR_W: f64 = 6.2;
const LEGEND_ROW: f64 = 18.0;
/// Roughly how wide a character of the 14px bold title is.
const TITLE_CHAR_W: f64 = 8.0;
/// A title line's height.
const TITLE_ROW: f64 = 17.0;

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

/// Round tick values covering [0, max]: steps of 1, 2 or 5 times a power of 10.
pub(crate) fn nice_ticks(max: f64, target: usize) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let rough = max / target.max(1) as f64;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= rough)
        .unwrap_or(10.0 * magnitude);
    let count = (max / step).ceil() as usize;
    (0..=count).map(|i| i as f64 * step).collect()
}

/// Powers of ten from below `min` to above `max` (both > 0), with 2 and 5
/// between them when the range spans 3 decades or less.
pub(crate) fn log_ticks(min: f64, max: f64) -> Vec<f64> {
    let lo = min.max(f64::MIN_POSITIVE).log10().floor() as i32;
    let mut hi = max.max(f64::MIN_POSITIVE).log10().ceil() as i32;
    if hi <= lo {
        hi = lo + 1;
    }
    let mut ticks = Vec::new();
    for e in lo..=hi {
        let decade = 10f64.powi(e);
        ticks.push(decade);
        if hi - lo <= 3 && e < hi {
            ticks.push(2.0 * decade);
            ticks.push(5.0 * decade);
        }
    }
    ticks
}

/// A tick's text: `0`, `0.5`, `250`, `1.5k`, `12k`, `2M`.
pub(crate) fn tick_label(v: f64) -> String {
    fn trim(s: String) -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    }
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e3 {
        format!("{}k", trim(format!("{:.2}", v / 1e3)))
    } else if a >= 1.0 || a == 0.0 {
        trim(format!("{v:.2}"))
    } else {
        trim(format!("{v:.4}"))
    }
}

/// How a legend entry is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Box,
    Line,
    Dashed,
}

/// A value -> pixel mapping.
#[derive(Debug, Clone, Copy)]
struct Scale {
    d0: f64,
    d1: f64,
    r0: f64,
    r1: f64,
    log: bool,
}

impl Scale {
    fn map(&self, v: f64) -> f64 {
        let (v, d0, d1) = if self.log {
            (v.max(self.d0).log10(), self.d0.log10(), self.d1.log10())
        } else {
            (v, self.d0, self.d1)
        };
        if d1 == d0 {
            return self.r0;
        }
        let t = ((v - d0) / (d1 - d0)).clamp(0.0, 1.0);
        self.r0 + t * (self.r1 - self.r0)
    }
}

/// An SVG document being written.
#[derive(Debug)]
struct Svg {
    out: String,
}

impl Svg {
    fn new(title: &str, width: f64, height: f64) -> Self {
        let mut out = String::new();
        let _ = write!(
            out,
            "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" \
             viewBox=\"0 0 {w:.0} {h:.0}\" role=\"img\" font-family=\"sans-serif\" font-size=\"{FONT}\">\n\
             <title>{t}</title>\n\
             <rect x=\"0\" y=\"0\" width=\"{w:.0}\" height=\"{h:.0}\" fill=\"#ffffff\"/>\n",
            w = width,
            h = height,
            t = esc(title),
        );
        for (i, line) in title_lines(title).iter().enumerate() {
            let _ = writeln!(
                out,
                "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"middle\" font-size=\"14\" \
                 font-weight=\"bold\">{}</text>",
                esc(line),
                x = width / 2.0,
                y = 18.0 + TITLE_ROW * i as f64,
            );
        }
        Self { out }
    }

    fn text(&mut self, x: f64, y: f64, anchor: &str, extra: &str, content: &str) {
        let _ = writeln!(
            self.out,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\"{extra}>{}</text>",
            esc(content)
        );
    }

    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str) {
        let _ = writeln!(
            self.out,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\"/>"
        );
    }

    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tip: &str) {
        let _ = writeln!(
            self.out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"><title>{}</title></rect>",
            w.max(0.0),
            esc(fill),
            esc(tip)
        );
    }

    /// Swatches and names in rows starting at `y`; returns the height used.
    fn legend(&mut self, items: &[(String, String, Key)], left: f64, y: f64) -> f64 {
        let mut x = left;
        let mut row = 0.0;
        for (name, color, key) in items {
            let w = 22.0 + name.chars().count() as f64 * CHAR_W + 14.0;
            if x + w > WIDTH - 10.0 && x > left {
                x = left;
                row += LEGEND_ROW;
            }
            let cy = y + row;
            if *key == Key::Box {
                let _ = writeln!(
                    self.out,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"10\" fill=\"{}\"/>",
                    cy - 9.0,
                    esc(color)
                );
            } else {
                let _ = writeln!(
                    self.out,
                    "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{}\" stroke-width=\"2\"{}/>",
                    x + 16.0,
                    esc(color),
                    if *key == Key::Dashed {
                        " stroke-dasharray=\"4 3\""
                    } else {
                        ""
                    },
                    y = cy - 4.0,
                );
            }
            self.text(x + 20.0, cy, "start", "", name);
            x += w;
        }
        if items.is_empty() {
            0.0
        } else {
            row + LEGEND_ROW
        }
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// The title cut at spaces into lines that fit the chart's width (the seed
/// charts' titles run to 110 characters, which one line cut at both ends).
pub(crate) fn title_lines(title: &str) -> Vec<String> {
    let max = ((WIDTH - 20.0) / TITLE_CHAR_W) as usize;
    let mut lines: Vec<String> = Vec::new();
    for word in title.split(' ') {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= max => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// Where the legend starts: below the title's lines.
fn below_title(title: &str) -> f64 {
    34.0 + TITLE_ROW * title_lines(title).len().saturating_sub(1) as f64
}

/// How many legend rows the items need.
fn legend_height(items: &[(String, String, Key)], left: f64) -> f64 {
    if items.is_empty() {
        return 0.0;
    }
    let mut x = left;
    let mut rows = 1.0;
    for (name, _, _) in items {
        let w = 22.0 + name.chars().count() as f64 * CHAR_W + 14.0;
        if x + w > WIDTH - 10.0 && x > left {
            x = left;
            rows += 1.0;
        }
        x += w;
    }
    rows * LEGEND_ROW
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
        let scale = Scale {
            d0: 0.0,
            d1: ticks.last().copied().unwrap_or(1.0),
            r0: left,
            r1: right,
            log: false,
        };
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
    svg.line(left, top, left, bottom, "#555555");
    svg.line(left, bottom, right, bottom, "#555555");
    svg.text(
        (left + right) / 2.0,
        bottom + 32.0,
        "middle",
        "",
        &chart.x_label,
    );

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
    let xs = Scale {
        d0: 0.0,
        d1: x_ticks.last().copied().unwrap_or(1.0),
        r0: left,
        r1: right,
        log: false,
    };
    let ys = Scale {
        d0: 0.0,
        d1: y_ticks.last().copied().unwrap_or(1.0),
        r0: bottom,
        r1: top,
        log: false,
    };

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
    svg.line(left, top, left, bottom, "#555555");
    svg.line(left, bottom, right, bottom, "#555555");
    svg.text(
        (left + right) / 2.0,
        bottom + 36.0,
        "middle",
        "",
        &chart.x_label,
    );
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
