//! Per-thread statistics: HDR latency histograms, counters by outcome and a
//! per-second series. Memory is constant however long the run; threads merge
//! at the end.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// Lowest and highest latency the histograms resolve, in microseconds.
pub(crate) const LOWEST_US: u64 = 1;
pub(crate) const HIGHEST_US: u64 = 60_000_000;
pub(crate) const SIGNIFICANT_DIGITS: u8 = 3;
/// Highest send lateness resolved, in nanoseconds.
const HIGHEST_NS: u64 = 60_000_000_000;

/// Why a request or connection failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    Connect,
    Read,
    Write,
    Timeout,
    Parse,
}

/// Failures by kind.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Errors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
    pub parse: u64,
}

impl Errors {
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.parse
    }

    pub(crate) fn add(&mut self, other: &Errors) {
        self.connect += other.connect;
        self.read += other.read;
        self.write += other.write;
        self.timeout += other.timeout;
        self.parse += other.parse;
    }
}

/// Latency histograms and counters: a thread's whole run, one interval
/// of the log (`--log`), or either added up over threads and shards.
#[derive(Debug, Clone)]
pub(crate) struct Figures {
    /// Latency in µs: from the intended send time in the open model
    /// (coordinated-omission corrected), from the send otherwise.
    pub(crate) latency: Histogram<u64>,
    /// Open model only: latency from the actual send.
    pub(crate) uncorrected: Option<Histogram<u64>>,
    /// Open model only: the generator's own lateness in ns, from when each
    /// request could be sent (due, with a free slot) to when it was.
    pub(crate) lateness: Option<Histogram<u64>>,
    pub(crate) bytes_read: u64,
    pub(crate) errors: Errors,
}

/// What one thread measured.
#[derive(Debug)]
pub(crate) struct Stats {
    pub(crate) total: Figures,
    /// The log's current interval, handed over each second (`take_window`);
    /// `None` without a log.
    window: Option<Figures>,
    /// The index of the current interval: seconds since recording started.
    window_index: u64,
    pub(crate) responses: u64,
    /// Responses by status code, 100 to 599 (others counted at index 0).
    pub(crate) status: Box<[u64; 600]>,
    /// Responses completed in each second since recording started.
    pub(crate) per_second: Vec<u64>,
    /// Nothing before this instant is recorded (warm-up).
    record_from: Instant,
}

pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        .unwrap_or_else(|_| unreachable!("constant bounds are valid"))
}

pub(crate) fn nanosecond_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_NS, SIGNIFICANT_DIGITS)
        .unwrap_or_else(|_| unreachable!("constant bounds are valid"))
}

impl Figures {
    pub(crate) fn new(open_model: bool) -> Self {
        Self {
            latency: histogram(),
            uncorrected: open_model.then(histogram),
            lateness: open_model.then(nanosecond_histogram),
            bytes_read: 0,
            errors: Errors::default(),
        }
    }

    fn response(&mut self, intended: Instant, sent: Instant, now: Instant) {
        self.latency.saturating_record(micros(now - intended));
        if let Some(uncorrected) = &mut self.uncorrected {
            uncorrected.saturating_record(micros(now - sent));
        }
    }

    fn sent(&mut self, lateness_ns: u64) {
        if let Some(lateness) = &mut self.lateness {
            lateness.saturating_record(lateness_ns);
        }
    }

    fn error(&mut self, kind: ErrorKind) {
        let counter = match kind {
            ErrorKind::Connect => &mut self.errors.connect,
            ErrorKind::Read => &mut self.errors.read,
            ErrorKind::Write => &mut self.errors.write,
            ErrorKind::Timeout => &mut self.errors.timeout,
            ErrorKind::Parse => &mut self.errors.parse,
        };
        *counter += 1;
    }

    /// Adds `other`'s figures: histograms add, so percentiles of the sum
    /// are exact, not averages of percentiles.
    pub(crate) fn add(&mut self, other: &Figures) {
        // Histograms with the same bounds always add.
        let _ = self.latency.add(&other.latency);
        add_optional(&mut self.uncorrected, &other.uncorrected);
        add_optional(&mut self.lateness, &other.lateness);
        self.bytes_read += other.bytes_read;
        self.errors.add(&other.errors);
    }

    /// Nothing recorded: no response, no error, no byte.
    pub(crate) fn is_empty(&self) -> bool {
        self.latency.is_empty() && self.errors.total() == 0 && self.bytes_read == 0
    }
}

/// Adds `theirs` to `mine`, taking it whole when `mine` has none (a log's
/// first open-model interval).
fn add_optional(mine: &mut Option<Histogram<u64>>, theirs: &Option<Histogram<u64>>) {
    match (mine.as_mut(), theirs) {
        (Some(mine), Some(theirs)) => {
            let _ = mine.add(theirs);
        }
        (None, Some(theirs)) => *mine = Some(theirs.clone()),
        (_, None) => {}
    }
}

impl Stats {
    /// `windowed`: also keep the current interval for the log.
    pub(crate) fn new(record_from: Instant, open_model: bool, windowed: bool) -> Self {
        Self {
            total: Figures::new(open_model),
            window: windowed.then(|| Figures::new(open_model)),
            window_index: 0,
            responses: 0,
            status: Box::new([0; 600]),
            per_second: Vec::new(),
            record_from,
        }
    }

    /// A response completed at `now` for a request meant to leave at
    /// `intended` and actually sent at `sent`.
    pub(crate) fn response(&mut self, status: u16, intended: Instant, sent: Instant, now: Instant) {
        if now < self.record_from {
            return;
        }
        self.responses += 1;
        self.status[if (100..600).contains(&status) {
            status as usize
        } else {
            0
        }] += 1;
        self.total.response(intended, sent, now);
        if let Some(window) = &mut self.window {
            window.response(intended, sent, now);
        }
        let second = (now - self.record_from).as_secs() as usize;
        if self.per_second.len() <= second {
            self.per_second.resize(second + 1, 0);
        }
        self.per_second[second] += 1;
    }

    /// A request that could leave at `ready` left at `now` (open model).
    pub(crate) fn sent(&mut self, ready: Instant, now: Instant) {
        if now < self.record_from {
            return;
        }
        let ns = u64::try_from((now - ready).as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        self.total.sent(ns);
        if let Some(window) = &mut self.window {
            window.sent(ns);
        }
    }

    pub(crate) fn bytes(&mut self, count: usize, now: Instant) {
        if now >= self.record_from {
            self.total.bytes_read += count as u64;
            if let Some(window) = &mut self.window {
                window.bytes_read += count as u64;
            }
        }
    }

    pub(crate) fn error(&mut self, kind: ErrorKind, now: Instant) {
        if now < self.record_from {
            return;
        }
        self.total.error(kind);
        if let Some(window) = &mut self.window {
            window.error(kind);
        }
    }

    /// Ends the log's current interval: returns its index and figures and
    /// starts the next. `None` without a log.
    pub(crate) fn take_window(&mut self) -> Option<(u64, Figures)> {
        let open_model = self.total.uncorrected.is_some();
        let window = std::mem::replace(self.window.as_mut()?, Figures::new(open_model));
        self.window_index += 1;
        Some((self.window_index - 1, window))
    }

    /// Adds another thread's figures; per-second series are summed second by second.
    pub(crate) fn merge(&mut self, other: &Stats) {
        self.total.add(&other.total);
        self.responses += other.responses;
        for (mine, theirs) in self.status.iter_mut().zip(other.status.iter()) {
            *mine += theirs;
        }
        add_series(&mut self.per_second, &other.per_second, 0);
    }
}

/// Adds `theirs` into `mine` from position `offset` on, growing `mine`.
pub(crate) fn add_series(mine: &mut Vec<u64>, theirs: &[u64], offset: usize) {
    if mine.len() < offset + theirs.len() {
        mine.resize(offset + theirs.len(), 0);
    }
    for (mine, theirs) in mine[offset..].iter_mut().zip(theirs) {
        *mine += theirs;
    }
}

fn micros(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_micros())
        .unwrap_or(u64::MAX)
        .max(LOWEST_US)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_is_not_recorded_and_merge_adds_up() {
        let start = Instant::now();
        let record_from = start + Duration::from_secs(1);
        let mut a = Stats::new(record_from, true, true);
        a.response(200, start, start, start + Duration::from_millis(500));
        assert_eq!(a.responses, 0);
        a.response(
            200,
            start,
            record_from,
            record_from + Duration::from_millis(10),
        );
        a.error(ErrorKind::Timeout, record_from);
        let mut b = Stats::new(record_from, true, true);
        b.response(
            503,
            record_from,
            record_from,
            record_from + Duration::from_millis(2500),
        );
        a.sent(start, start + Duration::from_micros(3));
        a.sent(record_from, record_from + Duration::from_nanos(2_500));
        b.sent(record_from, record_from + Duration::from_micros(40));
        a.merge(&b);
        assert_eq!(a.responses, 2);
        assert_eq!(a.status[200] + a.status[503], 2);
        assert_eq!(a.per_second, vec![1, 0, 1]);
        assert_eq!(a.total.errors.timeout, 1);
        // Lateness: in ns, after the warm-up only.
        let lateness = a.total.lateness.as_ref().unwrap();
        assert_eq!(lateness.len(), 2);
        assert!(
            (2_490..=2_510).contains(&lateness.min()),
            "{}",
            lateness.min()
        );
        assert!(
            (39_900..=40_100).contains(&lateness.max()),
            "{}",
            lateness.max()
        );
        // Corrected latency counts from the intended time (start), uncorrected from the send.
        assert!(a.total.latency.max() >= 1_000_000);
        assert!(a.total.uncorrected.as_ref().unwrap().value_at_quantile(0.0) <= 10_100);
    }
}
