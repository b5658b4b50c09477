//! `metrics`: a request duration histogram by route, method, status class
//! and upstream, on the admin `/metrics`. Cells are pre-indexed atomics in
//! one shard per worker, like the proxy's own metrics: a request takes no
//! lock and shares no cache line with another core.

use std::{sync::Arc, time::Instant};

use http::Method;

use super::{
    build::{Build, BuildContext, Builder, Keep},
    Exchange, Handler, Outcome,
};
use crate::config::MetricsSettings;
use crate::telemetry::{self, observe, write_histogram, Exposition, HistogramCells, MetricKind};

const METHODS: [&str; 8] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "other",
];
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];
/// Answered by the route's upstream, or by the proxy itself.
const SOURCES: usize = 2;
const PER_ROUTE: usize = METHODS.len() * CLASSES.len() * SOURCES;

#[derive(Debug)]
pub(crate) struct MetricsRecorder {
    /// `[worker][route][method][class][source]`, flattened per worker.
    shards: Vec<Vec<HistogramCells>>,
    routes: Vec<String>,
    /// Each route's upstream name.
    upstreams: Vec<String>,
}

impl Build for MetricsSettings {
    fn build(&self, builder: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        builder.keep = Keep::SameRoutes;
        Ok(Arc::new(MetricsRecorder::new(builder.context)))
    }
}

impl MetricsRecorder {
    fn new(context: &BuildContext<'_>) -> Self {
        let cells = context.route_names.len() * PER_ROUTE;
        Self {
            shards: (0..context.workers.max(1))
                .map(|_| (0..cells).map(|_| Default::default()).collect())
                .collect(),
            routes: context.route_names.to_vec(),
            upstreams: context
                .route_upstreams
                .iter()
                .map(|u| u.to_string())
                .collect(),
        }
    }

    /// Appends the Prometheus text of every series that has observations.
    fn render(&self, out: &mut Exposition) {
        let mut family = out.family("sluice_http_request_duration_seconds", MetricKind::Histogram, "Requests through the metrics handler, from the head read to the answer, by route, method, status class and upstream (empty: answered by the proxy).");
        for (r, route) in self.routes.iter().enumerate() {
            for (m, method) in METHODS.iter().enumerate() {
                for (c, class) in CLASSES.iter().enumerate() {
                    for source in 0..SOURCES {
                        let index = cell(r, m, c, source);
                        let count: u64 = self
                            .shards
                            .iter()
                            .map(|s| {
                                s[index][s[index].len() - 1]
                                    .load(std::sync::atomic::Ordering::Relaxed)
                            })
                            .sum();
                        if count == 0 {
                            continue;
                        }
                        let upstream = if source == 0 {
                            self.upstreams[r].as_str()
                        } else {
                            ""
                        };
                        let labels = [
                            ("route", route.as_str()),
                            ("method", method),
                            ("status", class),
                            ("upstream", upstream),
                        ];
                        write_histogram(
                            &mut family,
                            &labels,
                            self.shards.iter().map(|s| &s[index]),
                        );
                    }
                }
            }
        }
    }
}

impl MetricsRecorder {
    /// The request durations of the route at `route` (its position), over
    /// every method, status class and source (for `/stats.json`).
    fn route_latency(&self, route: usize) -> Option<serde_json::Value> {
        if route >= self.routes.len() {
            return None;
        }
        let block = route * PER_ROUTE..(route + 1) * PER_ROUTE;
        let cells = self
            .shards
            .iter()
            .flat_map(move |s| s[block.clone()].iter());
        Some(telemetry::histogram(cells))
    }
}

fn cell(route: usize, method: usize, class: usize, source: usize) -> usize {
    ((route * METHODS.len() + method) * CLASSES.len() + class) * SOURCES + source
}

fn method_index(method: &Method) -> usize {
    match *method {
        Method::GET => 0,
        Method::HEAD => 1,
        Method::POST => 2,
        Method::PUT => 3,
        Method::DELETE => 4,
        Method::PATCH => 5,
        Method::OPTIONS => 6,
        _ => 7,
    }
}

impl Handler for MetricsRecorder {
    fn render_metrics(&self, _name: &str, out: &mut Exposition) {
        self.render(out);
    }

    /// `latency`: the first `metrics` handler of a chain times its route.
    fn route_stats(&self, route: usize, figures: &mut serde_json::Map<String, serde_json::Value>) {
        if figures.contains_key("latency") {
            return;
        }
        if let Some(latency) = self.route_latency(route) {
            figures.insert("latency".into(), latency);
        }
    }

    fn done(&self, exchange: &mut Exchange, outcome: &Outcome) {
        let Some(started) = exchange.started else {
            return;
        };
        let class = usize::from(outcome.status.as_u16() / 100).clamp(1, 5) - 1;
        let source = usize::from(outcome.upstream.is_none());
        let index = cell(
            exchange.route.index(),
            method_index(&exchange.method),
            class,
            source,
        );
        let shard = &self.shards[exchange.worker % self.shards.len()];
        if let Some(cells) = shard.get(index) {
            observe(cells, Instant::now() - started);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::StatusCode;

    use super::*;
    use crate::ids::{RouteId, UpstreamId};

    fn recorder() -> MetricsRecorder {
        let routes = ["/a".to_string(), "/b".to_string()];
        MetricsRecorder::new(&BuildContext {
            route_names: &routes,
            route_upstreams: vec!["up_a", "up_b"],
            workers: 2,
            check: false,
        })
    }

    /// One exchange on `route` from `worker`, begun 20 ms ago.
    fn observe_one(
        metrics: &MetricsRecorder,
        route: usize,
        worker: usize,
        method: Method,
        status: u16,
        upstream: bool,
    ) {
        let mut exchange = Exchange {
            route: RouteId::new(route),
            worker,
            method,
            started: Instant::now().checked_sub(Duration::from_millis(20)),
            ..Exchange::default()
        };
        let outcome = Outcome {
            status: StatusCode::from_u16(status).unwrap(),
            upstream: upstream.then(|| UpstreamId::new(route)),
            body_bytes: 0,
        };
        metrics.done(&mut exchange, &outcome);
    }

    #[test]
    fn each_series_counts_its_route_method_class_and_source_over_the_workers() {
        let metrics = recorder();
        observe_one(&metrics, 1, 0, Method::POST, 201, true);
        observe_one(&metrics, 1, 1, Method::POST, 204, true);
        observe_one(
            &metrics,
            1,
            1,
            Method::from_bytes(b"PURGE").unwrap(),
            503,
            false,
        );
        observe_one(&metrics, 0, 0, Method::GET, 404, true);
        let mut out = Exposition::new();
        metrics.render_metrics("metrics", &mut out);
        let text = out.finish();
        for line in [
            "sluice_http_request_duration_seconds_count{route=\"/b\",method=\"POST\",status=\"2xx\",upstream=\"up_b\"} 2\n",
            "sluice_http_request_duration_seconds_count{route=\"/b\",method=\"other\",status=\"5xx\",upstream=\"\"} 1\n",
            "sluice_http_request_duration_seconds_count{route=\"/a\",method=\"GET\",status=\"4xx\",upstream=\"up_a\"} 1\n",
        ] {
            assert!(text.contains(line), "no {line} in\n{text}");
        }
        // Only series with observations are written.
        assert_eq!(text.matches("_count{").count(), 3, "{text}");
        let sum_line = text
            .lines()
            .find(|l| l.starts_with("sluice_http_request_duration_seconds_sum{route=\"/a\""))
            .unwrap();
        let sum: f64 = sum_line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(sum >= 0.02, "the 20 ms are counted: {sum_line}");
    }

    #[test]
    fn an_exchange_never_started_is_not_observed_and_latency_is_per_route() {
        let metrics = recorder();
        let mut exchange = Exchange::default();
        let outcome = Outcome {
            status: StatusCode::OK,
            upstream: None,
            body_bytes: 0,
        };
        metrics.done(&mut exchange, &outcome);
        observe_one(&metrics, 1, 0, Method::GET, 200, true);
        let (mut a, mut b) = (serde_json::Map::new(), serde_json::Map::new());
        metrics.route_stats(0, &mut a);
        metrics.route_stats(1, &mut b);
        assert_eq!(a["latency"]["count"], 0, "{a:?}");
        assert_eq!(b["latency"]["count"], 1, "{b:?}");
        // A figure an earlier handler of the chain wrote is kept.
        let mut kept = serde_json::Map::new();
        kept.insert("latency".into(), "first".into());
        metrics.route_stats(1, &mut kept);
        assert_eq!(kept["latency"], "first");
        // A position past the routes it was built for: nothing.
        let mut none = serde_json::Map::new();
        metrics.route_stats(2, &mut none);
        assert!(none.is_empty());
    }
}
