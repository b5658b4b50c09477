//! Thresholds (k6's `thresholds`): a figure, a comparison and a value,
//! like `p99 < 5ms`, `errors < 0.1%`, `rate >= 0.98 * target` or
//! `checks > 99.9%`, on one scenario or all of them together. A run whose
//! threshold fails exits 99 (docs/LOAD.md, "Thresholds").
//!
//! ```text
//! threshold := figure op value
//! figure    := [phase "."] stat | "errors" ["." kind] | "failed" | "non_2xx"
//!            | "rate" | "requests" | "unsent" | "checks" ["." name]
//! phase     := uncorrected | lateness | waiting | ttfb | receiving | connect | tls | dns
//! stat      := pN | p(N) | avg | mean | med | median | min | max
//! op        := < | <= | > | >= | == | !=
//! value     := duration (5ms, 250us, 1.5s) | N% | N | [N *] target
//! ```

use std::fmt;

use hdrhistogram::Histogram;

use crate::{
    figures::Figures,
    format::{format_count, format_us},
};

/// Longest threshold text.
const MAX_TEXT: usize = 300;

/// One threshold, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// As written.
    pub text: String,
    figure: Figure,
    op: Op,
    value: Value,
}

#[derive(Debug, Clone, PartialEq)]
enum Figure {
    /// A statistic of a histogram in µs (lateness: in ns, shown in µs).
    Time(Source, Stat),
    /// Transport errors over attempts (responses + errors), or of one kind.
    Errors(Option<String>),
    /// Non-2xx/3xx answers and errors over attempts (k6's `http_req_failed`).
    Failed,
    /// Non-2xx/3xx answers over answers.
    Non2xx,
    /// Answers per second of measured time.
    Rate,
    Requests,
    Unsent,
    /// Passed verdicts over all verdicts, of every check or of one.
    Checks(Option<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Latency,
    Uncorrected,
    Lateness,
    Waiting,
    Receiving,
    Connect,
    Tls,
    Dns,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Stat {
    Percentile(f64),
    Mean,
    Min,
    Max,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Value {
    /// µs.
    Time(f64),
    /// A share in % (0 to 100).
    Percent(f64),
    Number(f64),
    /// This many times the target rate.
    TimesTarget(f64),
}

const KINDS: [&str; 5] = ["connect", "read", "write", "timeout", "parse"];

impl Threshold {
    /// Parses `text`; the error says what is wrong and what is expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.len() > MAX_TEXT {
            return Err(format!("a threshold is at most {MAX_TEXT} characters"));
        }
        let at = text.find(['<', '>', '=', '!']).ok_or_else(|| {
            format!("`{text}`: no comparison (<, <=, >, >=, ==, !=), as in `p99 < 5ms`")
        })?;
        let (figure, rest) = text.split_at(at);
        let (op, value) = match rest.as_bytes() {
            [b'<', b'=', ..] => (Op::Le, &rest[2..]),
            [b'>', b'=', ..] => (Op::Ge, &rest[2..]),
            [b'=', b'=', ..] => (Op::Eq, &rest[2..]),
            [b'!', b'=', ..] => (Op::Ne, &rest[2..]),
            [b'<', ..] => (Op::Lt, &rest[1..]),
            [b'>', ..] => (Op::Gt, &rest[1..]),
            _ => {
                return Err(format!(
                    "`{text}`: the comparison is one of <, <=, >, >=, ==, !="
                ))
            }
        };
        let figure = parse_figure(figure.trim()).map_err(|why| format!("`{text}`: {why}"))?;
        let value = parse_value(value.trim()).map_err(|why| format!("`{text}`: {why}"))?;
        check_units(&figure, &value).map_err(|why| format!("`{text}`: {why}"))?;
        Ok(Self {
            text: text.trim().to_string(),
            figure,
            op,
            value,
        })
    }

    /// The check this threshold names, if any (it must exist).
    pub fn check_name(&self) -> Option<&str> {
        match &self.figure {
            Figure::Checks(Some(name)) => Some(name),
            _ => None,
        }
    }

    /// Whether `observed` meets the threshold, and the figure as read
    /// (`1.23ms`, `0.05%`, `no answers`). No data fails.
    pub(crate) fn evaluate(&self, observed: &Observed<'_>) -> (bool, String) {
        let (value, shown) = match self.read(observed) {
            Some(read) => read,
            None => return (false, "no data".into()),
        };
        let (limit, shown) = match self.value {
            Value::Time(us) => (us, shown),
            Value::Percent(p) => (p, shown),
            Value::Number(n) => (n, shown),
            Value::TimesTarget(times) => match observed.target_rate() {
                Some(target) => (
                    times * target,
                    format!("{shown}, target {}/s", format_count(target)),
                ),
                None => {
                    return (
                        false,
                        format!("{shown}, no target rate (not the open model)"),
                    )
                }
            },
        };
        let passed = match self.op {
            Op::Lt => value < limit,
            Op::Le => value <= limit,
            Op::Gt => value > limit,
            Op::Ge => value >= limit,
            Op::Eq => value == limit,
            Op::Ne => value != limit,
        };
        (passed, shown)
    }

    /// The figure's value in the threshold's unit, and as shown.
    fn read(&self, observed: &Observed<'_>) -> Option<(f64, String)> {
        let figures = observed.figures;
        let attempts = figures.responses() + figures.errors.total();
        let share = |part: u64, whole: u64| (whole > 0).then(|| part as f64 * 100.0 / whole as f64);
        let count = matches!(self.value, Value::Number(_));
        let shown_share = |part: u64, whole: u64| -> Option<(f64, String)> {
            if count {
                return Some((part as f64, part.to_string()));
            }
            let pct = share(part, whole)?;
            Some((pct, format!("{pct:.3}% ({part} of {whole})")))
        };
        match &self.figure {
            Figure::Time(source, stat) => {
                let histogram = source.histogram(figures)?;
                if histogram.is_empty() {
                    return None;
                }
                let scale = if *source == Source::Lateness {
                    1000.0
                } else {
                    1.0
                };
                let raw = match stat {
                    Stat::Percentile(p) => histogram.value_at_percentile(*p) as f64,
                    Stat::Mean => histogram.mean(),
                    Stat::Min => histogram.min() as f64,
                    Stat::Max => histogram.max() as f64,
                };
                let us = raw / scale;
                Some((us, format_us(us)))
            }
            Figure::Errors(None) => shown_share(figures.errors.total(), attempts),
            Figure::Errors(Some(kind)) => {
                let n = figures
                    .errors
                    .by_kind()
                    .iter()
                    .find(|(name, _)| name == kind)
                    .map_or(0, |(_, n)| *n);
                shown_share(n, attempts)
            }
            Figure::Failed => shown_share(figures.non_2xx_3xx() + figures.errors.total(), attempts),
            Figure::Non2xx => shown_share(figures.non_2xx_3xx(), figures.responses()),
            Figure::Rate => {
                let seconds = observed.elapsed_s;
                (seconds > 0.0).then(|| {
                    let rate = figures.responses() as f64 / seconds;
                    (rate, format!("{}/s", format_count(rate)))
                })
            }
            Figure::Requests => {
                let n = figures.responses();
                Some((n as f64, n.to_string()))
            }
            Figure::Unsent => Some((observed.unsent as f64, observed.unsent.to_string())),
            Figure::Checks(name) => {
                let counts = figures.checks.iter().zip(observed.check_names);
                let (passed, all) = counts
                    .filter(|(_, check)| name.as_ref().is_none_or(|name| name == *check))
                    .fold((0, 0), |(p, a), (c, _)| {
                        (p + c.passed, a + c.passed + c.failed)
                    });
                shown_share(passed, all)
            }
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Source {
    fn histogram<'a>(&self, figures: &'a Figures) -> Option<&'a Histogram<u64>> {
        let phases = &figures.phases;
        Some(match self {
            Source::Latency => &figures.latency,
            Source::Uncorrected => figures.uncorrected.as_ref()?,
            Source::Lateness => figures.lateness.as_ref()?,
            Source::Waiting => &phases.waiting,
            Source::Receiving => &phases.receiving,
            Source::Connect => &phases.connect,
            Source::Tls => &phases.tls,
            Source::Dns => &phases.dns,
        })
    }
}

/// What a threshold reads: a scenario's (or all scenarios') figures so far.
#[derive(Debug)]
pub(crate) struct Observed<'a> {
    pub(crate) figures: &'a Figures,
    /// Measured time, in seconds.
    pub(crate) elapsed_s: f64,
    /// Open model: requests due in the measured time.
    pub(crate) due: Option<f64>,
    pub(crate) unsent: u64,
    /// The names of the checks, in the order of `figures.checks`.
    pub(crate) check_names: &'a [String],
}

impl Observed<'_> {
    fn target_rate(&self) -> Option<f64> {
        let due = self.due?;
        (self.elapsed_s > 0.0).then(|| due / self.elapsed_s)
    }
}

fn parse_figure(text: &str) -> Result<Figure, String> {
    let expected = "the figure is a latency statistic (p99, p(99.9), avg, med, min, max), \
                    a phase's (waiting.p99, connect.max, ...), errors, failed, non_2xx, rate, \
                    requests, unsent or checks";
    let lower = text.to_ascii_lowercase();
    let figure = match lower.as_str() {
        "errors" => Figure::Errors(None),
        "failed" => Figure::Failed,
        "non_2xx" => Figure::Non2xx,
        "rate" => Figure::Rate,
        "requests" => Figure::Requests,
        "unsent" => Figure::Unsent,
        "checks" => Figure::Checks(None),
        _ => {
            if let Some(kind) = lower.strip_prefix("errors.") {
                if !KINDS.contains(&kind) {
                    return Err(format!("errors.{kind}: the kinds are {}", KINDS.join(", ")));
                }
                return Ok(Figure::Errors(Some(kind.to_string())));
            }
            if let Some(name) = text
                .get("checks.".len()..)
                .filter(|_| lower.starts_with("checks."))
            {
                let name = name.trim();
                if name.is_empty() {
                    return Err("checks.NAME: name a check".into());
                }
                return Ok(Figure::Checks(Some(name.to_string())));
            }
            let (source, stat) = match lower.split_once('.') {
                Some((phase, stat)) => (phase_source(phase).ok_or_else(|| {
                    format!("`{phase}` is not a phase: uncorrected, lateness, waiting (ttfb), receiving, connect, tls or dns")
                })?, stat),
                None => (Source::Latency, lower.as_str()),
            };
            let stat = parse_stat(stat).ok_or_else(|| format!("`{text}`: {expected}"))?;
            Figure::Time(source, stat)
        }
    };
    Ok(figure)
}

fn phase_source(name: &str) -> Option<Source> {
    Some(match name {
        "latency" => Source::Latency,
        "uncorrected" => Source::Uncorrected,
        "lateness" => Source::Lateness,
        "waiting" | "ttfb" => Source::Waiting,
        "receiving" | "receive" => Source::Receiving,
        "connect" | "connecting" => Source::Connect,
        "tls" => Source::Tls,
        "dns" => Source::Dns,
        _ => return None,
    })
}

fn parse_stat(text: &str) -> Option<Stat> {
    Some(match text {
        "avg" | "mean" => Stat::Mean,
        "med" | "median" => Stat::Percentile(50.0),
        "min" => Stat::Min,
        "max" => Stat::Max,
        _ => {
            let number = text.strip_prefix('p')?;
            let number = number
                .strip_prefix('(')
                .and_then(|n| n.strip_suffix(')'))
                .unwrap_or(number);
            let p: f64 = number.trim().parse().ok()?;
            if !(0.0..=100.0).contains(&p) {
                return None;
            }
            Stat::Percentile(p)
        }
    })
}

fn parse_value(text: &str) -> Result<Value, String> {
    let expected =
        "the value is a time (5ms, 250us, 1.5s), a share (0.1%), a number, or N * target";
    if text.is_empty() {
        return Err(expected.into());
    }
    let lower = text.to_ascii_lowercase();
    if let Some(times) = lower.strip_suffix("target") {
        let times = times.trim();
        let times = match times.strip_suffix('*') {
            Some(n) => parse_number(n.trim()).ok_or(expected)?,
            None if times.is_empty() => 1.0,
            None => return Err(expected.into()),
        };
        return Ok(Value::TimesTarget(times));
    }
    if let Some(pct) = lower.strip_suffix('%') {
        let pct = parse_number(pct.trim()).ok_or(expected)?;
        if !(0.0..=100.0).contains(&pct) {
            return Err(format!("{text}: a share is 0% to 100%"));
        }
        return Ok(Value::Percent(pct));
    }
    if let Some(n) = parse_number(&lower) {
        return Ok(Value::Number(n));
    }
    // A time: a number and a unit.
    let split = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or(expected)?;
    let number = parse_number(lower[..split].trim()).ok_or(expected)?;
    let us = match lower[split..].trim() {
        "ns" => number / 1000.0,
        "us" | "µs" => number,
        "ms" => number * 1e3,
        "s" => number * 1e6,
        "m" | "min" => number * 60e6,
        _ => return Err(expected.into()),
    };
    Ok(Value::Time(us))
}

fn parse_number(text: &str) -> Option<f64> {
    let n: f64 = text.parse().ok()?;
    (n.is_finite() && n >= 0.0).then_some(n)
}

/// A time figure takes a time, a share a share (or a count), the rate a
/// number or the target.
fn check_units(figure: &Figure, value: &Value) -> Result<(), String> {
    let ok = match (figure, value) {
        (Figure::Time(..), Value::Time(_)) => true,
        (Figure::Time(..), _) => {
            return Err("a time needs a unit: 5ms, 250us, 1.5s".into());
        }
        (Figure::Checks(_), Value::Percent(_)) => true,
        (Figure::Checks(_), _) => return Err("checks take a share: checks > 99.9%".into()),
        (
            Figure::Errors(_) | Figure::Failed | Figure::Non2xx,
            Value::Percent(_) | Value::Number(_),
        ) => true,
        (Figure::Rate, Value::Number(_) | Value::TimesTarget(_)) => true,
        (Figure::Requests | Figure::Unsent, Value::Number(_)) => true,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err("this figure and this value do not compare: errors, failed and non_2xx take a share (0.1%) or a count; rate a number or N * target; requests and unsent a number".into())
    }
}

#[cfg(test)]
mod tests;
