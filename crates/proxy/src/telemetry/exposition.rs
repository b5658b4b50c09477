//! The one writer of the Prometheus text exposition format (version
//! 0.0.4): every `/metrics` family goes through it, so HELP and TYPE come
//! once per family (even when several handlers add to one), label values
//! and help texts are escaped, and histograms get their `_bucket` (with
//! `le`, cumulative, ending at `+Inf`), `_sum` and `_count` series.
//!
//! Not OpenMetrics: Prometheus scrapes the classic format by default, and
//! sluice's counters carry no created timestamps or exemplars that would
//! need the other (docs/DASHBOARD.md).

use std::fmt::{Display, Write as _};

/// A family's type, as its `# TYPE` line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

impl MetricKind {
    fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        }
    }
}

/// The text of one scrape.
#[derive(Debug, Default)]
pub(crate) struct Exposition {
    out: String,
    /// Families whose HELP and TYPE are written.
    started: Vec<&'static str>,
}

/// Label names and their values (escaped when written).
pub(crate) type Labels<'a> = [(&'a str, &'a str)];

impl Exposition {
    pub(crate) fn new() -> Self {
        Self {
            out: String::with_capacity(4096),
            started: Vec::new(),
        }
    }

    /// Starts the family `name` (HELP and TYPE, unless written already)
    /// and gives the handle its samples are written through.
    pub(crate) fn family(
        &mut self,
        name: &'static str,
        kind: MetricKind,
        help: &str,
    ) -> Family<'_> {
        if !self.started.contains(&name) {
            self.started.push(name);
            let help = help.replace('\\', "\\\\").replace('\n', "\\n");
            let _ = writeln!(
                self.out,
                "# HELP {name} {help}\n# TYPE {name} {}",
                kind.as_str()
            );
        }
        Family { to: self, name }
    }

    pub(crate) fn finish(self) -> String {
        self.out
    }
}

/// One family's samples.
#[derive(Debug)]
pub(crate) struct Family<'w> {
    to: &'w mut Exposition,
    name: &'static str,
}

impl Family<'_> {
    /// One counter or gauge sample.
    pub(crate) fn sample(&mut self, labels: &Labels<'_>, value: impl Display) -> &mut Self {
        self.line("", labels, None, value);
        self
    }

    /// One histogram series: `buckets` are (upper bound, observations in
    /// that bucket alone), in increasing bound order; `count` includes
    /// those above the last bound.
    pub(crate) fn histogram(
        &mut self,
        labels: &Labels<'_>,
        buckets: impl IntoIterator<Item = (f64, u64)>,
        sum: f64,
        count: u64,
    ) -> &mut Self {
        let mut cumulative = 0;
        for (bound, n) in buckets {
            cumulative += n;
            self.line("_bucket", labels, Some(&bound.to_string()), cumulative);
        }
        self.line("_bucket", labels, Some("+Inf"), count);
        self.line("_sum", labels, None, sum);
        self.line("_count", labels, None, count);
        self
    }

    fn line(&mut self, suffix: &str, labels: &Labels<'_>, le: Option<&str>, value: impl Display) {
        let out = &mut self.to.out;
        out.push_str(self.name);
        out.push_str(suffix);
        let le = le.map(|le| ("le", le));
        let mut all = labels.iter().copied().chain(le).peekable();
        if all.peek().is_some() {
            out.push('{');
            for (i, (name, value)) in all.enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(name);
                out.push_str("=\"");
                escape_into(out, value);
                out.push('"');
            }
            out.push('}');
        }
        let _ = writeln!(out, " {value}");
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_and_type_once_per_family_and_values_escaped() {
        let mut text = Exposition::new();
        text.family("t_total", MetricKind::Counter, "Things.\nBy a \\ kind.")
            .sample(&[("kind", "a\"b\\c\nd")], 3);
        text.family("t_total", MetricKind::Counter, "Things.")
            .sample(&[("kind", "e")], 4u64);
        text.family("g", MetricKind::Gauge, "A gauge.")
            .sample(&[], -2i64);
        let text = text.finish();
        assert_eq!(
            text,
            "# HELP t_total Things.\\nBy a \\\\ kind.\n# TYPE t_total counter\n\
             t_total{kind=\"a\\\"b\\\\c\\nd\"} 3\nt_total{kind=\"e\"} 4\n\
             # HELP g A gauge.\n# TYPE g gauge\ng -2\n"
        );
    }

    #[test]
    fn histograms_are_cumulative_and_end_at_inf() {
        let mut text = Exposition::new();
        text.family("h_seconds", MetricKind::Histogram, "H.")
            .histogram(&[("route", "r")], [(0.5, 1), (1.0, 2)], 2.25, 4);
        text.family("h_seconds", MetricKind::Histogram, "H.")
            .histogram(&[], [(0.5, 0)], 0.0, 0);
        assert_eq!(
            text.finish(),
            "# HELP h_seconds H.\n# TYPE h_seconds histogram\n\
             h_seconds_bucket{route=\"r\",le=\"0.5\"} 1\nh_seconds_bucket{route=\"r\",le=\"1\"} 3\n\
             h_seconds_bucket{route=\"r\",le=\"+Inf\"} 4\nh_seconds_sum{route=\"r\"} 2.25\n\
             h_seconds_count{route=\"r\"} 4\n\
             h_seconds_bucket{le=\"0.5\"} 0\nh_seconds_bucket{le=\"+Inf\"} 0\n\
             h_seconds_sum 0\nh_seconds_count 0\n"
        );
    }
}
