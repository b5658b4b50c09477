//! One table model drawn three ways: aligned plain text, Markdown, HTML.

use std::fmt::Write as _;

/// Where a column's cells sit: text left, numbers right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

#[derive(Debug, Clone)]
pub(crate) struct Column {
    pub(crate) name: String,
    pub(crate) align: Align,
    /// Spaces before the column in plain text (1 packs related columns).
    pub(crate) gap: usize,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    pub(crate) columns: Vec<Column>,
    pub(crate) rows: Vec<Vec<String>>,
    /// Rows drawn emphasised (the Times rows), by index in `rows`.
    pub(crate) strong: Vec<bool>,
}

impl Table {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds a column with the usual 2-space gap.
    pub(crate) fn col(mut self, name: &str, align: Align) -> Self {
        self.columns.push(Column {
            name: name.to_owned(),
            align,
            gap: 2,
        });
        self
    }

    /// Adds a column packed 1 space after the previous one.
    pub(crate) fn tight(mut self, name: &str, align: Align) -> Self {
        self.columns.push(Column {
            name: name.to_owned(),
            align,
            gap: 1,
        });
        self
    }

    pub(crate) fn push(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
        self.strong.push(false);
    }

    pub(crate) fn push_strong(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
        self.strong.push(true);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn cell<'a>(&'a self, row: &'a [String], i: usize) -> &'a str {
        row.get(i).map(String::as_str).unwrap_or("")
    }

    /// Plain text, columns aligned, no trailing spaces.
    pub(crate) fn text(&self) -> String {
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                self.rows
                    .iter()
                    .map(|r| width(self.cell(r, i)))
                    .chain(std::iter::once(width(&c.name)))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let header: Vec<String> = self.columns.iter().map(|c| c.name.clone()).collect();
        self.text_line(&mut out, &header, &widths);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        self.text_line(&mut out, &rule, &widths);
        for row in &self.rows {
            self.text_line(&mut out, row, &widths);
        }
        out
    }

    fn text_line(&self, out: &mut String, cells: &[String], widths: &[usize]) {
        let mut line = String::new();
        for (i, column) in self.columns.iter().enumerate() {
            if i > 0 {
                line.push_str(&" ".repeat(column.gap));
            }
            let cell = self.cell(cells, i);
            let pad = widths[i].saturating_sub(width(cell));
            match column.align {
                Align::Left => {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                }
                Align::Right => {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }

    /// A GitHub-flavoured Markdown table; strong rows in bold.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        out.push('|');
        for c in &self.columns {
            let _ = write!(out, " {} |", md_cell(&c.name));
        }
        out.push_str("\n|");
        for c in &self.columns {
            out.push_str(match c.align {
                Align::Left => "---|",
                Align::Right => "---:|",
            });
        }
        out.push('\n');
        for (row, strong) in self.rows.iter().zip(&self.strong) {
            out.push('|');
            for i in 0..self.columns.len() {
                let cell = md_cell(self.cell(row, i));
                if *strong && !cell.is_empty() {
                    let _ = write!(out, " **{cell}** |");
                } else {
                    let _ = write!(out, " {cell} |");
                }
            }
            out.push('\n');
        }
        out
    }

    /// An HTML table; numbers right-aligned by the `r` class.
    pub(crate) fn html(&self, class: &str) -> String {
        let mut out = String::new();
        let _ = write!(out, "<table class=\"{}\">\n<thead><tr>", esc(class));
        for c in &self.columns {
            let _ = write!(out, "<th{}>{}</th>", align_class(c.align), esc(&c.name));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for (row, strong) in self.rows.iter().zip(&self.strong) {
            out.push_str(if *strong {
                "<tr class=\"strong\">"
            } else {
                "<tr>"
            });
            for (i, c) in self.columns.iter().enumerate() {
                let _ = write!(
                    out,
                    "<td{}>{}</td>",
                    align_class(c.align),
                    esc(self.cell(row, i))
                );
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
        out
    }
}

fn align_class(align: Align) -> &'static str {
    match align {
        Align::Left => "",
        Align::Right => " class=\"r\"",
    }
}

/// Characters, not bytes: `µs` is 2 wide.
pub(crate) fn width(s: &str) -> usize {
    s.chars().count()
}

/// A Markdown cell: pipes escaped, one line.
pub(crate) fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// Markdown inline text outside tables: one line, `<` made harmless.
pub(crate) fn md_text(s: &str) -> String {
    s.replace(['\n', '\r'], " ").replace('<', "&lt;")
}

/// Text and attribute values for HTML/XML.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Not allowed in XML 1.0.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_text_and_escaped_markup() {
        let mut t = Table::new()
            .col("name", Align::Left)
            .col("req/s", Align::Right);
        t.push(vec!["a|b".into(), "1,000".into()]);
        t.push_strong(vec!["Times".into(), "2.00x".into()]);
        let text = t.text();
        assert_eq!(
            text,
            "name   req/s\n-----  -----\na|b    1,000\nTimes  2.00x\n"
        );
        let md = t.markdown();
        assert!(md.contains("| a\\|b | 1,000 |"), "{md}");
        assert!(md.contains("| **Times** | **2.00x** |"), "{md}");
        assert!(md.contains("|---|---:|"), "{md}");
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
