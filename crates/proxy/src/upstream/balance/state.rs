//! One host's shared state: whether it takes traffic (passive ejection,
//! active checks), since when (slow start), its in-flight requests and
//! latency. Plain atomics: workers and the health checker update it
//! without a lock.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::Relaxed};

use super::choice::PeakEwma;

/// `out_until` when an active check took the host out (until it rises).
pub(super) const CHECKED_DOWN: u64 = u64::MAX;

#[derive(Debug)]
pub(super) struct HostState {
    pub weight: u32,
    /// 0: in; [`CHECKED_DOWN`]: out until active checks pass `rise`
    /// times; otherwise ejected until this instant (balancer clock, ns).
    pub out_until: AtomicU64,
    /// When it last came back (ns; 0: never out), for slow start.
    pub back_since: AtomicU64,
    pub consecutive_failures: AtomicU32,
    /// Active checks in a row that passed (positive) or failed (negative);
    /// only the checker writes it.
    pub check_streak: AtomicI32,
    pub in_flight: AtomicU32,
    pub latency: PeakEwma,
    pub ejections: AtomicU64,
    /// By worker: response heads and failures (each worker writes only
    /// its own line).
    counters: Box<[Counters]>,
}

/// One worker's counts for one host, on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Counters([AtomicU64; 2]);

impl HostState {
    pub(super) fn new(weight: u32, workers: usize) -> Self {
        Self {
            weight,
            out_until: AtomicU64::new(0),
            back_since: AtomicU64::new(0),
            consecutive_failures: AtomicU32::new(0),
            check_streak: AtomicI32::new(0),
            in_flight: AtomicU32::new(0),
            latency: PeakEwma::default(),
            ejections: AtomicU64::new(0),
            counters: (0..workers.max(1)).map(|_| Counters::default()).collect(),
        }
    }

    /// Takes over `old`'s health, latency and counts (a reload keeping
    /// the host). In-flight requests stay with the plan they started on.
    pub(super) fn take_over(&self, old: &HostState) {
        let copy = |to: &AtomicU64, from: &AtomicU64| to.store(from.load(Relaxed), Relaxed);
        copy(&self.out_until, &old.out_until);
        copy(&self.back_since, &old.back_since);
        copy(&self.ejections, &old.ejections);
        self.consecutive_failures
            .store(old.consecutive_failures.load(Relaxed), Relaxed);
        self.check_streak
            .store(old.check_streak.load(Relaxed), Relaxed);
        self.latency.take_over(&old.latency);
        for (to, from) in self.counters.iter().zip(old.counters.iter()) {
            copy(&to.0[0], &from.0[0]);
            copy(&to.0[1], &from.0[1]);
        }
    }

    pub(super) fn count(&self, worker: usize, cell: usize) {
        if let Some(counters) = self.counters.get(worker) {
            counters.0[cell].fetch_add(1, Relaxed);
        }
    }

    pub(super) fn total(&self, cell: usize) -> u64 {
        self.counters.iter().map(|c| c.0[cell].load(Relaxed)).sum()
    }

    /// Takes traffic at `now`.
    #[inline]
    pub(super) fn is_in(&self, now: u64) -> bool {
        self.out_until.load(Relaxed) <= now
    }

    /// Out for passive ejection (not counting active checks).
    pub(super) fn is_ejected(&self, now: u64) -> bool {
        let until = self.out_until.load(Relaxed);
        until > now && until != CHECKED_DOWN
    }

    pub(super) fn is_checked_down(&self) -> bool {
        self.out_until.load(Relaxed) == CHECKED_DOWN
    }

    /// The share of its weight it gets while ramping up after coming back:
    /// from 10% to 100% over `slow_start` ns (1.0 when not ramping).
    pub(super) fn ramp(&self, slow_start: u64, now: u64) -> f64 {
        if slow_start == 0 {
            return 1.0;
        }
        let since = self.back_since.load(Relaxed);
        if since == 0 || since > now {
            // Never out, or still out.
            return 1.0;
        }
        let elapsed = now - since;
        if elapsed >= slow_start {
            return 1.0;
        }
        (elapsed as f64 / slow_start as f64).max(0.1)
    }
}

/// The state a host is in, for `/upstreams` and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostHealth {
    Healthy,
    /// Back, and taking a growing share (`slow_start`).
    Ramping,
    /// Passive health took it out for a while.
    Ejected,
    /// Active checks failed `fall` times in a row.
    Down,
}

impl HostHealth {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Ramping => "slow_start",
            Self::Ejected => "ejected",
            Self::Down => "down",
        }
    }
}
