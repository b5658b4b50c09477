//! When each request is due: the open model's timetable (a constant rate,
//! or stages), and the users model's ramp, think times and, under stages,
//! the stretches each user works. The pacer (`pacer.rs`) sends on time.

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use crate::{config::ThinkTime, stages::Curve};

/// Where a timetable puts what is never due: past any run's end.
const NEVER: Duration = Duration::from_secs(2 * 365 * 24 * 3600);

/// The open model's timetable for one connection.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    /// When its next request is due.
    pub(crate) next: Instant,
    timetable: Timetable,
}

#[derive(Debug, Clone)]
enum Timetable {
    /// A constant rate: one request every `interval`.
    Fixed { interval: Duration },
    /// Stages: request `n` of the whole test is due when the rate's
    /// integral since `start` reaches `n`; this connection sends every
    /// `step`-th from its index.
    Staged {
        start: Instant,
        curve: Arc<Curve>,
        n: u64,
        step: u64,
    },
}

impl Schedule {
    /// A constant rate: first due at `first`, then every `interval`.
    pub(crate) fn fixed(first: Instant, interval: Duration) -> Self {
        Self {
            next: first,
            timetable: Timetable::Fixed { interval },
        }
    }

    /// Connection `index` of `connections` (the whole test's) under `curve`.
    pub(crate) fn staged(start: Instant, curve: Arc<Curve>, index: u64, connections: u64) -> Self {
        let mut schedule = Self {
            next: start,
            timetable: Timetable::Staged {
                start,
                curve,
                n: index,
                step: connections,
            },
        };
        schedule.next = schedule.due(index);
        schedule
    }

    /// When request `n` of the test is due (staged) .
    fn due(&self, n: u64) -> Instant {
        match &self.timetable {
            Timetable::Fixed { .. } => self.next,
            Timetable::Staged { start, curve, .. } => match curve.time_of(n as f64) {
                Some(at) => *start + Duration::from_secs_f64(at),
                None => *start + NEVER,
            },
        }
    }

    /// The request due now was sent: the next one's time.
    pub(crate) fn advance(&mut self) {
        let n = match &mut self.timetable {
            Timetable::Fixed { interval } => {
                self.next += *interval;
                return;
            }
            Timetable::Staged { n, step, .. } => {
                *n += *step;
                *n
            }
        };
        self.next = self.due(n);
    }

    /// Requests of this connection due by `stop` and not sent.
    pub(crate) fn unsent_by(&self, stop: Instant) -> u64 {
        let Some(lag) = stop.checked_duration_since(self.next) else {
            return 0;
        };
        match &self.timetable {
            // The request at the head of the timetable is itself due.
            Timetable::Fixed { interval } => {
                (lag.as_secs_f64() / interval.as_secs_f64()) as u64 + 1
            }
            Timetable::Staged {
                start,
                curve,
                n,
                step,
            } => {
                let due_by = curve.integral((stop - *start).as_secs_f64()).floor() as u64;
                (due_by.saturating_sub(*n) / step + 1).max(1)
            }
        }
    }
}

/// The users model's pacing of one connection (one user).
#[derive(Debug, Clone)]
pub(crate) struct Pace {
    /// No request is sent before this: the user's start on the ramp, then
    /// the end of its current think time.
    pub(crate) until: Instant,
    think: Option<ThinkTime>,
    rng: fastrand::Rng,
    /// With stages: when this user works.
    shift: Option<Shift>,
}

/// A user under stages works while the target is above its index: from
/// one time to another, maybe again later.
#[derive(Debug, Clone)]
struct Shift {
    start: Instant,
    curve: Arc<Curve>,
    index: f64,
    /// The end of the current stretch.
    ends: Instant,
}

impl Pace {
    pub(crate) fn new(start: Instant, think: Option<ThinkTime>, seed: u64) -> Self {
        Self {
            until: start,
            think,
            rng: fastrand::Rng::with_seed(seed),
            shift: None,
        }
    }

    /// User `index` of a run whose number of users moves through `curve`.
    pub(crate) fn staged(
        start: Instant,
        think: Option<ThinkTime>,
        index: u64,
        curve: Arc<Curve>,
    ) -> Self {
        let mut pace = Self::new(start, think, index);
        pace.shift = Some(Shift {
            start,
            curve,
            index: index as f64,
            ends: start,
        });
        pace.next_shift(start);
        pace
    }

    /// Whether the user has stopped for now (its stretch is over, or its
    /// next request would fall after it): it finishes what is in flight,
    /// closes its connection and waits for [`Pace::next_shift`].
    pub(crate) fn off_duty(&self, now: Instant) -> bool {
        self.shift
            .as_ref()
            .is_some_and(|shift| now >= shift.ends || self.until >= shift.ends)
    }

    /// Moves to the user's next stretch after `now`; [`Pace::until`] is
    /// then when it starts (past the run's end if it never does).
    pub(crate) fn next_shift(&mut self, now: Instant) {
        let Some(shift) = &mut self.shift else {
            return;
        };
        // The stretch that ended is over, even if the user stopped early
        // (its next request would have fallen after the end).
        let from = now.max(shift.ends);
        let since = from.saturating_duration_since(shift.start).as_secs_f64();
        let at = |seconds: f64| shift.start + Duration::from_secs_f64(seconds);
        match shift.curve.active_window(shift.index, since) {
            Some((from, until)) => {
                self.until = self.until.max(at(from));
                shift.ends = at(until);
            }
            None => {
                self.until = shift.start + NEVER;
                shift.ends = self.until;
            }
        }
    }

    /// A request ended at `now`: think before the next one.
    pub(crate) fn rest(&mut self, now: Instant) {
        if let Some(think) = self.think {
            let span = think.max.saturating_sub(think.min).as_nanos() as u64;
            self.until = now + think.min + Duration::from_nanos(self.rng.u64(0..=span));
        }
    }
}
