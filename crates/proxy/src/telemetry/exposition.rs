//! The one writer of the Prometheus text exposition format (version
//! 0.0.4): every `/metrics` family goes through it, so HELP and TYPE come
//! once per family, a family's samples stay together even when several
//! writers add to it in turn (each handler instance writes its own
//! samples: the text format wants a family's lines contiguous), label
//! values and help texts are escaped, and histograms get their `_bucket`
//! (with `le`, cumulative, ending at `+Inf`), `_sum` and `_count` series.
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

/// The text of one scrape: its families in the order they were first
/// written, each with every sample written to it.
#[derive(Debug, Default)]
pub(crate) struct Exposition {
    families: Vec<FamilyText>,
}

/// One family's text so far.
#[derive(Debug)]
struct FamilyText {
    name: &'static str,
    /// HELP, TYPE and the samples written one by one.
    text: String,
    /// Samples summed over their writers ([`Family::add`]): the labels as
    /// written, and the sum.
    totals: Vec<(String, u64)>,
}

/// Label names and their values (escaped when written).
pub(crate) type Labels<'a> = [(&'a str, &'a str)];

impl Exposition {
    pub(crate) fn new() -> Self {
        Self {
            families: Vec::with_capacity(64),
        }
    }

    /// The family `name` (started with its HELP and TYPE, unless written
    /// already) and the handle its samples are written through.
    pub(crate) fn family(
        &mut self,
        name: &'static str,
        kind: MetricKind,
        help: &str,
    ) -> Family<'_> {
        let at = match self.families.iter().position(|f| f.name == name) {
            Some(at) => at,
            None => {
                let help = help.replace('\\', "\\\\").replace('\n', "\\n");
                let mut text = String::with_capacity(256);
                let _ = writeln!(
                    text,
                    "# HELP {name} {help}\n# TYPE {name} {}",
                    kind.as_str()
                );
                self.families.push(FamilyText {
                    name,
                    text,
                    totals: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        Family {
            to: &mut self.families[at],
        }
    }

    pub(crate) fn finish(self) -> String {
        let mut out = String::with_capacity(
            self.families
                .iter()
                .map(|f| f.text.len() + 64 * f.totals.len())
                .sum(),
        );
        for family in self.families {
            out.push_str(&family.text);
            for (labels, total) in family.totals {
                let _ = writeln!(out, "{}{labels} {total}", family.name);
            }
        }
        out
    }
}

/// One family's samples.
#[derive(Debug)]
pub(crate) struct Family<'w> {
    to: &'w mut FamilyText,
}

impl Family<'_> {
    /// One counter or gauge sample.
    pub(crate) fn sample(&mut self, labels: &Labels<'_>, value: impl Display) -> &mut Self {
        self.line("", labels, None, value);
        self
    }

    /// Adds `value` to the sample with these labels, which is written once
    /// with the sum of what every writer added: a total over the instances
    /// of a handler type (`sluice_access_log_dropped_total`).
    pub(crate) fn add(&mut self, labels: &Labels<'_>, value: u64) -> &mut Self {
        let mut written = String::new();
        write_labels(&mut written, labels.iter().copied());
        match self.to.totals.iter_mut().find(|(l, _)| *l == written) {
            Some((_, total)) => *total += value,
            None => self.to.totals.push((written, value)),
        }
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
        let out = &mut self.to.text;
        out.push_str(self.to.name);
        out.push_str(suffix);
        let le = le.map(|le| ("le", le));
        write_labels(out, labels.iter().copied().chain(le));
        let _ = writeln!(out, " {value}");
    }
}

/// `{name="value",...}`, values escaped; nothing when there are none.
fn write_labels<'a>(out: &mut String, labels: impl Iterator<Item = (&'a str, &'a str)>) {
    let mut all = labels.peekable();
    if all.peek().is_none() {
        return;
    }
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

    #[test]
    fn a_family_written_in_turns_stays_together_and_totals_are_summed() {
        let mut text = Exposition::new();
        for instance in ["a", "b"] {
            text.family("x_total", MetricKind::Counter, "X.")
                .sample(&[("middleware", instance)], 1);
            text.family("y_total", MetricKind::Counter, "Y.")
                .add(&[], 2)
                .add(&[("k", "v")], 1);
        }
        assert_eq!(
            text.finish(),
            "# HELP x_total X.\n# TYPE x_total counter\n\
             x_total{middleware=\"a\"} 1\nx_total{middleware=\"b\"} 1\n\
             # HELP y_total Y.\n# TYPE y_total counter\ny_total 4\ny_total{k=\"v\"} 2\n"
        );
    }
}
