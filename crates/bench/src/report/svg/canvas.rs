//! The SVG document being written: its title, texts, lines, boxes and
//! legend, and the sizes the charts lay themselves out by.

use std::fmt::Write as _;

use crate::report::table::esc;

pub(super) const WIDTH: f64 = 760.0;
const FONT: f64 = 11.0;
/// Roughly how wide a character of the 11px sans-serif font is.
pub(super) const CHAR_W: f64 = 6.2;
const LEGEND_ROW: f64 = 18.0;
/// Roughly how wide a character of the 14px bold title is.
const TITLE_CHAR_W: f64 = 8.0;
/// A title line's height.
const TITLE_ROW: f64 = 17.0;

/// How a legend entry is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    Box,
    Line,
    Dashed,
}

/// An SVG document being written.
#[derive(Debug)]
pub(super) struct Svg {
    pub(super) out: String,
}

impl Svg {
    pub(super) fn new(title: &str, width: f64, height: f64) -> Self {
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

    pub(super) fn text(&mut self, x: f64, y: f64, anchor: &str, extra: &str, content: &str) {
        let _ = writeln!(
            self.out,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\"{extra}>{}</text>",
            esc(content)
        );
    }

    pub(super) fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str) {
        let _ = writeln!(
            self.out,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\"/>"
        );
    }

    pub(super) fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tip: &str) {
        let _ = writeln!(
            self.out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"><title>{}</title></rect>",
            w.max(0.0),
            esc(fill),
            esc(tip)
        );
    }

    /// The y axis at `left` and the x axis at `bottom`, in the plot's grey,
    /// and the x axis's label centred `label_dy` below it.
    pub(super) fn axes(
        &mut self,
        (left, right): (f64, f64),
        (top, bottom): (f64, f64),
        x_label: &str,
        label_dy: f64,
    ) {
        self.line(left, top, left, bottom, "#555555");
        self.line(left, bottom, right, bottom, "#555555");
        self.text(
            (left + right) / 2.0,
            bottom + label_dy,
            "middle",
            "",
            x_label,
        );
    }

    /// Swatches and names in rows starting at `y` ([`legend_height`] tall).
    pub(super) fn legend(&mut self, items: &[(String, String, Key)], left: f64, y: f64) {
        for ((name, color, key), (x, row)) in items.iter().zip(legend_places(items, left)) {
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
        }
    }

    pub(super) fn finish(mut self) -> String {
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
pub(super) fn below_title(title: &str) -> f64 {
    34.0 + TITLE_ROW * title_lines(title).len().saturating_sub(1) as f64
}

/// Where each legend entry goes: its x, and its row's offset below the
/// legend's top (a row full at the chart's right edge starts the next).
fn legend_places(items: &[(String, String, Key)], left: f64) -> Vec<(f64, f64)> {
    let mut x = left;
    let mut row = 0.0;
    items
        .iter()
        .map(|(name, _, _)| {
            let w = 22.0 + name.chars().count() as f64 * CHAR_W + 14.0;
            if x + w > WIDTH - 10.0 && x > left {
                x = left;
                row += LEGEND_ROW;
            }
            let place = (x, row);
            x += w;
            place
        })
        .collect()
}

/// How tall the legend's rows are.
pub(super) fn legend_height(items: &[(String, String, Key)], left: f64) -> f64 {
    legend_places(items, left)
        .last()
        .map_or(0.0, |&(_, row)| row + LEGEND_ROW)
}
