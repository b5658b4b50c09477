//! Proxy metrics, rendered as Prometheus text on the admin listener.
//!
//! Each worker writes only its own shard (plain relaxed atomics, no lock,
//! no shared cache line between cores); a scrape sums the shards. Labels
//! are known when the configuration is compiled (routes, upstreams, status
//! codes 100-599), so a request touches pre-indexed counters instead of the
//! hashed label families of prometheus-client, which take a lock per update.
//!
//! A route's or an upstream's counters are a row found by its name (its
//! slot, carried in its id), not by its position in a plan: a reload that
//! moves, adds or removes routes and upstreams keeps every counter, and a
//! request that started on the old plan counts in the same row as one on
//! the new. Rows are made when a name is first compiled and live as long
//! as the process.

use std::{
    sync::{
        atomic::{AtomicI64, AtomicU64, Ordering::Relaxed},
        Mutex, OnceLock,
    },
    time::Duration,
};

use crate::{
    ids::{RouteId, UpstreamId},
    wire::normalize::Refusal,
};

mod client_conns;
mod events;
mod exposition;
mod mirrors;
mod snapshot;
pub(crate) mod trace;
use client_conns::ClientCells;
pub(crate) use events::Event;
use events::EventCells;
pub(crate) use exposition::{Exposition, Family, Labels, MetricKind};
pub(crate) use mirrors::Mirrored;
pub(crate) use snapshot::{bounds, histogram, write_histogram};
use MetricKind::{Counter, Gauge};

/// Upper bounds of the upstream latency buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Status codes 100..=599; anything else is counted as 599.
const STATUSES: usize = 500;
/// Distinct route names a process counts, over all its reloads (slot 0
/// is for requests that matched no route).
pub(crate) const ROUTE_SLOTS: usize = 4096;
/// Distinct upstream names a process counts, over all its reloads.
pub(crate) const UPSTREAM_SLOTS: usize = 1024;

/// All metrics of one proxy: one shard per worker.
#[derive(Debug)]
pub(crate) struct Metrics {
    shards: Vec<Shard>,
    /// The label of each slot that has a row.
    names: Mutex<Names>,
    /// Configuration reloads that served the new file, and that failed.
    reloads: [AtomicU64; 2],
    /// Host name resolutions that failed (the last answer stayed), and
    /// those that changed an upstream's addresses.
    discovery_failures: AtomicU64,
    discovery_changes: AtomicU64,
}

#[derive(Debug, Default)]
struct Names {
    routes: Vec<String>,
    upstreams: Vec<String>,
}

/// Histogram cells: a count per bucket of [`BUCKETS`], then the sum in
/// microseconds and the count.
pub(crate) type HistogramCells = [AtomicU64; BUCKETS.len() + 2];

/// Counts one observation.
pub(crate) fn observe(cells: &HistogramCells, elapsed: Duration) {
    let seconds = elapsed.as_secs_f64();
    if let Some(bucket) = BUCKETS.iter().position(|&bound| seconds <= bound) {
        cells[bucket].fetch_add(1, Relaxed);
    }
    let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    cells[BUCKETS.len()].fetch_add(micros, Relaxed);
    cells[BUCKETS.len() + 1].fetch_add(1, Relaxed);
}

/// One row of counters, made when its name is first compiled.
type Row<T> = OnceLock<Box<T>>;

/// What one worker counts of one upstream.
#[derive(Debug, Default)]
struct UpstreamCells {
    latency: HistogramCells,
    /// Idle pooled connections, and connections to it open.
    pool_idle: AtomicI64,
    open: AtomicI64,
    errors: [AtomicU64; 3],
}

/// What one worker counts.
#[derive(Debug)]
pub(crate) struct Shard {
    /// By route slot (0: requests that matched no route), a counter per status code − 100.
    requests: Box<[Row<[AtomicU64]>]>,
    /// By upstream slot.
    upstreams: Box<[Row<UpstreamCells>]>,
    /// Client connections and their streams.
    clients: ClientCells,
    /// Requests refused by normalisation, by [`Refusal`] (in `Refusal::ALL` order).
    refused: [AtomicU64; Refusal::ALL.len()],
    /// Upgrade offers removed from requests (h2c, or not listed on the route).
    upgrades_removed: AtomicU64,
    /// Requests whose path or method override fields were removed.
    overrides_removed: AtomicU64,
    events: EventCells,
    mirrors: mirrors::MirrorCells,
}

/// Why an upstream exchange failed, for `sluice_upstream_errors_total`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum UpstreamError {
    Connect = 0,
    Broken = 1,
    Timeout = 2,
}

impl Metrics {
    /// Counters in `workers` shards, with the row for requests that
    /// matched no route; routes and upstreams get theirs from
    /// [`Metrics::route_slots`] and [`Metrics::upstream_slots`].
    pub(crate) fn new(workers: usize) -> Self {
        let shards = (0..workers.max(1))
            .map(|_| Shard {
                requests: (0..ROUTE_SLOTS).map(|_| OnceLock::new()).collect(),
                upstreams: (0..UPSTREAM_SLOTS).map(|_| OnceLock::new()).collect(),
                clients: ClientCells::default(),
                refused: Default::default(),
                upgrades_removed: AtomicU64::new(0),
                overrides_removed: AtomicU64::new(0),
                events: Default::default(),
                mirrors: Default::default(),
            })
            .collect();
        let metrics = Self {
            shards,
            names: Mutex::new(Names::default()),
            reloads: Default::default(),
            discovery_failures: AtomicU64::new(0),
            discovery_changes: AtomicU64::new(0),
        };
        let _ = metrics.route_slots(&["none"]);
        metrics
    }

    /// The slot of each route name, in order: the one it had if the name
    /// was compiled before (the first not yet given out in this call, when
    /// several routes share a name), else a new one.
    pub(crate) fn route_slots(&self, names: &[&str]) -> anyhow::Result<Vec<usize>> {
        let mut all = self
            .names
            .lock()
            .map_err(|_| anyhow::anyhow!("metrics poisoned"))?;
        let slots = slots(&mut all.routes, names, ROUTE_SLOTS, "route paths")?;
        for shard in &self.shards {
            for &slot in &slots {
                shard.requests[slot]
                    .get_or_init(|| (0..STATUSES).map(|_| AtomicU64::new(0)).collect());
            }
        }
        Ok(slots)
    }

    /// The slot of each upstream name (names are unique).
    pub(crate) fn upstream_slots(&self, names: &[&str]) -> anyhow::Result<Vec<usize>> {
        let mut all = self
            .names
            .lock()
            .map_err(|_| anyhow::anyhow!("metrics poisoned"))?;
        let slots = slots(&mut all.upstreams, names, UPSTREAM_SLOTS, "upstream names")?;
        for shard in &self.shards {
            for &slot in &slots {
                shard.upstreams[slot].get_or_init(Box::default);
            }
        }
        Ok(slots)
    }

    pub(crate) fn shard(&self, worker: usize) -> &Shard {
        &self.shards[worker % self.shards.len()]
    }

    pub(crate) fn reload_done(&self, served: bool) {
        self.reloads[usize::from(!served)].fetch_add(1, Relaxed);
    }

    pub(crate) fn discovery_failed(&self) {
        self.discovery_failures.fetch_add(1, Relaxed);
    }

    pub(crate) fn discovery_changed(&self) {
        self.discovery_changes.fetch_add(1, Relaxed);
    }

    /// Appends the proxy's families: every route and upstream name
    /// compiled since start (a removed one keeps its counters, in case it
    /// comes back).
    pub(crate) fn render(&self, out: &mut Exposition) {
        let (route_names, upstream_names) = match self.names.lock() {
            Ok(names) => (names.routes.clone(), names.upstreams.clone()),
            Err(_) => Default::default(),
        };
        let sum = |f: &dyn Fn(&Shard) -> u64| self.shards.iter().map(f).sum::<u64>();
        let sum_i = |f: &dyn Fn(&Shard) -> i64| self.shards.iter().map(f).sum::<i64>();

        let mut family = out.family(
            "sluice_requests_total",
            Counter,
            "Requests answered, by route and status.",
        );
        for (route, label) in route_names.iter().enumerate() {
            for status in 0..STATUSES {
                let n = sum(&|s| {
                    s.requests[route]
                        .get()
                        .map_or(0, |row| row[status].load(Relaxed))
                });
                if n > 0 {
                    let code = (status + 100).to_string();
                    family.sample(&[("route", label), ("status", &code)], n);
                }
            }
        }

        let mut family = out.family(
            "sluice_upstream_response_seconds",
            MetricKind::Histogram,
            "Time from sending a request upstream to its response head.",
        );
        for (u, upstream) in upstream_names.iter().enumerate() {
            write_histogram(
                &mut family,
                &[("upstream", upstream)],
                self.shards
                    .iter()
                    .filter_map(|s| s.upstreams[u].get())
                    .map(|cells| &cells.latency),
            );
        }

        let mut family = out.family(
            "sluice_upstream_errors_total",
            Counter,
            "Failed upstream exchanges, by kind.",
        );
        for (u, upstream) in upstream_names.iter().enumerate() {
            for (kind, label) in ["connect", "broken", "timeout"].iter().enumerate() {
                let n = sum(&|s| s.upstream(u).map_or(0, |c| c.errors[kind].load(Relaxed)));
                family.sample(&[("upstream", upstream), ("kind", label)], n);
            }
        }

        let mut family = out.family("sluice_requests_refused_total", Counter, "Requests refused (400) before routing, by reason (docs/CONFIG.md, Request normalisation).");
        for (i, reason) in Refusal::ALL.iter().enumerate() {
            family.sample(
                &[("reason", reason.label())],
                sum(&|s| s.refused[i].load(Relaxed)),
            );
        }
        let counters = [
            ("sluice_upgrades_removed_total", "Upgrade offers removed from requests (h2c, or a protocol the route does not list).", sum(&|s| s.upgrades_removed.load(Relaxed))),
            ("sluice_override_headers_removed_total", "Requests whose X-Original-URL, X-Rewrite-URL or method override fields were removed (paths.override_headers).", sum(&|s| s.overrides_removed.load(Relaxed))),
        ];
        for (name, help, value) in counters {
            out.family(name, Counter, help).sample(&[], value);
        }
        client_conns::render(out, self.shards.iter().map(|s| &s.clients));
        events::render(out, self.shards.iter().map(|s| &s.events));
        mirrors::render(out, self.shards.iter().map(|s| &s.mirrors));
        trace::render(out);
        let mut family = out.family(
            "sluice_config_reloads_total",
            Counter,
            "Configuration reloads, by result (error: the configuration in use stayed).",
        );
        for (i, result) in ["success", "error"].iter().enumerate() {
            family.sample(&[("result", result)], self.reloads[i].load(Relaxed));
        }
        out.family(
            "sluice_discovery_failures_total",
            Counter,
            "Upstream host name resolutions that failed (the last answer stayed).",
        )
        .sample(&[], self.discovery_failures.load(Relaxed));
        out.family(
            "sluice_discovery_changes_total",
            Counter,
            "Resolutions that changed an upstream's addresses.",
        )
        .sample(&[], self.discovery_changes.load(Relaxed));
        let mut family = out.family(
            "sluice_pool_idle_connections",
            Gauge,
            "Idle keep-alive connections pooled, by upstream.",
        );
        for (u, upstream) in upstream_names.iter().enumerate() {
            let n = sum_i(&|s| s.upstream(u).map_or(0, |c| c.pool_idle.load(Relaxed)));
            family.sample(&[("upstream", upstream)], n);
        }
        let mut family = out.family(
            "sluice_upstream_open_connections",
            Gauge,
            "Connections open to upstream hosts (idle or busy), by upstream.",
        );
        for (u, upstream) in upstream_names.iter().enumerate() {
            let n = sum_i(&|s| s.upstream(u).map_or(0, |c| c.open.load(Relaxed)));
            family.sample(&[("upstream", upstream)], n);
        }
    }
}

impl Shard {
    /// `route`: `None` for requests that matched no route. `_routes`, the
    /// plan's route count, is no longer needed (the unmatched row is slot
    /// 0); the callers still pass it.
    pub(crate) fn request(&self, route: Option<RouteId>, status: u16, _routes: usize) {
        let row = route.map_or(0, RouteId::metric);
        let column = usize::from(status.clamp(100, 599) - 100);
        if let Some(row) = self.requests.get(row).and_then(OnceLock::get) {
            row[column].fetch_add(1, Relaxed);
        }
    }

    fn upstream(&self, slot: usize) -> Option<&UpstreamCells> {
        self.upstreams
            .get(slot)
            .and_then(|row| row.get())
            .map(|b| &**b)
    }

    pub(crate) fn upstream_latency(&self, upstream: UpstreamId, elapsed: Duration) {
        if let Some(cells) = self.upstream(upstream.metric()) {
            observe(&cells.latency, elapsed);
        }
    }

    pub(crate) fn upstream_error(&self, upstream: UpstreamId, kind: UpstreamError) {
        if let Some(cells) = self.upstream(upstream.metric()) {
            cells.errors[kind as usize].fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn refused(&self, reason: Refusal) {
        self.refused[reason as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn upgrade_removed(&self) {
        self.upgrades_removed.fetch_add(1, Relaxed);
    }

    pub(crate) fn overrides_removed(&self) {
        self.overrides_removed.fetch_add(1, Relaxed);
    }

    pub(crate) fn event(&self, event: Event) {
        self.events[event as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn mirrored(&self, result: Mirrored) {
        self.mirrors[result as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn pool_idle(&self, upstream: UpstreamId, delta: i64) {
        if let Some(cells) = self.upstream(upstream.metric()) {
            cells.pool_idle.fetch_add(delta, Relaxed);
        }
    }

    pub(crate) fn upstream_open(&self, upstream: UpstreamId, delta: i64) {
        if let Some(cells) = self.upstream(upstream.metric()) {
            cells.open.fetch_add(delta, Relaxed);
        }
    }
}

/// The slots of `names` in `all` (the labels by slot), adding the names
/// not there yet; fails past `capacity`.
fn slots(
    all: &mut Vec<String>,
    names: &[&str],
    capacity: usize,
    what: &str,
) -> anyhow::Result<Vec<usize>> {
    let mut given = vec![false; all.len()];
    let mut slots = Vec::with_capacity(names.len());
    for name in names {
        let found = all
            .iter()
            .enumerate()
            .position(|(slot, known)| known == name && !given[slot]);
        let slot = match found {
            Some(slot) => slot,
            None => {
                if all.len() == capacity {
                    anyhow::bail!(
                        "more than {capacity} distinct {what} since the process started; restart to count more"
                    );
                }
                all.push((*name).to_string());
                given.push(false);
                all.len() - 1
            }
        };
        given[slot] = true;
        slots.push(slot);
    }
    Ok(slots)
}
