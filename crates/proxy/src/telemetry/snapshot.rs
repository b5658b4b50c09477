//! Reading the counters: histograms summed over shards (for `/metrics`
//! and JSON), and the proxy's counters as JSON for the admin
//! `/stats.json` (the dashboard's source, docs/DASHBOARD.md). Totals since start, never
//! rates: a reader takes the difference between two polls, so the proxy
//! keeps no history and two readers do not disturb each other.

use std::sync::atomic::Ordering::Relaxed;

use serde_json::{json, Map, Value};

use super::{
    client_conns::ClientCounter, events::Event, Family, HistogramCells, Labels, Metrics, Shard,
    BUCKETS, STATUSES,
};
use crate::wire::normalize::Refusal;

/// The upper bounds, in seconds, of every histogram's buckets (the last,
/// implicit one is +Inf).
pub(crate) fn bounds() -> &'static [f64] {
    &BUCKETS
}

/// One histogram summed over shards: observations per bucket (not
/// cumulative; one more than [`bounds`], for those above the last), the
/// sum in seconds and the count.
pub(crate) fn histogram<'a>(cells: impl Iterator<Item = &'a HistogramCells> + Clone) -> Value {
    let sum = |i: usize| cells.clone().map(|c| c[i].load(Relaxed)).sum::<u64>();
    let count = sum(BUCKETS.len() + 1);
    let mut buckets: Vec<u64> = (0..BUCKETS.len()).map(sum).collect();
    buckets.push(count.saturating_sub(buckets.iter().sum()));
    json!({
        "buckets": buckets,
        "sum_seconds": sum(BUCKETS.len()) as f64 / 1e6,
        "count": count,
    })
}

/// Writes one histogram series of `family`, summing `cells` over shards.
pub(crate) fn write_histogram<'a>(
    family: &mut Family<'_>,
    labels: &Labels<'_>,
    cells: impl Iterator<Item = &'a HistogramCells> + Clone,
) {
    let sum = |i: usize| cells.clone().map(|c| c[i].load(Relaxed)).sum::<u64>();
    family.histogram(
        labels,
        BUCKETS
            .iter()
            .enumerate()
            .map(|(b, &bound)| (bound, sum(b))),
        sum(BUCKETS.len()) as f64 / 1e6,
        sum(BUCKETS.len() + 1),
    );
}

impl Metrics {
    /// Requests by route and status class, errors by kind, connections,
    /// and each upstream's latency histogram and pool.
    pub(crate) fn snapshot(&self) -> Value {
        let (route_names, upstream_names) = match self.names.lock() {
            Ok(names) => (names.routes.clone(), names.upstreams.clone()),
            Err(_) => Default::default(),
        };
        let sum = |f: &dyn Fn(&Shard) -> u64| self.shards.iter().map(f).sum::<u64>();
        let sum_i = |f: &dyn Fn(&Shard) -> i64| self.shards.iter().map(f).sum::<i64>();

        let mut classes = [0u64; 5];
        let mut too_many = 0;
        let routes: Vec<Value> = route_names
            .iter()
            .enumerate()
            .map(|(route, name)| {
                let mut by_class = [0u64; 5];
                for status in 0..STATUSES {
                    let n = sum(&|s| {
                        s.requests[route]
                            .get()
                            .map_or(0, |row| row[status].load(Relaxed))
                    });
                    by_class[status / 100] += n;
                    if status + 100 == 429 {
                        too_many += n;
                    }
                }
                for (total, n) in classes.iter_mut().zip(by_class) {
                    *total += n;
                }
                json!({ "route": name, "requests": by_class.iter().sum::<u64>(), "by_class": class_map(by_class) })
            })
            .collect();

        let upstream_errors = ["connect", "broken", "timeout"];
        let upstreams: Map<String, Value> = upstream_names
            .iter()
            .enumerate()
            .map(|(u, name)| {
                let errors: Map<String, Value> = upstream_errors
                    .iter()
                    .enumerate()
                    .map(|(kind, label)| {
                        let n = sum(&|s| s.upstream(u).map_or(0, |c| c.errors[kind].load(Relaxed)));
                        ((*label).to_string(), n.into())
                    })
                    .collect();
                let latency = histogram(
                    self.shards
                        .iter()
                        .filter_map(|s| s.upstreams[u].get())
                        .map(|cells| &cells.latency),
                );
                let open = sum_i(&|s| s.upstream(u).map_or(0, |c| c.open.load(Relaxed)));
                let idle = sum_i(&|s| s.upstream(u).map_or(0, |c| c.pool_idle.load(Relaxed)));
                let value = json!({ "latency": latency, "errors": errors, "open_connections": open, "idle_connections": idle });
                (name.clone(), value)
            })
            .collect();

        let refused: Map<String, Value> = Refusal::ALL
            .iter()
            .enumerate()
            .map(|(i, r)| {
                (
                    r.label().to_string(),
                    sum(&|s| s.refused[i].load(Relaxed)).into(),
                )
            })
            .collect();
        let guard: Map<String, Value> = Event::ALL
            .iter()
            .map(|&e| {
                (
                    e.label().to_string(),
                    sum(&|s| s.events[e as usize].load(Relaxed)).into(),
                )
            })
            .collect();
        let open = self.open_connections();
        let parked = self.parked_connections();
        json!({
            "requests": {
                "total": classes.iter().sum::<u64>(),
                "by_class": class_map(classes),
                "too_many_requests": too_many,
            },
            "errors": {
                "upstream": upstream_errors.iter().map(|kind| {
                    let n: u64 = upstreams.values().map(|u| u["errors"][*kind].as_u64().unwrap_or(0)).sum();
                    ((*kind).to_string(), Value::from(n))
                }).collect::<Map<String, Value>>(),
                "refused": refused,
                "guard": guard,
                "tls_handshake": self.client_counter(ClientCounter::TlsHandshakeFailures),
                "h2_connection": self.client_counter(ClientCounter::H2ConnectionErrors),
            },
            "connections": {
                "client_open": open,
                "client_parked": parked,
                "client_active": open - parked,
                "h2_streams": self.client_counter(ClientCounter::H2Streams),
                "h3_connections": self.client_counter(ClientCounter::H3Connections),
                "h3_streams": self.client_counter(ClientCounter::H3Streams),
                "h3_connections_per_worker": self.per_worker(ClientCounter::H3Connections),
                "h3_streams_per_worker": self.per_worker(ClientCounter::H3Streams),
                "h3_datagrams_steered": self.client_counter(ClientCounter::H3DatagramsSteered),
            },
            "reloads": {
                "success": self.reloads[0].load(Relaxed),
                "error": self.reloads[1].load(Relaxed),
            },
            "routes": routes,
            "upstreams": upstreams,
        })
    }
}

fn class_map(counts: [u64; 5]) -> Value {
    json!({ "1xx": counts[0], "2xx": counts[1], "3xx": counts[2], "4xx": counts[3], "5xx": counts[4] })
}
