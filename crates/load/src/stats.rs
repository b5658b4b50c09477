//! Per-thread statistics: HDR latency histograms, counters by outcome and a
//! per-second series. Memory is constant however long the run; threads merge
//! at the end.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
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
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
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

    fn add(&mut self, other: &Errors) {
        self.connect += other.connect;
        self.read += other.read;
        self.write += other.write;
        self.timeout += other.timeout;
        self.parse += other.parse;
    }
}

/// What one thread measured.
#[derive(Debug)]
pub(crate) struct Stats {
    /// Latency in µs: from the intended send time in the open model
    /// (coordinated-omission corrected), from the send otherwise.
    pub(crate) latency: Histogram<u64>,
    /// Open model only: latency from the actual send.
    pub(crate) uncorrected: Option<Histogram<u64>>,
    /// Open model only: the generator's own lateness in ns, from when each
    /// request could be sent (due, with a free slot) to when it was.
    pub(crate) lateness: Option<Histogram<u64>>,
    pub(crate) responses: u64,
    pub(crate) bytes_read: u64,
    pub(crate) errors: Errors,
    /// Responses by status code, 100 to 599 (others counted at index 0).
    pub(crate) status: Box<[u64; 600]>,
    /// Responses completed in each second since recording started.
    pub(crate) per_second: Vec<u64>,
    /// Nothing before this instant is recorded (warm-up).
    record_from: Instant,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        .unwrap_or_else(|_| unreachable!("constant bounds are valid"))
}

fn nanosecond_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_NS, SIGNIFICANT_DIGITS)
        .unwrap_or_else(|_| unreachable!("constant bounds are valid"))
}

impl Stats {
    pub(crate) fn new(record_from: Instant, open_model: bool) -> Self {
        Self {
            latency: histogram(),
            uncorrected: open_model.then(histogram),
            lateness: open_model.then(nanosecond_histogram),
            responses: 0,
            bytes_read: 0,
            errors: Errors::default(),
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
        self.latency.saturating_record(micros(now - intended));
        if let Some(uncorrected) = &mut self.uncorrected {
            uncorrected.saturating_record(micros(now - sent));
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
        if let Some(lateness) = &mut self.lateness {
            let ns = u64::try_from((now - ready).as_nanos()).unwrap_or(u64::MAX);
            lateness.saturating_record(ns.max(1));
        }
    }

    pub(crate) fn bytes(&mut self, count: usize, now: Instant) {
        if now >= self.record_from {
            self.bytes_read += count as u64;
        }
    }

    pub(crate) fn error(&mut self, kind: ErrorKind, now: Instant) {
        if now < self.record_from {
            return;
        }
        let counter = match kind {
            ErrorKind::Connect => &mut self.errors.connect,
            ErrorKind::Read => &mut self.errors.read,
            ErrorKind::Write => &mut self.errors.write,
            ErrorKind::Timeout => &mut self.errors.timeout,
            ErrorKind::Parse => &mut self.errors.parse,
        };
        *counter += 1;
    }

    /// Adds another thread's figures; per-second series are summed second by second.
    pub(crate) fn merge(&mut self, other: &Stats) {
        // Histograms with the same bounds always merge.
        let _ = self.latency.add(&other.latency);
        if let (Some(mine), Some(theirs)) = (&mut self.uncorrected, &other.uncorrected) {
            let _ = mine.add(theirs);
        }
        if let (Some(mine), Some(theirs)) = (&mut self.lateness, &other.lateness) {
            let _ = mine.add(theirs);
        }
        self.responses += other.responses;
        self.bytes_read += other.bytes_read;
        self.errors.add(&other.errors);
        for (mine, theirs) in self.status.iter_mut().zip(other.status.iter()) {
            *mine += theirs;
        }
        if self.per_second.len() < other.per_second.len() {
            self.per_second.resize(other.per_second.len(), 0);
        }
        for (mine, theirs) in self.per_second.iter_mut().zip(&other.per_second) {
            *mine += theirs;
        }
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
        let mut a = Stats::new(record_from, true);
        a.response(200, start, start, start + Duration::from_millis(500));
        assert_eq!(a.responses, 0);
        a.response(
            200,
            start,
            record_from,
            record_from + Duration::from_millis(10),
        );
        a.error(ErrorKind::Timeout, record_from);
        let mut b = Stats::new(record_from, true);
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
        assert_eq!(a.errors.timeout, 1);
        // Lateness: in ns, after the warm-up only.
        let lateness = a.lateness.as_ref().unwrap();
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
        assert!(a.latency.max() >= 1_000_000);
        assert!(a.uncorrected.as_ref().unwrap().value_at_quantile(0.0) <= 10_100);
    }
}
