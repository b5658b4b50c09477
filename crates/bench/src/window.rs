//! Windows long enough for the latency they measure. A run whose measured
//! time is not several times the latency its requests see describes the
//! start of a queue, not a steady state: a request that takes 3 s fits
//! into a 3 s window once, and one still waiting at the end counts as
//! neither answered nor failed. The latency a window saw is the higher of
//! its p99 and, by Little's law, the time its requests still in flight at
//! the end stand for (in flight ÷ answered per second), so that a window
//! in which next to nothing was answered is not taken for a fast one.
//!
//! A row whose window was too short is marked not comparable; in the
//! saturating groups (lb, io, the runtimes groups), unless `--duration`
//! fixed the windows, the bench first measures it again with a window
//! long enough (see [`longer`]).

use std::time::Duration;

use crate::{
    fmt,
    results::{Figures, Row},
};

/// A window must be this many times the latency it saw.
pub(crate) const WINDOW_FACTOR: f64 = 3.0;
/// The longest window the bench lengthens a row to.
pub(crate) const MAX_WINDOW: Duration = Duration::from_secs(60);
/// The longest warm-up it gives a lengthened row.
const MAX_WARMUP: Duration = Duration::from_secs(30);

/// The latency a run's window saw, µs (infinite when requests were in
/// flight at the end and none was answered).
pub(crate) fn latency_seen(f: &Figures) -> f64 {
    let p99 = f.latency.p99_us as f64;
    if f.unanswered == 0 {
        return p99;
    }
    let answered_per_us = f.requests as f64 / (f.measured_s * 1e6);
    let waiting = if answered_per_us > 0.0 {
        f.unanswered as f64 / answered_per_us
    } else {
        f64::INFINITY
    };
    p99.max(waiting)
}

/// Why a run's window was too short for its latency, if it was.
pub(crate) fn too_short(f: &Figures) -> Option<String> {
    if f.measured_s <= 0.0 || f.requests + f.unanswered == 0 {
        return None;
    }
    let seen = latency_seen(f);
    if f.measured_s * 1e6 >= WINDOW_FACTOR * seen {
        return None;
    }
    let measured = fmt::micros(f.measured_s * 1e6);
    let unanswered = fmt::count(f.unanswered as f64);
    Some(if seen.is_finite() {
        format!(
            "window shorter than its latency: {measured} measured against a latency of {} (its \
             p99, or what the {unanswered} requests unanswered at the end stand for); a window \
             must be {WINDOW_FACTOR}x its latency",
            fmt::micros(seen)
        )
    } else {
        format!(
            "window shorter than its latency: {measured} measured and none of its requests was \
             answered ({unanswered} unanswered at the end)"
        )
    })
}

/// A warm-up and measured time long enough for what `f` saw, if the
/// current ones (`warmup`, `duration`) were not: the measured time
/// [`WINDOW_FACTOR`] times the latency seen, a quarter to spare, in whole
/// seconds, at most [`MAX_WINDOW`]; the warm-up long enough for a user to
/// come round twice at that latency (`think` its longest pause), so that
/// the queue has settled before the measured time. `None` when the window
/// was long enough or is already the longest.
pub(crate) fn longer(
    f: &Figures,
    think: Duration,
    (warmup, duration): (Duration, Duration),
) -> Option<(Duration, Duration)> {
    too_short(f)?;
    if duration >= MAX_WINDOW {
        return None;
    }
    let seen = latency_seen(f).min(MAX_WINDOW.as_secs_f64() * 1e6) / 1e6;
    let wanted = (WINDOW_FACTOR * seen * 1.25).ceil();
    let measured = Duration::from_secs_f64(wanted)
        .clamp(duration, MAX_WINDOW)
        .max(duration + Duration::from_secs(1))
        .min(MAX_WINDOW);
    let settle = Duration::from_secs_f64(2.0 * seen.ceil()) + think;
    let warmup = settle.clamp(warmup, MAX_WARMUP.max(warmup));
    Some((warmup, measured))
}

/// Why a row's rounds cannot be compared with other rows: a window too
/// short for its latency, a run that started before its target drained,
/// answers other than the status the row measures. Each reason once,
/// from the round that shows it most.
pub(crate) fn reasons(rounds: &[Figures]) -> Vec<String> {
    let mut out = Vec::new();
    let shortest = rounds
        .iter()
        .filter(|f| too_short(f).is_some())
        .max_by(|a, b| {
            let ratio = |f: &Figures| latency_seen(f) / (f.measured_s * 1e6);
            ratio(a).total_cmp(&ratio(b))
        });
    if let Some(reason) = shortest.and_then(too_short) {
        out.push(reason);
    }
    let busy = rounds
        .iter()
        .filter_map(|f| f.drain)
        .filter(|d| !d.drained)
        .max_by_key(|d| d.probe_us);
    if let Some(d) = busy {
        out.push(format!(
            "started before its target had drained: after {} of waiting a probe still took {} \
             (unloaded {})",
            fmt::micros(d.waited_s * 1e6),
            fmt::micros(d.probe_us as f64),
            fmt::micros(d.unloaded_us as f64)
        ));
    }
    let unexpected = rounds
        .iter()
        .max_by_key(|f| f.errors.unexpected_status)
        .filter(|f| f.errors.unexpected_status > 0);
    if let Some(f) = unexpected {
        out.push(format!(
            "answered with a status other than the one it measures: {} of {} answers in a round \
             (a redirect where the upstream's 200 was expected: the oidc row's session was not \
             taken)",
            fmt::count(f.errors.unexpected_status as f64),
            fmt::count(f.requests as f64)
        ));
    }
    out
}

/// Whether a row can stand in a verdict.
pub(crate) fn comparable(row: &Row) -> bool {
    row.not_comparable.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Drain, Latency};

    fn run(answered: u64, unanswered: u64, p99_ms: u64, measured_s: f64) -> Figures {
        let mut f = Figures::memory_only("x".into(), 0);
        f.requests = answered;
        f.sent = answered + unanswered;
        f.unanswered = unanswered;
        f.measured_s = measured_s;
        f.latency = Latency {
            p99_us: p99_ms * 1000,
            ..Latency::default()
        };
        f
    }

    #[test]
    fn a_window_must_hold_its_latency_three_times() {
        // 20 s against a p99 of 3.1 s, 2,000 in flight at 660/s: 3.0 s.
        assert!(too_short(&run(13_200, 2_000, 3_100, 20.0)).is_none());
        // 3 s against the same latency: too short.
        let reason = too_short(&run(1_980, 2_000, 3_100, 3.0)).expect("short");
        assert!(
            reason.contains("window shorter than its latency"),
            "{reason}"
        );
        assert!(reason.contains("the 2,000 requests unanswered"), "{reason}");
        // Nothing answered while thousands waited: not a fast window.
        let reason = too_short(&run(0, 5_000, 0, 3.0)).expect("short");
        assert!(
            reason.contains("none of its requests was answered"),
            "{reason}"
        );
        // A fast closed loop: 128 in flight at 60,000/s.
        assert!(too_short(&run(120_000, 128, 3, 2.0)).is_none());
        // An idle row measured nothing.
        assert!(too_short(&run(0, 0, 0, 0.0)).is_none());
    }

    #[test]
    fn a_short_window_is_lengthened_to_its_latency_and_no_further_than_a_minute() {
        let think = Duration::from_secs(2);
        let now = (Duration::from_secs(1), Duration::from_millis(2500));
        // Latency 3.125 s (2,000 in flight at 640/s): 3 x 3.125 x 1.25 =
        // 11.7 -> 12 s; warm-up 2 x 4 s + 2 s think.
        let (warmup, measured) =
            longer(&run(1_600, 2_000, 3_100, 2.5), think, now).expect("longer");
        assert_eq!(measured, Duration::from_secs(12));
        assert_eq!(warmup, Duration::from_secs(10));
        // Nothing answered: the longest window.
        let (_, measured) = longer(&run(0, 5_000, 0, 2.5), think, now).expect("longer");
        assert_eq!(measured, MAX_WINDOW);
        // Already the longest, or long enough: nothing to do.
        assert!(longer(&run(0, 5_000, 0, 60.0), think, (now.0, MAX_WINDOW)).is_none());
        assert!(longer(&run(13_200, 2_000, 3_100, 20.0), think, now).is_none());
    }

    #[test]
    fn reasons_name_the_worst_round_once() {
        let mut busy = run(13_200, 100, 300, 20.0);
        busy.drain = Some(Drain {
            waited_s: 60.0,
            probes: 12,
            probe_us: 4_200_000,
            unloaded_us: 301_000,
            drained: false,
        });
        let rounds = [
            run(1_980, 2_000, 3_100, 3.0),
            run(600, 4_000, 3_100, 3.0),
            busy,
        ];
        let reasons = reasons(&rounds);
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(
            reasons[0].contains("the 4,000 requests unanswered"),
            "{reasons:?}"
        );
        assert!(
            reasons[1].contains("a probe still took 4.20s"),
            "{reasons:?}"
        );
        assert!(super::reasons(&[run(13_200, 2_000, 3_100, 20.0)]).is_empty());
    }

    #[test]
    fn answers_other_than_the_measured_status_make_a_row_not_comparable() {
        let mut redirected = run(50_000, 100, 3, 2.0);
        redirected.errors.unexpected_status = 12_000;
        let reasons = reasons(&[run(50_000, 100, 3, 2.0), redirected]);
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(
            reasons[0].contains("12,000 of 50,000 answers"),
            "{reasons:?}"
        );
    }
}
