//! Upstream host selection (docs/LOAD-BALANCING.md): the policy
//! (`choice`, `ring`, `policy`), what ties a request to a host
//! (`affinity`), and each host's health (`state`): passive ejection after
//! consecutive failures, capped so that it never empties the upstream;
//! active checks (`upstream::health` runs them and reports here); the
//! panic threshold, below which every host takes traffic; slow start;
//! per-host limits (`limits`). Shared by all workers and lock-free: a
//! round-robin pick is one atomic add and one load per host it looks at.

mod affinity;
mod choice;
mod health;
mod limits;
mod policy;
mod ring;
mod state;
#[cfg(test)]
mod tests;

use std::{
    net::IpAddr,
    sync::atomic::{AtomicUsize, Ordering::Relaxed},
    time::Duration,
};

use crate::{
    config::{Balance, HashKey, UpstreamSettings},
    ids::HostId,
    wire::head::Outgoing,
};
pub(crate) use affinity::cookie;
use affinity::{AppCookie, StickyCookie};
use choice::Cumulative;
use limits::HostLimits;
pub(crate) use limits::{NoSlot, Opening};
use policy::Usable;
use ring::Ring;
pub(crate) use state::HostHealth;
use state::HostState;

/// The hosts of one upstream, how to choose among them, and their health.
#[derive(Debug)]
pub(crate) struct Balancer {
    hosts: Box<[HostState]>,
    policy: Policy,
    /// Round robin's position (also the fallback of `hash` without a key).
    next: AtomicUsize,
    cycle: Box<[u32]>,
    /// For weighted draws; `None` when all weights are equal.
    weights: Option<Cumulative>,
    /// Whether requests count themselves in and out of `in_flight`.
    tracks_in_flight: bool,
    persistence: Option<Persistence>,
    failures_to_eject: u32,
    backoff: Duration,
    /// Hosts passive ejection may hold out at once.
    max_ejected: usize,
    /// Below this percentage of hosts in, every host takes traffic (0: never).
    panic_threshold: usize,
    slow_start: u64,
    limits: Option<HostLimits>,
    opening: Opening,
}

#[derive(Debug)]
enum Policy {
    RoundRobin,
    Random,
    LeastRequest,
    LeastTime,
    Hash {
        key: HashKey,
        ring: Ring,
        bounded_load: Option<f64>,
    },
}

#[derive(Debug)]
enum Persistence {
    Cookie(StickyCookie),
    App(AppCookie),
}

/// A chosen host, and whether the answer must carry the sticky cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pick {
    pub host: HostId,
    pub set_cookie: bool,
}

/// One host as `/upstreams` shows it.
#[derive(Debug)]
pub(crate) struct HostView {
    pub health: HostHealth,
    pub requests: u64,
    pub failures: u64,
    pub weight: u32,
    pub in_flight: u32,
    pub latency_ewma: Duration,
    pub ejections: u64,
}

impl Balancer {
    /// The balancer of an upstream's settings (the one place it is
    /// built): `hosts` names each host (its URL and address: the ring's
    /// points and the sticky cookie's value) with its weight; `workers`
    /// shards the per-host counters.
    pub(crate) fn new(
        settings: &UpstreamSettings,
        hosts: &[(String, u32)],
        workers: usize,
    ) -> anyhow::Result<Self> {
        let urls: Vec<&str> = hosts.iter().map(|(name, _)| name.as_str()).collect();
        let weights: Vec<u32> = hosts.iter().map(|&(_, weight)| weight).collect();
        let policy = match settings.balance {
            Balance::RoundRobin => Policy::RoundRobin,
            Balance::Random => Policy::Random,
            Balance::LeastRequest => Policy::LeastRequest,
            Balance::LeastTime => Policy::LeastTime,
            Balance::Hash => {
                let hash = settings
                    .hash
                    .as_ref()
                    .ok_or_else(|| anyhow::anyhow!("balance: hash needs `hash.key`"))?;
                Policy::Hash {
                    key: hash.key.clone(),
                    ring: Ring::new(&urls, &weights),
                    bounded_load: hash.bounded_load,
                }
            }
        };
        let persistence = match &settings.sticky {
            Some(sticky) => match (&sticky.cookie, &sticky.app_cookie) {
                (Some(name), _) => Some(Persistence::Cookie(StickyCookie::new(
                    name,
                    sticky.key.as_ref().map(|key| key.expose().as_str()),
                    &urls,
                )?)),
                (None, Some(name)) => Some(Persistence::App(AppCookie::new(name))),
                (None, None) => None,
            },
            None => None,
        };
        let tracks_in_flight = matches!(policy, Policy::LeastRequest | Policy::LeastTime)
            || matches!(
                policy,
                Policy::Hash {
                    bounded_load: Some(_),
                    ..
                }
            );
        let count = weights.len();
        let health = &settings.health;
        let share = count * health.max_ejected_percent.min(100) as usize / 100;
        Ok(Self {
            hosts: weights
                .iter()
                .map(|&w| HostState::new(w, workers))
                .collect(),
            policy,
            next: AtomicUsize::new(0),
            cycle: choice::smooth_cycle(&weights).into(),
            weights: weights
                .iter()
                .any(|&w| w != weights[0])
                .then(|| Cumulative::new(&weights)),
            tracks_in_flight,
            persistence,
            failures_to_eject: health.failures.max(1),
            backoff: health.backoff,
            max_ejected: share.min(count.saturating_sub(1)),
            panic_threshold: health.panic_threshold.min(100) as usize,
            slow_start: u64::try_from(settings.slow_start.unwrap_or_default().as_nanos())
                .unwrap_or(u64::MAX),
            limits: settings
                .max_connections
                .map(|max| HostLimits::new(count, max, settings.max_pending)),
            opening: Opening::new(count, settings.max_connecting),
        })
    }

    /// The policy's name as `balance:` spells it.
    pub(crate) fn policy_name(&self) -> &'static str {
        match self.policy {
            Policy::RoundRobin => "round_robin",
            Policy::Random => "random",
            Policy::LeastRequest => "least_request",
            Policy::LeastTime => "least_time",
            Policy::Hash { .. } => "hash",
        }
    }

    /// The host for a request, or `None` when no host takes traffic (503):
    /// among the hosts in, or all of them below the panic threshold.
    /// `now` is nanoseconds on the plan's clock.
    /// `request` gives the request and the client's address, asked only
    /// by a policy or persistence that reads them (round robin does not).
    pub(crate) fn pick<'r>(
        &self,
        request: impl FnOnce() -> (Outgoing<'r>, IpAddr),
        now: u64,
    ) -> Option<Pick> {
        let request = (self.persistence.is_some() || matches!(self.policy, Policy::Hash { .. }))
            .then(request);
        let pinned = match (&self.persistence, &request) {
            (Some(Persistence::Cookie(cookie)), Some((request, _))) => cookie.host(request),
            (Some(Persistence::App(app)), Some((request, _))) => app.host(request),
            _ => None,
        };
        let usable = Usable::new(self, now);
        if let Some(host) = pinned.filter(|&h| usable.host(h)) {
            return Some(Pick {
                host: HostId::new(host),
                set_cookie: false,
            });
        }
        let host = match &self.policy {
            Policy::RoundRobin => self.round_robin(&usable),
            Policy::Random => self.random(&usable),
            Policy::LeastRequest => self.two_choices(&usable, |h, share| {
                choice::least_request_cost(h.in_flight.load(Relaxed), share)
            }),
            Policy::LeastTime => self.two_choices(&usable, |h, share| {
                choice::least_time_cost(h.latency.at(now), h.in_flight.load(Relaxed), share)
            }),
            Policy::Hash {
                key,
                ring,
                bounded_load,
            } => match request
                .as_ref()
                .and_then(|(request, peer)| affinity::hash_key(key, request, *peer))
            {
                Some(hash) => self.hashed(ring, hash, *bounded_load, &usable),
                None => self.round_robin(&usable),
            },
        }?;
        Some(Pick {
            host,
            set_cookie: matches!(self.persistence, Some(Persistence::Cookie(_))),
        })
    }

    /// Whether requests must call [`Balancer::begin`] and [`Balancer::end`].
    pub(crate) fn tracks_in_flight(&self) -> bool {
        self.tracks_in_flight
    }

    pub(crate) fn begin(&self, host: HostId) {
        self.hosts[host.index()].in_flight.fetch_add(1, Relaxed);
    }

    pub(crate) fn end(&self, host: HostId) {
        let _ = self.hosts[host.index()]
            .in_flight
            .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
    }

    /// A response head came from `host` after `elapsed`: its failure
    /// count restarts, and `least_time` learns its latency (`now` is only
    /// read then).
    pub(crate) fn success(&self, host: HostId, elapsed: Duration, now: impl FnOnce() -> u64) {
        let state = &self.hosts[host.index()];
        // Read first: a store on every request would bounce the line between cores.
        if state.consecutive_failures.load(Relaxed) != 0 {
            state.consecutive_failures.store(0, Relaxed);
        }
        if matches!(self.policy, Policy::LeastTime) {
            let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
            state.latency.observe(nanos, now());
        }
    }

    /// How long an ejected host stays out.
    pub(crate) fn backoff(&self) -> Duration {
        self.backoff
    }

    /// Host `to` takes over the health of `old`'s host `from` (a reload
    /// that keeps the host; both balancers count time from one origin).
    pub(crate) fn carry_host(&self, to: HostId, old: &Balancer, from: HostId) {
        self.hosts[to.index()].take_over(&old.hosts[from.index()]);
    }

    /// Takes over what `old` (the same upstream in the plan before)
    /// learned about application cookies; `moved[h]` is old host `h`'s
    /// index here, if this plan keeps it.
    pub(crate) fn carry_persistence(&self, old: &Balancer, moved: &[Option<usize>]) {
        if let (Some(Persistence::App(app)), Some(Persistence::App(before))) =
            (&self.persistence, &old.persistence)
        {
            app.take_over(before, moved);
        }
    }

    /// `host` is new at `now` (a reload or a discovery round added it): it
    /// ramps up like a host that came back (`slow_start`).
    pub(crate) fn arrived(&self, host: HostId, now: u64) {
        self.hosts[host.index()]
            .back_since
            .store(now.max(1), Relaxed);
    }

    /// Counts a response head from `host` on `worker`'s shard.
    pub(crate) fn answered(&self, host: HostId, worker: usize) {
        self.hosts[host.index()].count(worker, 0);
    }

    /// Counts a failure of `host` on `worker`'s shard.
    pub(crate) fn failed(&self, host: HostId, worker: usize) {
        self.hosts[host.index()].count(worker, 1);
    }

    /// Response heads `host` has sent so far (every worker's).
    pub(crate) fn answers(&self, host: HostId) -> u64 {
        self.hosts[host.index()].total(0)
    }

    /// Hosts that take traffic at `now` (for /ready and metrics).
    pub(crate) fn healthy(&self, now: u64) -> usize {
        self.hosts.iter().filter(|h| h.is_in(now)).count()
    }

    pub(crate) fn view(&self, host: HostId, now: u64) -> HostView {
        let state = &self.hosts[host.index()];
        let health = if state.is_checked_down() {
            HostHealth::Down
        } else if state.is_ejected(now) {
            HostHealth::Ejected
        } else if state.ramp(self.slow_start, now) < 1.0 {
            HostHealth::Ramping
        } else {
            HostHealth::Healthy
        };
        HostView {
            health,
            requests: state.total(0),
            failures: state.total(1),
            weight: state.weight,
            in_flight: state.in_flight.load(Relaxed),
            latency_ewma: Duration::from_nanos(state.latency.nanos()),
            ejections: state.ejections.load(Relaxed),
        }
    }

    /// The `Set-Cookie` value that pins a client to `host`.
    pub(crate) fn sticky_cookie(&self, host: HostId) -> Option<&http::HeaderValue> {
        match &self.persistence {
            Some(Persistence::Cookie(cookie)) => cookie.set_cookie(host.index()),
            _ => None,
        }
    }

    /// The application cookie's name, when the answers must be read for it.
    pub(crate) fn app_cookie(&self) -> Option<&str> {
        match &self.persistence {
            Some(Persistence::App(app)) => Some(&app.name),
            _ => None,
        }
    }

    /// Learns the host of an application cookie value from `host`'s `Set-Cookie`.
    pub(crate) fn learn(&self, host: HostId, set_cookie: &[u8]) {
        if let Some(Persistence::App(app)) = &self.persistence {
            app.learn(set_cookie, host.index());
        }
    }

    /// The per-host connection limits, when `max_connections` is set.
    pub(crate) fn limits(&self) -> Option<&HostLimits> {
        self.limits.as_ref()
    }

    /// The slots for opening connections (`max_connecting`).
    pub(crate) fn opening(&self) -> &Opening {
        &self.opening
    }
}
