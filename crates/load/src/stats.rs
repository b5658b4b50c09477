//! Per-thread statistics: the run's [`Figures`], the current interval's
//! (handed over each second, for the log, the live outputs and the
//! report's intervals), a per-second series and, with stages, counts per
//! stage, and where every request stands (sent, answered, lost, still
//! in flight). Memory is constant however long the run but for the
//! per-second series (8 bytes a second); threads merge at the end.

use std::{sync::mpsc::Sender, sync::Arc};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::figures::{Connected, ErrorKind, Figures, Timing};

/// What one thread measured.
#[derive(Debug)]
pub(crate) struct Stats {
    pub(crate) total: Figures,
    /// The current interval; `None` when nobody takes intervals.
    window: Option<Window>,
    /// Responses completed in each second since recording started.
    pub(crate) per_second: Vec<u64>,
    /// Nothing before this instant is recorded (warm-up).
    record_from: Instant,
    /// With stages: what happened in each.
    pub(crate) stages: Option<StageCounts>,
    /// Where every request the thread sent stands (see [`Accounting`]).
    pub(crate) accounting: Tally,
    /// The measured time's responses on each of the thread's
    /// connections (users), filled when they stop.
    pub(crate) per_connection: Vec<u64>,
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

/// Responses (by when they completed) and sends (by when they were due)
/// in each stage.
#[derive(Debug, Clone)]
pub(crate) struct StageCounts {
    /// When each stage ends.
    ends: Arc<[Instant]>,
    /// The stage the last response completed in: responses complete in
    /// time order, so the search goes forward only.
    current: usize,
    pub(crate) responses: Vec<u64>,
    pub(crate) sent: Vec<u64>,
}

impl StageCounts {
    pub(crate) fn new(ends: Arc<[Instant]>) -> Self {
        let stages = ends.len();
        Self {
            ends,
            current: 0,
            responses: vec![0; stages],
            sent: vec![0; stages],
        }
    }

    fn response(&mut self, at: Instant) {
        while self.current < self.ends.len() && at >= self.ends[self.current] {
            self.current += 1;
        }
        if let Some(count) = self.responses.get_mut(self.current) {
            *count += 1;
        }
    }

    fn sent(&mut self, due: Instant) {
        let stage = self.ends.partition_point(|end| *end <= due);
        if let Some(count) = self.sent.get_mut(stage) {
            *count += 1;
        }
    }

    pub(crate) fn add(&mut self, other: &StageCounts) {
        for (mine, theirs) in self.responses.iter_mut().zip(&other.responses) {
            *mine += theirs;
        }
        for (mine, theirs) in self.sent.iter_mut().zip(&other.sent) {
            *mine += theirs;
        }
    }
}

/// The current interval of one thread, handed over as soon as a later
/// second is recorded (or the thread's timer sees it has passed), so an
/// interval holds what `per_second` counts for it.
#[derive(Debug)]
struct Window {
    figures: Figures,
    /// Seconds since recording started.
    index: u64,
    out: Sender<(u64, Figures)>,
}

impl Stats {
    /// With `windows`, each second's figures are also sent there.
    pub(crate) fn new(
        record_from: Instant,
        shape: &Figures,
        windows: Option<Sender<(u64, Figures)>>,
        stages: Option<StageCounts>,
    ) -> Self {
        Self {
            total: shape.empty_like(),
            window: windows.map(|out| Window {
                figures: shape.empty_like(),
                index: 0,
                out,
            }),
            per_second: Vec::new(),
            record_from,
            stages,
            accounting: Tally::default(),
            per_connection: Vec::new(),
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

    /// A response with `status` completed at `timing.done`; `checks` says
    /// which checks it passed (a bit each), if the run has checks. True
    /// when it counts (it completed in the measured time).
    pub(crate) fn response(&mut self, status: u16, timing: &Timing, checks: Option<u64>) -> bool {
        let now = timing.done;
        let measured = self.accounting.at(now, self.record_from);
        self.accounting.in_flight = self.accounting.in_flight.saturating_sub(1);
        if !measured {
            return false;
        }
        self.total.response(status, timing);
        if let Some(passed) = checks {
            self.total.checked(passed);
        }
        if let Some(window) = self.window_at(now) {
            window.response(status, timing);
            if let Some(passed) = checks {
                window.checked(passed);
            }
        }
        if let Some(stages) = &mut self.stages {
            stages.response(now);
        }
        let second = (now - self.record_from).as_secs() as usize;
        if self.per_second.len() <= second {
            self.per_second.resize(second + 1, 0);
        }
        self.per_second[second] += 1;
        true
    }

    /// A request due at `due` that could leave at `ready` left at `now` (open model).
    pub(crate) fn sent(&mut self, due: Instant, ready: Instant, now: Instant) {
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
        if let Some(stages) = &mut self.stages {
            stages.sent(due);
        }
    }

    /// A new connection is ready at `now`, its phases `phases`.
    pub(crate) fn connected(&mut self, phases: &Connected, now: Instant) {
        if now < self.record_from {
            return;
        }
        self.total.connected(phases);
        if let Some(window) = self.window_at(now) {
            window.connected(phases);
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

    /// The interval for `now`, after handing over those before it
    /// (empty ones too: the collector waits for every thread's).
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
        add_series(&mut self.per_second, &other.per_second, 0);
        self.per_connection.extend_from_slice(&other.per_connection);
        if let (Some(mine), Some(theirs)) = (&mut self.stages, &other.stages) {
            mine.add(theirs);
        }
    }
}

impl Window {
    fn hand_over(&mut self) {
        let empty = self.figures.empty_like();
        let figures = std::mem::replace(&mut self.figures, empty);
        // The collector outlives the threads; a send fails only if it stopped on an error.
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn timing(intended: Instant, sent: Instant, first_byte: Instant, done: Instant) -> Timing {
        Timing {
            intended,
            sent,
            first_byte,
            done,
        }
    }

    #[test]
    fn warm_up_is_not_recorded_and_merge_adds_up() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        let record_from = start + Duration::from_secs(1);
        let shape = Figures::new(true, 1);
        let mut a = Stats::new(record_from, &shape, None, None);
        a.response(200, &timing(start, start, start, start + ms(500)), Some(1));
        assert_eq!(a.total.responses(), 0);
        let at = record_from;
        a.response(200, &timing(start, at, at + ms(4), at + ms(10)), Some(1));
        a.error(ErrorKind::Timeout, record_from);
        let mut b = Stats::new(record_from, &shape, None, None);
        b.response(503, &timing(at, at, at + ms(2000), at + ms(2500)), Some(0));
        a.sent(start, start, start + Duration::from_micros(3));
        a.sent(at, at, at + Duration::from_nanos(2_500));
        b.sent(at, at, at + Duration::from_micros(40));
        a.merge(&b);
        assert_eq!(a.total.responses(), 2);
        assert_eq!(a.total.status[200] + a.total.status[503], 2);
        assert_eq!(a.total.non_2xx_3xx(), 1);
        assert_eq!(a.per_second, vec![1, 0, 1]);
        assert_eq!(a.total.errors.timeout, 1);
        assert_eq!(a.total.checks[0].passed, 1);
        assert_eq!(a.total.checks[0].failed, 1);
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
        // Waiting: send to first byte; receiving: first byte to last.
        let phases = &a.total.phases;
        assert_eq!(phases.waiting.len(), 2);
        assert!((3_990..=4_010).contains(&phases.waiting.min()));
        assert!((5_990..=6_010).contains(&phases.receiving.min()));
        assert!((499_000..=501_000).contains(&phases.receiving.max()));
    }

    #[test]
    fn stages_count_responses_when_done_and_sends_when_due() {
        let start = Instant::now();
        let s = Duration::from_secs;
        let ends: Arc<[Instant]> = vec![start + s(1), start + s(3)].into();
        let shape = Figures::new(true, 0);
        let mut stats = Stats::new(start, &shape, None, Some(StageCounts::new(ends)));
        for done in [0.5, 0.9, 1.0, 2.9, 3.5] {
            let at = start + Duration::from_secs_f64(done);
            stats.response(200, &timing(at, at, at, at), None);
        }
        // Due in the first stage, sent in the second.
        stats.sent(start + s(0), start + s(2), start + s(2));
        stats.sent(start + s(2), start + s(2), start + s(2));
        let stages = stats.stages.unwrap();
        // The response after the last stage's end counts in none.
        assert_eq!(stages.responses, vec![2, 2]);
        assert_eq!(stages.sent, vec![1, 1]);
    }
}
