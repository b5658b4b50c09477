//! The health side of a [`Balancer`]: passive ejection after consecutive
//! failures (capped, so that it never empties the upstream for soft
//! failures) and the results of active checks.

use std::sync::atomic::Ordering::Relaxed;

use super::{state::CHECKED_DOWN, Balancer};
use crate::ids::HostId;

impl Balancer {
    /// Counts a failure; returns true when it ejected the host. A soft
    /// failure (a timeout, a reset, a 5xx) does not eject when that would
    /// put more than `max_ejected` hosts out: one bad host among many
    /// should go, but a saturated upstream's only host must not (that
    /// turns slow answers into none). A refused connection is hard: the
    /// host is not there, and ejecting it costs no answer.
    pub(crate) fn failure(&self, host: HostId, hard: bool, now: u64) -> bool {
        let state = &self.hosts[host.index()];
        let failures = state.consecutive_failures.fetch_add(1, Relaxed) + 1;
        if failures < self.failures_to_eject {
            return false;
        }
        state.consecutive_failures.store(0, Relaxed);
        if !hard && self.ejected(now) >= self.max_ejected {
            return false;
        }
        let backoff = u64::try_from(self.backoff.as_nanos()).unwrap_or(u64::MAX);
        let until = now.saturating_add(backoff).clamp(1, CHECKED_DOWN - 1);
        let previous = state.out_until.load(Relaxed);
        // Already out (down by active checks, or ejected and tried anyway
        // below the panic threshold): an ejection's backoff runs from the
        // first one, counted and logged once.
        if previous > now
            || state
                .out_until
                .compare_exchange(previous, until, Relaxed, Relaxed)
                .is_err()
        {
            return false;
        }
        // Two workers may eject two hosts at once: the later one looks again.
        if !hard && self.ejected(now) > self.max_ejected {
            state.out_until.store(previous, Relaxed);
            return false;
        }
        state.back_since.store(until, Relaxed);
        state.ejections.fetch_add(1, Relaxed);
        true
    }

    fn ejected(&self, now: u64) -> usize {
        self.hosts.iter().filter(|h| h.is_ejected(now)).count()
    }

    /// An active check's result; `Some(true)` when the host just came
    /// back, `Some(false)` when it just went down.
    pub(crate) fn checked(
        &self,
        host: HostId,
        passed: bool,
        (rise, fall): (u32, u32),
        now: u64,
    ) -> Option<bool> {
        let state = &self.hosts[host.index()];
        // Passes in a row count up from 0, failures down from 0.
        let streak = state.check_streak.load(Relaxed);
        let streak = if passed {
            streak.max(0).saturating_add(1)
        } else {
            streak.min(0).saturating_sub(1)
        };
        state.check_streak.store(streak, Relaxed);
        let down = state.is_checked_down();
        if passed && down && streak.unsigned_abs() >= rise {
            state.back_since.store(now.max(1), Relaxed);
            state.out_until.store(0, Relaxed);
            return Some(true);
        }
        if !passed && !down && streak.unsigned_abs() >= fall {
            state.out_until.store(CHECKED_DOWN, Relaxed);
            return Some(false);
        }
        None
    }
}
