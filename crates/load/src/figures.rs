//! What is counted: HDR histograms (latency, each request's and each new
//! connection's phases) and counters (errors by kind, statuses, checks).
//! A [`Figures`] is a thread's whole run, one interval of it, or either
//! added up over threads, scenarios and shards: histograms add, so the
//! percentiles of a sum are exact, not averages of percentiles. Its size
//! is fixed whatever the run's length (about 1.2 MB: eight histograms of
//! 139 KB, the statuses and one counter pair per check).

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
/// Status codes counted one by one: 100 to 599 (others at index 0).
const STATUSES: usize = 600;

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

    /// `(name, count)` of each kind, in the report's order.
    pub fn by_kind(&self) -> [(&'static str, u64); 5] {
        [
            ("connect", self.connect),
            ("read", self.read),
            ("write", self.write),
            ("timeout", self.timeout),
            ("parse", self.parse),
        ]
    }
}

/// Passes and failures of one check.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckCount {
    pub passed: u64,
    pub failed: u64,
}

/// The phases of a request and of a new connection, in µs (k6's
/// `http_req_connecting`, `http_req_tls_handshaking`, `http_req_waiting`,
/// `http_req_receiving`).
#[derive(Debug, Clone)]
pub(crate) struct Phases {
    /// Resolving the target's name, once per run.
    pub(crate) dns: Histogram<u64>,
    /// Each new TCP connection's connect.
    pub(crate) connect: Histogram<u64>,
    /// Each new connection's TLS handshake (HTTP/3: the QUIC handshake).
    pub(crate) tls: Histogram<u64>,
    /// Each request, from its send to the first byte of its answer.
    pub(crate) waiting: Histogram<u64>,
    /// Each request, from the first byte of its answer to the last.
    pub(crate) receiving: Histogram<u64>,
}

/// The phase names, as the report, the log and the metrics call them.
pub(crate) const PHASES: [&str; 5] = ["dns", "connect", "tls", "waiting", "receiving"];

impl Phases {
    fn new() -> Self {
        Self {
            dns: histogram(),
            connect: histogram(),
            tls: histogram(),
            waiting: histogram(),
            receiving: histogram(),
        }
    }

    /// Each phase's histogram, in [`PHASES`] order.
    pub(crate) fn each(&self) -> [&Histogram<u64>; 5] {
        [
            &self.dns,
            &self.connect,
            &self.tls,
            &self.waiting,
            &self.receiving,
        ]
    }

    pub(crate) fn each_mut(&mut self) -> [&mut Histogram<u64>; 5] {
        [
            &mut self.dns,
            &mut self.connect,
            &mut self.tls,
            &mut self.waiting,
            &mut self.receiving,
        ]
    }

    fn add(&mut self, other: &Phases) {
        for (mine, theirs) in self.each_mut().into_iter().zip(other.each()) {
            // Histograms with the same bounds always add.
            let _ = mine.add(theirs);
        }
    }
}

/// When a request's answer arrived, for its latency and phases.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// When it was due (open model), else when it was sent.
    pub(crate) intended: Instant,
    pub(crate) sent: Instant,
    /// The answer's first byte.
    pub(crate) first_byte: Instant,
    /// Its last byte (the answer is complete).
    pub(crate) done: Instant,
}

/// A new connection's phases.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Connected {
    pub(crate) connect: Option<Duration>,
    pub(crate) tls: Option<Duration>,
}

/// Latency histograms and counters.
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
    pub(crate) phases: Phases,
    pub(crate) bytes_read: u64,
    pub(crate) errors: Errors,
    /// Responses by status code, 100 to 599 (others at index 0).
    pub(crate) status: Box<[u64; STATUSES]>,
    /// One count per check of the scenario, in its order.
    pub(crate) checks: Vec<CheckCount>,
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
    /// Empty figures for a run of that model with `checks` checks.
    pub(crate) fn new(open_model: bool, checks: usize) -> Self {
        Self {
            latency: histogram(),
            uncorrected: open_model.then(histogram),
            lateness: open_model.then(nanosecond_histogram),
            phases: Phases::new(),
            bytes_read: 0,
            errors: Errors::default(),
            status: Box::new([0; STATUSES]),
            checks: vec![CheckCount::default(); checks],
        }
    }

    /// Empty figures shaped like these (the same model and checks).
    pub(crate) fn empty_like(&self) -> Self {
        Self::new(self.uncorrected.is_some(), self.checks.len())
    }

    pub(crate) fn response(&mut self, status: u16, timing: &Timing) {
        self.status[status_slot(status)] += 1;
        self.latency
            .saturating_record(micros(timing.done - timing.intended));
        if let Some(uncorrected) = &mut self.uncorrected {
            uncorrected.saturating_record(micros(timing.done - timing.sent));
        }
        // A phase may take under a microsecond (a body in the head's read): 0.
        self.phases
            .waiting
            .saturating_record(whole_micros(timing.first_byte - timing.sent));
        self.phases
            .receiving
            .saturating_record(whole_micros(timing.done - timing.first_byte));
    }

    pub(crate) fn sent(&mut self, lateness_ns: u64) {
        if let Some(lateness) = &mut self.lateness {
            lateness.saturating_record(lateness_ns);
        }
    }

    pub(crate) fn connected(&mut self, phases: &Connected) {
        if let Some(connect) = phases.connect {
            self.phases.connect.saturating_record(whole_micros(connect));
        }
        if let Some(tls) = phases.tls {
            self.phases.tls.saturating_record(whole_micros(tls));
        }
    }

    /// Check `i` passed if bit `i` of `passed` is set (checks `0..count`).
    pub(crate) fn checked(&mut self, passed: u64) {
        for (i, count) in self.checks.iter_mut().enumerate() {
            if passed & (1 << i) != 0 {
                count.passed += 1;
            } else {
                count.failed += 1;
            }
        }
    }

    pub(crate) fn error(&mut self, kind: ErrorKind) {
        let counter = match kind {
            ErrorKind::Connect => &mut self.errors.connect,
            ErrorKind::Read => &mut self.errors.read,
            ErrorKind::Write => &mut self.errors.write,
            ErrorKind::Timeout => &mut self.errors.timeout,
            ErrorKind::Parse => &mut self.errors.parse,
        };
        *counter += 1;
    }

    /// Adds `other`'s figures.
    pub(crate) fn add(&mut self, other: &Figures) {
        // Histograms with the same bounds always add.
        let _ = self.latency.add(&other.latency);
        add_optional(&mut self.uncorrected, &other.uncorrected);
        add_optional(&mut self.lateness, &other.lateness);
        self.phases.add(&other.phases);
        self.bytes_read += other.bytes_read;
        self.errors.add(&other.errors);
        for (mine, theirs) in self.status.iter_mut().zip(other.status.iter()) {
            *mine += theirs;
        }
        if self.checks.len() < other.checks.len() {
            self.checks
                .resize(other.checks.len(), CheckCount::default());
        }
        for (mine, theirs) in self.checks.iter_mut().zip(&other.checks) {
            mine.passed += theirs.passed;
            mine.failed += theirs.failed;
        }
    }

    /// Responses, each counted once.
    pub(crate) fn responses(&self) -> u64 {
        self.latency.len()
    }

    /// Responses with a status outside 200..=399.
    pub(crate) fn non_2xx_3xx(&self) -> u64 {
        self.status
            .iter()
            .enumerate()
            .filter(|(code, _)| !(200..400).contains(code))
            .map(|(_, n)| n)
            .sum()
    }

    /// `(code, count)` of each status seen.
    pub(crate) fn statuses(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(code, &n)| (code as u16, n))
    }

    /// Nothing recorded: no response, no error, no byte.
    pub(crate) fn is_empty(&self) -> bool {
        self.latency.is_empty() && self.errors.total() == 0 && self.bytes_read == 0
    }
}

/// The slot of a status code in [`Figures::status`].
pub(crate) fn status_slot(status: u16) -> usize {
    if (100..STATUSES as u16).contains(&status) {
        usize::from(status)
    } else {
        0
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

pub(crate) fn micros(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_micros())
        .unwrap_or(u64::MAX)
        .max(LOWEST_US)
}

/// Whole microseconds, 0 included.
pub(crate) fn whole_micros(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX)
}
