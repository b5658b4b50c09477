//! Per-thread statistics: HDR latency histograms, counters by outcome and a
//! per-second series. Memory is constant however long the run; threads merge
//! at the end.

use std::{sync::mpsc::Sender, time::Duration};

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

    pub fn add(&mut self, other: &Errors) {
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
    /// The log's current interval; `None` without a log.
    window: Option<Window>,
    pub(crate) responses: u64,
    /// Responses by status code, 100 to 599 (others counted at index 0).
    pub(crate) status: Box<[u64; 600]>,
    /// Responses completed in each second since recording started.
    pub(crate) per_second: Vec<u64>,
    /// Nothing before this instant is recorded (warm-up).
    record_from: Instant,
    /// Where every request the thread sent stands (see [`Accounting`]).
    pub(crate) accounting: Tally,
}

/// A thread's requests as they go: how many are in flight now, and what
/// the measured time saw. Every request is counted once when it is sent
/// (a refused request sent again is the same request) and once when it
/// ends, answered or lost; one still in flight at the stop ends neither
/// way. The count in flight when measuring began is taken at the first
/// event at or after `record_from` (nothing changes it between events).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tally {
    in_flight: u64,
    carried_in: Option<u64>,
    sent: u64,
    lost: u64,
}

/// Where the requests of a run's measured time stand at its end:
/// `carried_in + sent = answered + lost + unanswered`, answered being the
/// report's `requests`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Accounting {
    /// Requests in flight when the measured time began (sent during the
    /// warm-up); those answered later count among the answered.
    pub carried_in: u64,
    /// Requests sent during the measured time.
    pub sent: u64,
    /// Requests that ended without an answer: their connection failed or
    /// closed, they timed out, or the answer could not be read. The
    /// errors count failures by kind (a broken connection is one read
    /// error however many pipelined requests it took with it).
    pub lost: u64,
    /// Requests still waiting for their answer when the measured time
    /// ended: neither answered nor failed.
    pub unanswered: u64,
}

impl Accounting {
    pub fn add(&mut self, other: &Accounting) {
        self.carried_in += other.carried_in;
        self.sent += other.sent;
        self.lost += other.lost;
        self.unanswered += other.unanswered;
    }
}

impl Tally {
    /// The first event of the measured time fixes how many were carried in.
    fn at(&mut self, now: Instant, record_from: Instant) -> bool {
        if now < record_from {
            return false;
        }
        self.carried_in.get_or_insert(self.in_flight);
        true
    }

    /// The figures once the thread has stopped: what is still in flight
    /// was never answered.
    pub(crate) fn settle(&self) -> Accounting {
        Accounting {
            carried_in: self.carried_in.unwrap_or(self.in_flight),
            sent: self.sent,
            lost: self.lost,
            unanswered: self.in_flight,
        }
    }
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

/// The log's current interval of one thread, handed to the log's writer
/// as soon as a later second is recorded (or the thread's timer sees it
/// has passed), so an interval holds what `per_second` counts for it.
#[derive(Debug)]
struct Window {
    figures: Figures,
    /// Seconds since recording started.
    index: u64,
    out: Sender<(u64, Figures)>,
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
    /// With `windows`, each second's figures are also sent there, for the log.
    pub(crate) fn new(
        record_from: Instant,
        open_model: bool,
        windows: Option<Sender<(u64, Figures)>>,
    ) -> Self {
        Self {
            total: Figures::new(open_model),
            window: windows.map(|out| Window {
                figures: Figures::new(open_model),
                index: 0,
                out,
            }),
            responses: 0,
            status: Box::new([0; 600]),
            per_second: Vec::new(),
            record_from,
            accounting: Tally::default(),
        }
    }

    /// A request left at `now` (a new one: not a refused one sent again).
    pub(crate) fn issued(&mut self, now: Instant) {
        if self.accounting.at(now, self.record_from) {
            self.accounting.sent += 1;
        }
        self.accounting.in_flight += 1;
    }

    /// `count` requests ended at `now` without an answer.
    pub(crate) fn lost(&mut self, count: u64, now: Instant) {
        if self.accounting.at(now, self.record_from) {
            self.accounting.lost += count;
        }
        self.accounting.in_flight = self.accounting.in_flight.saturating_sub(count);
    }

    /// A response completed at `now` for a request meant to leave at
    /// `intended` and actually sent at `sent`.
    pub(crate) fn response(&mut self, status: u16, intended: Instant, sent: Instant, now: Instant) {
        let measured = self.accounting.at(now, self.record_from);
        self.accounting.in_flight = self.accounting.in_flight.saturating_sub(1);
        if !measured {
            return;
        }
        self.responses += 1;
        self.status[if (100..600).contains(&status) {
            status as usize
        } else {
            0
        }] += 1;
        self.total.response(intended, sent, now);
        if let Some(window) = self.window_at(now) {
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
        if let Some(window) = self.window_at(now) {
            window.sent(ns);
        }
    }

    pub(crate) fn bytes(&mut self, count: usize, now: Instant) {
        if now >= self.record_from {
            self.total.bytes_read += count as u64;
            if let Some(window) = self.window_at(now) {
                window.bytes_read += count as u64;
            }
        }
    }

    pub(crate) fn error(&mut self, kind: ErrorKind, now: Instant) {
        if now < self.record_from {
            return;
        }
        self.total.error(kind);
        if let Some(window) = self.window_at(now) {
            window.error(kind);
        }
    }

    /// The log's interval for `now`, after handing over those before it
    /// (empty ones too: the writer waits for every thread's).
    pub(crate) fn window_at(&mut self, now: Instant) -> Option<&mut Figures> {
        let second = now.saturating_duration_since(self.record_from).as_secs();
        let window = self.window.as_mut()?;
        while window.index < second {
            window.hand_over();
            window.index += 1;
        }
        Some(&mut window.figures)
    }

    /// Hands over the last interval, at the end of the run.
    pub(crate) fn end_window(&mut self) {
        if let Some(window) = &mut self.window {
            window.hand_over();
        }
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

impl Window {
    fn hand_over(&mut self) {
        let open_model = self.figures.uncorrected.is_some();
        let figures = std::mem::replace(&mut self.figures, Figures::new(open_model));
        // The writer outlives the threads; a send fails only if it stopped on an error.
        let _ = self.out.send((self.index, figures));
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
        let mut a = Stats::new(record_from, true, None);
        a.response(200, start, start, start + Duration::from_millis(500));
        assert_eq!(a.responses, 0);
        a.response(
            200,
            start,
            record_from,
            record_from + Duration::from_millis(10),
        );
        a.error(ErrorKind::Timeout, record_from);
        let mut b = Stats::new(record_from, true, None);
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
