//! Upstream host selection: round-robin over the hosts that are not
//! ejected, with passive health. A host that fails `failures` times in a
//! row is ejected for `backoff`; after that it gets traffic again, and one
//! success resets its count. Shared by all workers, lock-free.

use crate::ids::HostId;
use std::{
    sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering},
    time::Duration,
};

use crate::config::Health;

/// The hosts of one upstream and their health.
#[derive(Debug)]
pub(crate) struct Balancer {
    hosts: Vec<HostState>,
    next: AtomicUsize,
    failures_to_eject: u32,
    backoff: Duration,
}

#[derive(Debug, Default)]
struct HostState {
    consecutive_failures: AtomicU32,
    /// Ejected until this many nanoseconds after the balancer's clock origin; 0: not ejected.
    ejected_until: AtomicU64,
}

impl Balancer {
    pub(crate) fn new(host_count: usize, health: &Health) -> Self {
        Self {
            hosts: (0..host_count).map(|_| HostState::default()).collect(),
            next: AtomicUsize::new(0),
            failures_to_eject: health.failures.max(1),
            backoff: health.backoff,
        }
    }

    /// The next healthy host, or `None` when every host is ejected (503).
    /// `now` is nanoseconds on the caller's monotonic clock.
    pub(crate) fn pick(&self, now: u64) -> Option<HostId> {
        let count = self.hosts.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..count)
            .map(|offset| (start + offset) % count)
            .find(|&host| self.hosts[host].ejected_until.load(Ordering::Relaxed) <= now)
            .map(HostId::new)
    }

    /// The next healthy host after `failed` (a retry after a connect failure).
    pub(crate) fn pick_after(&self, failed: HostId, now: u64) -> Option<HostId> {
        let count = self.hosts.len();
        (1..count)
            .map(|offset| (failed.index() + offset) % count)
            .find(|&host| self.hosts[host].ejected_until.load(Ordering::Relaxed) <= now)
            .map(HostId::new)
    }

    pub(crate) fn success(&self, host: HostId) {
        // Read first: a store on every request would bounce the line between cores.
        let failures = &self.hosts[host.index()].consecutive_failures;
        if failures.load(Ordering::Relaxed) != 0 {
            failures.store(0, Ordering::Relaxed);
        }
    }

    /// How long an ejected host stays out.
    pub(crate) fn backoff(&self) -> Duration {
        self.backoff
    }

    /// Counts a failure; returns true when it ejected the host.
    pub(crate) fn failure(&self, host: HostId, now: u64) -> bool {
        let state = &self.hosts[host.index()];
        let failures = state.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures < self.failures_to_eject {
            return false;
        }
        state.consecutive_failures.store(0, Ordering::Relaxed);
        let backoff = u64::try_from(self.backoff.as_nanos()).unwrap_or(u64::MAX);
        state
            .ejected_until
            .store(now.saturating_add(backoff).max(1), Ordering::Relaxed);
        true
    }

    /// Host `to` takes over the health of `old`'s host `from` (a reload
    /// that keeps the host; both balancers count time from one origin).
    pub(crate) fn carry_host(&self, to: HostId, old: &Balancer, from: HostId) {
        let (to, from) = (&self.hosts[to.index()], &old.hosts[from.index()]);
        let failures = from.consecutive_failures.load(Ordering::Relaxed);
        to.consecutive_failures.store(failures, Ordering::Relaxed);
        let ejected_until = from.ejected_until.load(Ordering::Relaxed);
        to.ejected_until.store(ejected_until, Ordering::Relaxed);
    }

    /// Hosts not ejected at `now` (for /ready and metrics).
    pub(crate) fn healthy(&self, now: u64) -> usize {
        self.hosts
            .iter()
            .filter(|h| h.ejected_until.load(Ordering::Relaxed) <= now)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;
    const H0: HostId = HostId::new(0);
    const H1: HostId = HostId::new(1);

    fn balancer(hosts: usize) -> Balancer {
        Balancer::new(
            hosts,
            &Health {
                failures: 2,
                backoff: Duration::from_secs(10),
            },
        )
    }

    #[test]
    fn round_robin_over_all_hosts() {
        let b = balancer(3);
        let picks: Vec<_> = (0..6).map(|_| b.pick(0).unwrap().index()).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn failing_hosts_are_ejected_then_return() {
        let b = balancer(2);
        assert!(!b.failure(H1, SECOND));
        assert!(b.failure(H1, SECOND));
        assert_eq!(b.healthy(2 * SECOND), 1);
        assert!((0..4).all(|_| b.pick(2 * SECOND) == Some(H0)));
        assert_eq!(b.pick_after(H0, 2 * SECOND), None);
        // Back after the backoff.
        assert_eq!(b.healthy(12 * SECOND), 2);
        let picks: Vec<_> = (0..2).map(|_| b.pick(12 * SECOND).unwrap()).collect();
        assert!(picks.contains(&H1));
    }

    #[test]
    fn all_ejected_means_none_and_a_success_resets_the_count() {
        let b = balancer(1);
        assert!(!b.failure(H0, 0));
        b.success(H0);
        assert!(!b.failure(H0, 0), "the success reset the count");
        assert!(b.failure(H0, 0));
        assert_eq!(b.pick(SECOND), None);
        assert_eq!(b.pick(11 * SECOND), Some(H0));
    }
}
