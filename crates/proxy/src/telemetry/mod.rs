//! Proxy metrics, rendered as Prometheus text on the admin listener.
//!
//! Each worker writes only its own shard (plain relaxed atomics, no lock,
//! no shared cache line between cores); a scrape sums the shards. Labels
//! are known when the configuration is compiled (routes, upstreams, status
//! codes 100-599), so a request touches pre-indexed counters instead of the
//! hashed label families of prometheus-client, which take a lock per update.

use std::{
    fmt::Write as _,
    sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed},
    time::Duration,
};

use crate::{
    ids::{RouteId, UpstreamId},
    wire::normalize::Refusal,
};

/// Upper bounds of the upstream latency buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Status codes 100..=599; anything else is counted as 599.
const STATUSES: usize = 500;

/// All metrics of one proxy: one shard per worker.
#[derive(Debug)]
pub(crate) struct Metrics {
    shards: Vec<Shard>,
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

/// Writes one histogram series, summing `cells` over shards; `labels` is
/// `name="value",...` (already escaped).
pub(crate) fn write_histogram<'a>(
    out: &mut String,
    metric: &str,
    labels: &str,
    cells: impl Iterator<Item = &'a HistogramCells> + Clone,
) {
    let sum = |i: usize| cells.clone().map(|c| c[i].load(Relaxed)).sum::<u64>();
    let mut cumulative = 0;
    for (b, bound) in BUCKETS.iter().enumerate() {
        cumulative += sum(b);
        let _ = writeln!(
            out,
            "{metric}_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
        );
    }
    let count = sum(BUCKETS.len() + 1);
    let _ = writeln!(
        out,
        "{metric}_bucket{{{labels},le=\"+Inf\"}} {count}\n{metric}_sum{{{labels}}} {}\n{metric}_count{{{labels}}} {count}",
        sum(BUCKETS.len()) as f64 / 1e6
    );
}

/// What one worker counts.
#[derive(Debug)]
pub(crate) struct Shard {
    /// Route index × status code − 100; one extra row for requests that matched no route.
    requests: Vec<AtomicU64>,
    /// Per upstream: bucket counts, then the sum in microseconds and the count.
    latency: Vec<HistogramCells>,
    open_connections: AtomicI64,
    tls_handshake_failures: AtomicU64,
    /// HTTP/2 client streams accepted, and client connections ended by GOAWAY for a protocol error.
    h2_streams: AtomicU64,
    h2_connection_errors: AtomicU64,
    /// Per upstream: idle pooled connections, and connections to it open.
    pool_idle: Vec<AtomicI64>,
    upstream_open: Vec<AtomicI64>,
    upstream_errors: Vec<[AtomicU64; 3]>,
    /// Requests refused by normalisation, by [`Refusal`] (in `Refusal::ALL` order).
    refused: [AtomicU64; Refusal::ALL.len()],
    /// Upgrade offers removed from requests (h2c, or not listed on the route).
    upgrades_removed: AtomicU64,
}

/// Why an upstream exchange failed, for `sluice_upstream_errors_total`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum UpstreamError {
    Connect = 0,
    Broken = 1,
    Timeout = 2,
}

impl Metrics {
    /// Counters for `routes` routes (and one row for requests that
    /// matched none) and `upstreams` upstreams, in `workers` shards.
    pub(crate) fn new(routes: usize, upstreams: usize, workers: usize) -> Self {
        let routes = routes + 1;
        let shards = (0..workers)
            .map(|_| Shard {
                requests: (0..routes * STATUSES).map(|_| AtomicU64::new(0)).collect(),
                latency: (0..upstreams).map(|_| Default::default()).collect(),
                open_connections: AtomicI64::new(0),
                tls_handshake_failures: AtomicU64::new(0),
                h2_streams: AtomicU64::new(0),
                h2_connection_errors: AtomicU64::new(0),
                pool_idle: (0..upstreams).map(|_| AtomicI64::new(0)).collect(),
                upstream_open: (0..upstreams).map(|_| AtomicI64::new(0)).collect(),
                upstream_errors: (0..upstreams).map(|_| Default::default()).collect(),
                refused: Default::default(),
                upgrades_removed: AtomicU64::new(0),
            })
            .collect();
        Self { shards }
    }

    pub(crate) fn shard(&self, worker: usize) -> &Shard {
        &self.shards[worker % self.shards.len()]
    }

    /// Connections open to clients, summed over workers.
    pub(crate) fn open_connections(&self) -> i64 {
        self.shards
            .iter()
            .map(|s| s.open_connections.load(Relaxed))
            .sum()
    }

    /// The Prometheus text exposition, with the routes' and upstreams'
    /// names for labels (in the order their counters were made).
    pub(crate) fn render(&self, route_names: &[&str], upstream_names: &[&str]) -> String {
        let mut out = String::with_capacity(4096);
        let sum = |f: &dyn Fn(&Shard) -> u64| self.shards.iter().map(f).sum::<u64>();
        let sum_i = |f: &dyn Fn(&Shard) -> i64| self.shards.iter().map(f).sum::<i64>();

        out.push_str("# HELP sluice_requests_total Requests answered, by route and status.\n# TYPE sluice_requests_total counter\n");
        let routes = route_names.len() + 1;
        for route in 0..routes {
            let label = route_names.get(route).copied().unwrap_or("none");
            for status in 0..STATUSES {
                let n = sum(&|s| s.requests[route * STATUSES + status].load(Relaxed));
                if n > 0 {
                    let _ = writeln!(
                        out,
                        "sluice_requests_total{{route=\"{}\",status=\"{}\"}} {n}",
                        escape(label),
                        status + 100
                    );
                }
            }
        }

        out.push_str("# HELP sluice_upstream_response_seconds Time from sending a request upstream to its response head.\n# TYPE sluice_upstream_response_seconds histogram\n");
        for (u, upstream) in upstream_names.iter().enumerate() {
            write_histogram(
                &mut out,
                "sluice_upstream_response_seconds",
                &format!("upstream=\"{}\"", escape(upstream)),
                self.shards.iter().map(|s| &s.latency[u]),
            );
        }

        out.push_str("# HELP sluice_upstream_errors_total Failed upstream exchanges, by kind.\n# TYPE sluice_upstream_errors_total counter\n");
        for (u, upstream) in upstream_names.iter().enumerate() {
            for (kind, label) in ["connect", "broken", "timeout"].iter().enumerate() {
                let n = sum(&|s| s.upstream_errors[u][kind].load(Relaxed));
                let _ = writeln!(
                    out,
                    "sluice_upstream_errors_total{{upstream=\"{}\",kind=\"{label}\"}} {n}",
                    escape(upstream)
                );
            }
        }

        out.push_str("# HELP sluice_requests_refused_total Requests refused (400) before routing, by reason (docs/CONFIG.md, Request normalisation).\n# TYPE sluice_requests_refused_total counter\n");
        for (i, reason) in Refusal::ALL.iter().enumerate() {
            let n = sum(&|s| s.refused[i].load(Relaxed));
            let _ = writeln!(
                out,
                "sluice_requests_refused_total{{reason=\"{}\"}} {n}",
                reason.label()
            );
        }
        let _ = writeln!(
            out,
            "# HELP sluice_upgrades_removed_total Upgrade offers removed from requests (h2c, or a protocol the route does not list).\n# TYPE sluice_upgrades_removed_total counter\nsluice_upgrades_removed_total {}",
            sum(&|s| s.upgrades_removed.load(Relaxed))
        );
        let _ = writeln!(
            out,
            "# HELP sluice_open_connections Client connections open.\n# TYPE sluice_open_connections gauge\nsluice_open_connections {}",
            self.open_connections()
        );
        let _ = writeln!(
            out,
            "# HELP sluice_tls_handshake_failures_total Client TLS handshakes that failed or timed out.\n# TYPE sluice_tls_handshake_failures_total counter\nsluice_tls_handshake_failures_total {}",
            sum(&|s| s.tls_handshake_failures.load(Relaxed))
        );
        let _ = writeln!(
            out,
            "# HELP sluice_h2_streams_total HTTP/2 streams accepted from clients.\n# TYPE sluice_h2_streams_total counter\nsluice_h2_streams_total {}",
            sum(&|s| s.h2_streams.load(Relaxed))
        );
        let _ = writeln!(
            out,
            "# HELP sluice_h2_connection_errors_total HTTP/2 client connections closed for a protocol error or flood (GOAWAY).\n# TYPE sluice_h2_connection_errors_total counter\nsluice_h2_connection_errors_total {}",
            sum(&|s| s.h2_connection_errors.load(Relaxed))
        );
        out.push_str("# HELP sluice_pool_idle_connections Idle keep-alive connections pooled, by upstream.\n# TYPE sluice_pool_idle_connections gauge\n");
        for (u, upstream) in upstream_names.iter().enumerate() {
            let n = sum_i(&|s| s.pool_idle[u].load(Relaxed));
            let _ = writeln!(
                out,
                "sluice_pool_idle_connections{{upstream=\"{}\"}} {n}",
                escape(upstream)
            );
        }
        out.push_str("# HELP sluice_upstream_open_connections Connections open to upstream hosts (idle or busy), by upstream.\n# TYPE sluice_upstream_open_connections gauge\n");
        for (u, upstream) in upstream_names.iter().enumerate() {
            let n = sum_i(&|s| s.upstream_open[u].load(Relaxed));
            let _ = writeln!(
                out,
                "sluice_upstream_open_connections{{upstream=\"{}\"}} {n}",
                escape(upstream)
            );
        }
        out
    }
}

impl Shard {
    /// `route`: `None` for requests that matched no route.
    pub(crate) fn request(&self, route: Option<RouteId>, status: u16, routes: usize) {
        let row = route.map_or(routes, RouteId::index);
        let column = usize::from(status.clamp(100, 599) - 100);
        if let Some(counter) = self.requests.get(row * STATUSES + column) {
            counter.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn upstream_latency(&self, upstream: UpstreamId, elapsed: Duration) {
        observe(&self.latency[upstream.index()], elapsed);
    }

    pub(crate) fn upstream_error(&self, upstream: UpstreamId, kind: UpstreamError) {
        self.upstream_errors[upstream.index()][kind as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn refused(&self, reason: Refusal) {
        self.refused[reason as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn upgrade_removed(&self) {
        self.upgrades_removed.fetch_add(1, Relaxed);
    }

    pub(crate) fn connection_opened(&self) {
        self.open_connections.fetch_add(1, Relaxed);
    }

    pub(crate) fn connection_closed(&self) {
        self.open_connections.fetch_sub(1, Relaxed);
    }

    pub(crate) fn tls_handshake_failed(&self) {
        self.tls_handshake_failures.fetch_add(1, Relaxed);
    }

    pub(crate) fn h2_stream(&self) {
        self.h2_streams.fetch_add(1, Relaxed);
    }

    pub(crate) fn h2_connection_error(&self) {
        self.h2_connection_errors.fetch_add(1, Relaxed);
    }

    pub(crate) fn pool_idle(&self, upstream: UpstreamId, delta: i64) {
        self.pool_idle[upstream.index()].fetch_add(delta, Relaxed);
    }

    pub(crate) fn upstream_open(&self, upstream: UpstreamId, delta: i64) {
        self.upstream_open[upstream.index()].fetch_add(delta, Relaxed);
    }
}

/// A label value with `\`, `"` and newlines escaped.
pub(crate) fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
