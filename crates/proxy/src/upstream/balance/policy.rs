//! The policies' walk over the hosts, and which hosts they may choose:
//! those in, or all of them while too few are (the panic threshold).

use std::{cell::Cell, sync::atomic::Ordering::Relaxed};

use super::{ring::Ring, state::HostState, Balancer};
use crate::ids::HostId;

/// Which hosts a pick may choose at `now`: those in (not ejected, not
/// down by active checks), or every host while fewer than
/// `health.panic_threshold` percent of them are in. That is Envoy's
/// panic mode: with most hosts out, health is the likelier liar (a
/// saturated backend's timeouts, a restart's refusals), and sending the
/// traffic to every host beats piling it on the few left or answering
/// 503 for a whole backoff. The share is counted only when a host that is
/// out comes up, and at most once per pick.
pub(super) struct Usable<'a> {
    balancer: &'a Balancer,
    pub(super) now: u64,
    panic: Cell<Option<bool>>,
}

impl<'a> Usable<'a> {
    pub(super) fn new(balancer: &'a Balancer, now: u64) -> Self {
        Self {
            balancer,
            now,
            panic: Cell::new(None),
        }
    }

    #[inline]
    pub(super) fn host(&self, host: usize) -> bool {
        self.balancer.hosts[host].is_in(self.now) || self.panic()
    }

    fn panic(&self) -> bool {
        if let Some(panic) = self.panic.get() {
            return panic;
        }
        let panic = self.balancer.panics(self.now);
        self.panic.set(Some(panic));
        panic
    }
}

impl Balancer {
    /// Whether fewer than `panic_threshold` percent of the hosts are in
    /// at `now` (then every host takes traffic).
    pub(crate) fn panics(&self, now: u64) -> bool {
        self.panic_threshold != 0
            && self.healthy(now) * 100 < self.panic_threshold * self.hosts.len()
    }

    /// The next usable host in the smooth weighted cycle; a ramping host
    /// is passed over in proportion to how far it is from its full share.
    pub(super) fn round_robin(&self, usable: &Usable<'_>) -> Option<HostId> {
        let now = usable.now;
        let len = self.cycle.len();
        let start = self.next.fetch_add(1, Relaxed);
        // The common case first: the next host takes traffic, nothing ramps.
        let first = self.cycle[start % len] as usize;
        if self.slow_start == 0 && self.hosts[first].is_in(now) {
            return Some(HostId::new(first));
        }
        let mut fallback = None;
        for offset in 0..len {
            let host = self.cycle[(start + offset) % len] as usize;
            if !usable.host(host) {
                continue;
            }
            let state = &self.hosts[host];
            if self.slow_start == 0 || fastrand::f64() < state.ramp(self.slow_start, now) {
                return Some(HostId::new(host));
            }
            fallback.get_or_insert(host);
        }
        fallback.map(HostId::new)
    }

    /// A host drawn at random in proportion to the weights.
    fn draw(&self) -> usize {
        match &self.weights {
            Some(weights) => weights.host(fastrand::u64(0..weights.total())),
            None => fastrand::usize(0..self.hosts.len()),
        }
    }

    pub(super) fn random(&self, usable: &Usable<'_>) -> Option<HostId> {
        for _ in 0..4 {
            let host = self.draw();
            let state = &self.hosts[host];
            if usable.host(host) && fastrand::f64() < state.ramp(self.slow_start, usable.now) {
                return Some(HostId::new(host));
            }
        }
        self.round_robin(usable)
    }

    /// Power of two choices: two distinct usable hosts, drawn in
    /// proportion to their weights, the one with the lower `cost` (ties:
    /// the first drawn, so that unloaded hosts share by weight).
    pub(super) fn two_choices(
        &self,
        usable: &Usable<'_>,
        cost: impl Fn(&HostState, f64) -> f64,
    ) -> Option<HostId> {
        let mut candidates = [None, None];
        let mut found = 0;
        for _ in 0..8 {
            let host = self.draw();
            if usable.host(host) && candidates[0] != Some(host) {
                candidates[found] = Some(host);
                found += 1;
                if found == 2 {
                    break;
                }
            }
        }
        if found == 0 {
            return self.round_robin(usable);
        }
        let cost_of = |host: usize| {
            let state = &self.hosts[host];
            cost(state, state.ramp(self.slow_start, usable.now))
        };
        let best = match candidates {
            [Some(a), Some(b)] if cost_of(b) < cost_of(a) => b,
            [Some(a), _] => a,
            _ => return self.round_robin(usable),
        };
        Some(HostId::new(best))
    }

    pub(super) fn hashed(
        &self,
        ring: &Ring,
        key: u64,
        bounded: Option<f64>,
        usable: &Usable<'_>,
    ) -> Option<HostId> {
        let limit = bounded.map(|factor| {
            let (load, up) = (0..self.hosts.len())
                .filter(|&h| usable.host(h))
                .fold((0u64, 0u64), |(l, n), h| {
                    (l + u64::from(self.hosts[h].in_flight.load(Relaxed)), n + 1)
                });
            // Mirrokni et al.: ceil(c * (load + 1) / hosts).
            (factor * (load + 1) as f64 / up.max(1) as f64).ceil() as u32
        });
        ring.find(key, |host| {
            usable.host(host)
                && limit.is_none_or(|max| self.hosts[host].in_flight.load(Relaxed) < max)
        })
        .or_else(|| {
            // Every host at its bound: the key's own host, load or not.
            ring.find(key, |host| usable.host(host))
        })
        .map(HostId::new)
    }

    /// The next usable host after `failed` (a retry).
    pub(crate) fn pick_after(&self, failed: HostId, now: u64) -> Option<HostId> {
        let usable = Usable::new(self, now);
        let count = self.hosts.len();
        (1..count)
            .map(|offset| (failed.index() + offset) % count)
            .find(|&host| usable.host(host))
            .map(HostId::new)
    }

    /// Whether `host` is in at `now` by its health alone (not ejected, not
    /// down), whatever the panic threshold says.
    pub(crate) fn is_in(&self, host: HostId, now: u64) -> bool {
        self.hosts[host.index()].is_in(now)
    }
}
