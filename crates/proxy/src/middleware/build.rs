//! The handler registry: handler instances made from their settings, and
//! each route's chain. The list of handler types is
//! `config::for_each_handler` (config/middleware.rs); each handler's file
//! implements [`Build`] for its settings, and the dispatch below is made
//! from that list, so adding a handler touches no code here.
//!
//! A reload keeps a handler instance (its rate-limit buckets, concurrency
//! slots, JWKS cache, counters) when its name and settings did not change;
//! the handlers that count by route (`metrics`, `access_log`) also need
//! the same routes, since they index their cells by route position. A
//! `validate` handler is always built anew, so that an edited spec file
//! is read.

use std::{collections::BTreeMap, sync::Arc};

use anyhow::Context as _;

use super::{
    access_log::AccessLogger, metrics::MetricsRecorder, rate_limit_redis::StoreCounts,
    validate::RequestValidator, Chain, Handler,
};
use crate::{
    config::{ChainRef, Config, HandlerSettings},
    telemetry::{
        Exposition,
        MetricKind::{Counter, Gauge},
    },
};

/// Everything the handlers need from the rest of the configuration.
#[derive(Debug)]
pub(crate) struct BuildContext<'a> {
    pub route_names: &'a [String],
    /// Each route's upstream name.
    pub route_upstreams: Vec<&'a str>,
    /// Metrics shards (one per worker runtime).
    pub workers: usize,
    /// Built for `sluice proxy --check`: no file is created.
    pub check: bool,
}

/// A handler made from its settings; implemented in each handler's file
/// for its settings type.
pub(crate) trait Build {
    fn build(&self, builder: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>>;
}

/// What a handler is built with, and where the handlers that the admin
/// API reads (`/metrics`) are listed.
#[derive(Debug)]
pub(crate) struct Builder<'a> {
    pub context: &'a BuildContext<'a>,
    /// The name of the handler being built (`middleware.NAME`).
    pub name: String,
    pub metrics: Vec<Arc<MetricsRecorder>>,
    pub access_logs: Vec<Arc<AccessLogger>>,
    pub validators: Vec<Arc<RequestValidator>>,
}

/// `Build` for any handler's settings, by type.
macro_rules! build_by_type {
    ($($name:literal => $settings:ident $(, $defaults:ident)?;)*) => {
        impl Build for HandlerSettings {
            fn build(&self, builder: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
                match self {
                    $(Self::$settings(settings) => settings.build(builder),)*
                }
            }
        }
    };
}
crate::config::for_each_handler!(build_by_type);

/// The compiled chains: one per route, and what the admin API shows.
#[derive(Debug)]
pub(crate) struct Chains {
    pub by_route: Vec<Arc<Chain>>,
    pub metrics: Vec<Arc<MetricsRecorder>>,
    pub access_logs: Vec<Arc<AccessLogger>>,
    pub validators: Vec<Arc<RequestValidator>>,
    /// Every instance built, by name, for the next reload to keep.
    instances: BTreeMap<String, Instance>,
    /// The routes' names and upstreams, as the route-indexed handlers saw them.
    routes_key: String,
}

/// A handler instance and what it was built from.
#[derive(Debug, Clone)]
struct Instance {
    /// Its settings, serialised.
    settings: String,
    handler: Arc<dyn Handler>,
    /// It indexes cells by route position.
    by_route: bool,
    metrics: Option<Arc<MetricsRecorder>>,
    access_log: Option<Arc<AccessLogger>>,
    validator: Option<Arc<RequestValidator>>,
}

impl Chains {
    /// The handlers' own metrics.
    pub(crate) fn render_metrics(&self, out: &mut Exposition) {
        for metrics in &self.metrics {
            metrics.render(out);
        }
        if !self.validators.is_empty() {
            let failed: u64 = self.validators.iter().map(|v| v.response_failures()).sum();
            out.family(
                "sluice_validate_response_failures_total",
                Counter,
                "Upstream responses that did not match the API spec.",
            )
            .sample(&[], failed);
        }
        self.render_store_counts(out);
        self.render_authz_counts(out);
        let compressors: Vec<_> = self
            .instances
            .iter()
            .filter_map(|(name, i)| Some((name.as_str(), i.handler.compress_counts()?)))
            .collect();
        super::compress::render(&compressors, out);
        if !self.access_logs.is_empty() {
            let dropped: u64 = self.access_logs.iter().map(|log| log.dropped()).sum();
            out.family(
                "sluice_access_log_dropped_total",
                Counter,
                "Access log lines dropped because the writer fell behind.",
            )
            .sample(&[], dropped);
        }
    }

    /// For `/stats.json`: the request durations of each route whose chain
    /// has a `metrics` handler (from the first), and each Redis
    /// `rate_limit`'s counts.
    pub(crate) fn stats(&self) -> (BTreeMap<&str, serde_json::Value>, serde_json::Value) {
        let mut latency = BTreeMap::new();
        for (route, chain) in self.by_route.iter().enumerate() {
            let timed = self.metrics.iter().find(|m| {
                let m: *const MetricsRecorder = Arc::as_ptr(m);
                chain
                    .handlers
                    .iter()
                    .any(|h| std::ptr::addr_eq(Arc::as_ptr(h), m))
            });
            if let Some((name, histogram)) = timed.and_then(|m| m.route_latency(route)) {
                latency.entry(name).or_insert(histogram);
            }
        }
        let stores: serde_json::Map<String, serde_json::Value> = self
            .instances
            .iter()
            .filter_map(|(name, i)| Some((name.clone(), i.handler.store_counts()?)))
            .map(|(name, c)| {
                let counts = serde_json::json!({ "up": c.up, "allowed": c.allowed, "limited": c.limited, "errors": c.errors, "fallbacks": c.fallbacks });
                (name, counts)
            })
            .collect();
        (latency, stores.into())
    }

    /// The `rate_limit` handlers on Redis: whether Redis answers, what it
    /// decided, and what `on_failure` decided for it.
    fn render_store_counts(&self, out: &mut Exposition) {
        let stores: Vec<_> = self
            .instances
            .iter()
            .filter_map(|(name, i)| Some((name.as_str(), i.handler.store_counts()?)))
            .collect();
        if stores.is_empty() {
            return;
        }
        let mut family = out.family(
            "sluice_rate_limit_store_up",
            Gauge,
            "Whether the rate limit's Redis answers (1) or not (0).",
        );
        for (name, counts) in &stores {
            family.sample(&[("middleware", name)], u8::from(counts.up));
        }
        let mut family = out.family(
            "sluice_rate_limit_store_decisions_total",
            Counter,
            "Decisions Redis made, by result.",
        );
        for (name, counts) in &stores {
            family.sample(
                &[("middleware", name), ("result", "allowed")],
                counts.allowed,
            );
            family.sample(
                &[("middleware", name), ("result", "limited")],
                counts.limited,
            );
        }
        let families = [
            (
                "sluice_rate_limit_store_errors_total",
                "Calls to Redis that failed or ran past redis.timeout.",
                (|c| c.errors) as fn(&StoreCounts) -> u64,
            ),
            (
                "sluice_rate_limit_store_fallbacks_total",
                "Requests decided by on_failure because Redis gave no decision.",
                |c| c.fallbacks,
            ),
        ];
        for (metric, help, count) in families {
            let mut family = out.family(metric, Counter, help);
            for (name, counts) in &stores {
                family.sample(&[("middleware", name)], count(counts));
            }
        }
    }
}

impl Chains {
    /// The `ext_authz` handlers' decisions, by result.
    fn render_authz_counts(&self, out: &mut Exposition) {
        let authz: Vec<_> = self
            .instances
            .iter()
            .filter_map(|(name, i)| Some((name.as_str(), i.handler.authz_counts()?)))
            .collect();
        if authz.is_empty() {
            return;
        }
        let mut family = out.family(
            "sluice_ext_authz_decisions_total",
            Counter,
            "Requests an ext_authz handler decided, by result (cached: an allow answer remembered; failed: no decision, on_failure decided).",
        );
        for (name, counts) in &authz {
            for (result, count) in [
                ("allowed", &counts.allowed),
                ("denied", &counts.denied),
                ("cached", &counts.cache_hits),
                ("failed", &counts.fallbacks),
            ] {
                family.sample(
                    &[("middleware", name), ("result", result)],
                    count.load(std::sync::atomic::Ordering::Relaxed),
                );
            }
        }
    }
}

/// Builds every handler instance a route uses (once, shared by the routes
/// naming it) and each route's chain; an instance of `previous` (the
/// plan in use) is kept when its settings did not change.
pub(crate) fn build(
    config: &Config,
    context: &BuildContext<'_>,
    previous: Option<&Chains>,
) -> anyhow::Result<Chains> {
    let mut builder = Builder {
        context,
        name: String::new(),
        metrics: Vec::new(),
        access_logs: Vec::new(),
        validators: Vec::new(),
    };
    let routes_key = format!("{:?} {:?}", context.route_names, context.route_upstreams);
    let mut built: BTreeMap<String, Instance> = BTreeMap::new();
    let mut instances: BTreeMap<&str, Arc<dyn Handler>> = BTreeMap::new();
    let mut by_route = Vec::new();
    for route in &config.routes {
        let names: Vec<&str> = match route.chain.as_ref().map(|c| &c.value) {
            None => Vec::new(),
            Some(ChainRef::List(names)) => names.iter().map(String::as_str).collect(),
            Some(ChainRef::Named(name)) => config
                .chains
                .get(name)
                .with_context(|| format!("no chain named `{name}`"))?
                .iter()
                .map(|n| n.value.as_str())
                .collect(),
        };
        let mut handlers = Vec::new();
        let handler_names = names.iter().map(|&n| Arc::from(n)).collect();
        for name in names {
            if let Some(handler) = instances.get(name) {
                handlers.push(Arc::clone(handler));
                continue;
            }
            let defaults;
            let settings = match config.middleware.0.get(name) {
                Some(settings) => settings,
                None => {
                    defaults = HandlerSettings::defaults(name)
                        .with_context(|| format!("no middleware named `{name}`"))?;
                    &defaults
                }
            };
            let serialized = serde_json::to_string(settings).unwrap_or_default();
            let kept = previous
                .and_then(|p| {
                    p.instances
                        .get(name)
                        .filter(|i| !i.by_route || p.routes_key == routes_key)
                })
                // A validator is built anew: its spec file may have changed.
                .filter(|i| i.settings == serialized && i.validator.is_none())
                .cloned();
            let instance = match kept {
                Some(instance) => {
                    builder.metrics.extend(instance.metrics.clone());
                    builder.access_logs.extend(instance.access_log.clone());
                    builder.validators.extend(instance.validator.clone());
                    instance
                }
                None => {
                    let counted = (builder.metrics.len(), builder.access_logs.len());
                    let validators = builder.validators.len();
                    builder.name = name.to_string();
                    let handler = settings
                        .build(&mut builder)
                        .with_context(|| format!("middleware.{name}"))?;
                    let metrics = builder.metrics.get(counted.0).cloned();
                    let access_log = builder.access_logs.get(counted.1).cloned();
                    Instance {
                        settings: serialized,
                        handler,
                        by_route: metrics.is_some() || access_log.is_some(),
                        metrics,
                        access_log,
                        validator: builder.validators.get(validators).cloned(),
                    }
                }
            };
            instances.insert(name, Arc::clone(&instance.handler));
            handlers.push(Arc::clone(&instance.handler));
            built.insert(name.to_string(), instance);
        }
        by_route.push(Arc::new(Chain {
            handlers,
            names: handler_names,
        }));
    }
    Ok(Chains {
        by_route,
        metrics: builder.metrics,
        access_logs: builder.access_logs,
        validators: builder.validators,
        instances: built,
        routes_key,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const CONFIG: &str = "\
listeners: [{ address: 127.0.0.1:0 }]
upstreams:
  a: { hosts: [\"http://127.0.0.1:1\"] }
middleware:
  limit: { rate_limit: { rate: 10/s } }
chains:
  edge: [correlation, metrics, limit]
routes:
  - { path: /a, chain: edge, upstream: a }
  - { path: /b, chain: [limit, cors], upstream: a }
  - { path: /c, upstream: a }
";

    #[test]
    fn chains_share_instances_and_types_without_settings_get_defaults() {
        let config = crate::config::parse(CONFIG, Path::new("t.yaml"), |_| None).unwrap();
        let names = ["/a".to_string(), "/b".into(), "/c".into()];
        let context = BuildContext {
            route_names: &names,
            route_upstreams: vec!["a"; 3],
            workers: 2,
            check: false,
        };
        let chains = build(&config, &context, None).unwrap();
        let lengths: Vec<usize> = chains.by_route.iter().map(|c| c.handlers.len()).collect();
        assert_eq!(lengths, [3, 2, 0]);
        // `limit` is one instance: the two routes count against one rate.
        assert!(Arc::ptr_eq(
            &chains.by_route[0].handlers[2],
            &chains.by_route[1].handlers[0]
        ));
        // The admin API finds the metrics handler it renders.
        assert_eq!(chains.metrics.len(), 1);
        assert!(chains.access_logs.is_empty() && chains.validators.is_empty());
    }

    #[test]
    fn a_rebuild_keeps_the_instances_whose_settings_did_not_change() {
        let config = crate::config::parse(CONFIG, Path::new("t.yaml"), |_| None).unwrap();
        let names = ["/a".to_string(), "/b".into(), "/c".into()];
        let context = BuildContext {
            route_names: &names,
            route_upstreams: vec!["a"; 3],
            workers: 1,
            check: false,
        };
        let first = build(&config, &context, None).unwrap();
        let same = build(&config, &context, Some(&first)).unwrap();
        for (a, b) in first.by_route.iter().zip(&same.by_route) {
            for (x, y) in a.handlers.iter().zip(&b.handlers) {
                assert!(Arc::ptr_eq(x, y), "same settings, same instance");
            }
        }
        assert_eq!(same.metrics.len(), 1);
        let changed_text = CONFIG.replace("rate: 10/s", "rate: 20/s");
        let changed = crate::config::parse(&changed_text, Path::new("t.yaml"), |_| None).unwrap();
        let next = build(&changed, &context, Some(&same)).unwrap();
        assert!(!Arc::ptr_eq(
            &same.by_route[1].handlers[0],
            &next.by_route[1].handlers[0]
        ));
        assert!(Arc::ptr_eq(
            &same.by_route[1].handlers[1],
            &next.by_route[1].handlers[1]
        ));
        // Other routes: the route-indexed `metrics` is built anew, the rest kept.
        let fewer = ["/a".to_string(), "/b".into(), "/d".into()];
        let context = BuildContext {
            route_names: &fewer,
            ..context
        };
        let moved = build(&config, &context, Some(&same)).unwrap();
        assert!(!Arc::ptr_eq(
            &same.by_route[0].handlers[1],
            &moved.by_route[0].handlers[1]
        ));
        assert!(Arc::ptr_eq(
            &same.by_route[0].handlers[0],
            &moved.by_route[0].handlers[0]
        ));
    }

    #[test]
    fn every_type_with_defaults_builds_from_them() {
        let names = ["/".to_string()];
        let context = BuildContext {
            route_names: &names,
            route_upstreams: vec!["a"],
            workers: 1,
            check: false,
        };
        let mut builder = Builder {
            context: &context,
            name: String::new(),
            metrics: Vec::new(),
            access_logs: Vec::new(),
            validators: Vec::new(),
        };
        let mut built = 0;
        for kind in crate::config::HANDLER_TYPES {
            if let Some(settings) = HandlerSettings::defaults(kind) {
                settings.build(&mut builder).unwrap();
                built += 1;
            }
        }
        assert_eq!(
            built, 6,
            "correlation, metrics, access_log, cors, compress, grpc_web"
        );
        assert_eq!((builder.metrics.len(), builder.access_logs.len()), (1, 1));
    }
}
