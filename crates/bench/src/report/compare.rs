//! Ratio lines: systems measured at the same label (system names aside),
//! sweep point and phase, compared on their medians, with how many rounds
//! agree.

use super::build::{base_system, has_points, labels_are_systems, verdicts_on_p95, SYSTEMS};
use super::fmt;
use crate::results::{Figures, Group, Row};
use crate::window;

/// A label's words without system names and bare punctuation, lowercased:
/// "sluice -> petstore" and "haproxy -> petstore" both give "petstore".
pub(crate) fn stem(label: &str, systems: &[&str]) -> String {
    label
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .filter(|w| !systems.iter().any(|s| s.eq_ignore_ascii_case(w)))
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The system the others are compared with: sluice, else the backend,
/// else the first one.
fn subject<'a>(systems: &[&'a str]) -> Option<&'a str> {
    ["sluice", "backend"]
        .iter()
        .find_map(|s| systems.iter().find(|x| **x == *s).copied())
        .or_else(|| systems.first().copied())
}

/// Whether a system is a peer: neither sluice (any policy) nor the backend.
fn is_peer(system: &str) -> bool {
    !matches!(base_system(system), "sluice" | "backend")
}

/// The best of `rows` on the figure the verdicts are on: the most req/s,
/// or, `latency_only`, the lowest p95; among the comparable rows when
/// there are any.
fn best<'a>(rows: &[&'a Row], latency_only: bool) -> Option<&'a Row> {
    let comparable: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| window::comparable(r))
        .collect();
    let rows = if comparable.is_empty() {
        rows
    } else {
        &comparable[..]
    };
    if latency_only {
        rows.iter()
            .copied()
            .min_by_key(|r| r.figures.latency.p95_us)
    } else {
        rows.iter().copied().max_by(|x, y| {
            x.figures
                .requests_per_sec
                .total_cmp(&y.figures.requests_per_sec)
        })
    }
}

/// `b`'s name in a ratio line: "haproxy", or "haproxy (best of 5 peers)"
/// when it was picked among several.
fn against(b: &Row, among: usize) -> String {
    if among > 1 {
        format!("{} (best of {among} peers)", b.system)
    } else {
        b.system.clone()
    }
}

/// `a` against the backend rows among `others` and against the best of
/// the peers among them, a line each.
fn against_best(a: &Row, others: &[&Row], latency_only: bool) -> Vec<String> {
    let (peers, rest): (Vec<&Row>, Vec<&Row>) =
        others.iter().copied().partition(|r| is_peer(&r.system));
    let mut lines: Vec<String> = rest
        .iter()
        .map(|b| compare(a, b, latency_only, 1))
        .collect();
    if let Some(b) = best(&peers, latency_only) {
        lines.push(compare(a, b, latency_only, peers.len()));
    }
    lines
}

/// "sluice vs haproxy: 1.12x req/s (3/3 rounds agree), 0.89x avg (3/3
/// rounds agree), 0.85x p99 latency (a tie in 3/3 rounds)"; in the users
/// and open models p95, p99 and the answered req/s (there the load offered
/// is the same for every system, and one that falls behind answers less).
/// Each ratio is printed only when the rounds agree on it (see
/// [`verdict`]); a row that is not comparable gets no ratio at all.
/// `among`: how many peers `b` was the best of.
fn compare(a: &Row, b: &Row, latency_only: bool, among: usize) -> String {
    let head = format!("{} vs {}", a.system, against(b, among));
    let unfit: Vec<&str> = [a, b]
        .into_iter()
        .filter(|r| !window::comparable(r))
        .map(|r| r.system.as_str())
        .collect();
    if !unfit.is_empty() {
        return format!(
            "{head}: not comparable ({} not: see the rows marked{})",
            unfit.join(" and "),
            super::build::NOT_COMPARABLE_MARK
        );
    }
    let rps = |f: &Figures| f.requests_per_sec;
    let p95 = |f: &Figures| f.latency.p95_us as f64;
    let p99 = |f: &Figures| f.latency.p99_us as f64;
    let avg = |f: &Figures| f.latency.avg_us;
    let parts = if latency_only {
        [
            verdict(a, b, p95, LATENCY_TIE, "p95"),
            verdict(a, b, p99, LATENCY_TIE, "p99 latency"),
            verdict(a, b, rps, THROUGHPUT_TIE, "answered req/s"),
        ]
    } else {
        [
            verdict(a, b, rps, THROUGHPUT_TIE, "req/s"),
            verdict(a, b, avg, LATENCY_TIE, "avg"),
            verdict(a, b, p99, LATENCY_TIE, "p99 latency"),
        ]
    };
    format!("{head}: {}", parts.join(", "))
}

/// Within this share of 1x a round's throughput ratio is a tie.
const THROUGHPUT_TIE: f64 = 0.05;
/// Within this share of 1x a round's latency ratio is a tie (latency
/// percentiles move more from run to run than throughput does).
const LATENCY_TIE: f64 = 0.10;

/// Where a round's ratio stands: ahead, behind, or within the tie band.
fn side(ratio: Option<f64>, tie: f64) -> Option<std::cmp::Ordering> {
    let r = ratio.filter(|r| r.is_finite())?;
    Some(if r > 1.0 + tie {
        std::cmp::Ordering::Greater
    } else if r < 1.0 - tie {
        std::cmp::Ordering::Less
    } else {
        std::cmp::Ordering::Equal
    })
}

/// `a`'s figure against `b`'s, as "1.12x req/s (3/3 rounds agree)" when
/// every round (round i of one against round i of the other) stands on
/// the same side as the medians, "1.01x req/s (a tie in 3/3 rounds)" when
/// every round is within `tie` of 1x, and "req/s: rounds disagree
/// (0.93x-1.08x)" otherwise: no ratio then, the rows are within the noise
/// of each other. One round has nothing to agree with: "1.12x req/s".
fn verdict(a: &Row, b: &Row, get: fn(&Figures) -> f64, tie: f64, what: &str) -> String {
    let median = fmt::times(fmt::ratio(get(&a.figures), get(&b.figures)));
    let rounds: Vec<Option<f64>> = a
        .rounds
        .iter()
        .zip(&b.rounds)
        .map(|(x, y)| fmt::ratio(get(x), get(y)))
        .collect();
    let n = rounds.len();
    if n < 2 {
        return format!("{median} {what}");
    }
    let sides: Vec<_> = rounds.iter().map(|r| side(*r, tie)).collect();
    let agreed = sides[0].filter(|first| sides.iter().all(|s| *s == Some(*first)));
    match agreed {
        Some(std::cmp::Ordering::Equal) => format!("{median} {what} (a tie in {n}/{n} rounds)"),
        Some(_) => format!("{median} {what} ({n}/{n} rounds agree)"),
        None => {
            let known: Vec<f64> = rounds.iter().flatten().copied().collect();
            let lo = known.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = known.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            format!(
                "{what}: rounds disagree ({}-{})",
                fmt::times(Some(lo)),
                fmt::times(Some(hi))
            )
        }
    }
}

/// Ratio lines between systems measured at the same label (system names
/// aside), sweep point and phase: sluice (else the backend) against the
/// backend and against the best peer.
pub(crate) fn ratios(group: &Group) -> Vec<String> {
    if group.rows.iter().any(|r| r.idle.is_some()) {
        return idle_ratios(group);
    }
    if labels_are_systems(group) && !has_points(group) {
        // lb-slow: each row is a proxy's policy; the labels have nothing in
        // common to pair them by, and every row answers the same question.
        let (ours, theirs): (Vec<&Row>, Vec<&Row>) = group
            .rows
            .iter()
            .partition(|r| base_system(&r.system) == "sluice");
        return ours
            .iter()
            .flat_map(|a| against_best(a, &theirs, false))
            .collect();
    }
    let mut systems: Vec<&str> = SYSTEMS.to_vec();
    for row in &group.rows {
        if !systems.contains(&row.system.as_str()) {
            systems.push(&row.system);
        }
    }
    let latency_only = verdicts_on_p95(group);
    // Rows by key, keys in order of first appearance.
    type Key = (String, Option<u64>, Option<String>);
    let mut keys: Vec<(Key, Vec<&Row>)> = Vec::new();
    for row in &group.rows {
        let key: Key = (
            stem(&row.label, &systems),
            row.sweep.as_ref().map(|s| s.value.to_bits()),
            row.phase.clone(),
        );
        match keys.iter_mut().find(|(k, _)| *k == key) {
            Some((_, rows)) => rows.push(row),
            None => keys.push((key, vec![row])),
        }
    }
    let mut lines = Vec::new();
    for (_, rows) in &keys {
        let mut present: Vec<&str> = Vec::new();
        for r in rows {
            if !present.contains(&r.system.as_str()) {
                present.push(&r.system);
            }
        }
        if present.len() < 2 {
            continue;
        }
        let Some(subject) = subject(&present) else {
            continue;
        };
        let Some(a) = rows.iter().find(|r| r.system == subject) else {
            continue;
        };
        let context = context(a, &systems);
        let others: Vec<&Row> = rows
            .iter()
            .copied()
            .filter(|r| r.system != subject)
            .collect();
        for line in against_best(a, &others, latency_only) {
            lines.push(format!("{context}{line}"));
        }
    }
    if lines.is_empty() && !has_points(group) {
        // One row per system whose labels differ in more than the system name.
        let mut present: Vec<&str> = Vec::new();
        for r in &group.rows {
            if !present.contains(&r.system.as_str()) {
                present.push(&r.system);
            }
        }
        if present.len() >= 2 && present.len() == group.rows.len() {
            if let Some(subject) = subject(&present) {
                if let Some(a) = group.rows.iter().find(|r| r.system == subject) {
                    let others: Vec<&Row> =
                        group.rows.iter().filter(|r| r.system != subject).collect();
                    let (peers, rest): (Vec<&Row>, Vec<&Row>) =
                        others.into_iter().partition(|r| is_peer(&r.system));
                    let best = best(&peers, latency_only);
                    for b in rest.into_iter().chain(best) {
                        let among = if is_peer(&b.system) { peers.len() } else { 1 };
                        lines.push(format!(
                            "{} / {}: {}",
                            a.label,
                            b.label,
                            compare(a, b, latency_only, among)
                        ));
                    }
                }
            }
        }
    }
    lines
}

/// The idle group, whose rows ran no load: sluice against the peer whose
/// idle connections cost the fewest bytes, per protocol and count
/// ("HTTP/1.1 @ 10,000: sluice vs haproxy (best of 5 peers): 2.07x bytes
/// per idle connection"; below 1x is better).
fn idle_ratios(group: &Group) -> Vec<String> {
    let mut lines = Vec::new();
    for a in group.rows.iter().filter(|r| r.system == "sluice") {
        let Some(mine) = &a.idle else { continue };
        let peers: Vec<(&Row, f64)> = group
            .rows
            .iter()
            .filter(|b| {
                b.system != a.system
                    && b.load.protocol == a.load.protocol
                    && b.load.connections == a.load.connections
            })
            .filter_map(|b| Some((b, b.idle.as_ref()?.bytes_per_connection)))
            .collect();
        let Some((b, theirs)) = peers.iter().min_by(|x, y| x.1.total_cmp(&y.1)) else {
            continue;
        };
        lines.push(format!(
            "{} @ {}: {} vs {}: {} bytes per idle connection",
            a.load.protocol,
            fmt::count(a.load.connections as f64),
            a.system,
            against(b, peers.len()),
            fmt::times(fmt::ratio(mine.bytes_per_connection, *theirs)),
        ));
    }
    lines
}

/// "petstore, connections 500: " or "".
fn context(row: &Row, systems: &[&str]) -> String {
    // Sweep labels read "sluice -> customers @ 1000 req/s, cold": the point
    // after the `@` is said better by the point itself.
    let label = row.label.split(" @ ").next().unwrap_or(&row.label);
    let mut words = stem(label, systems);
    if row.sweep.is_some() || row.phase.is_some() {
        words = words
            .split(' ')
            .filter(|w| !w.chars().any(|c| c.is_ascii_digit()))
            .filter(|w| Some(*w) != row.phase.as_deref())
            .collect::<Vec<_>>()
            .join(" ");
    }
    let parts: Vec<String> = [words, fmt::point(row)]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("{}: ", parts.join(", "))
    }
}
