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

use super::{Chain, Handler};
use crate::{
    config::{ChainRef, Config, HandlerSettings},
    telemetry::Exposition,
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

/// What a handler is built with, and what it says of its instance.
#[derive(Debug)]
pub(crate) struct Builder<'a> {
    pub context: &'a BuildContext<'a>,
    /// The name of the handler being built (`middleware.NAME`).
    pub name: String,
    /// When a reload may keep the instance built (set by its `build`).
    pub keep: Keep,
}

/// When a reload keeps an instance whose settings did not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Always (its buckets, slots, key cache and counters live on).
    Always,
    /// When the routes are the same too: it indexes its cells by route
    /// position (`metrics`, `access_log`).
    SameRoutes,
    /// Never: it reads a file that may have changed (`validate`'s spec).
    Never,
}

/// Each instance's figures under top-level `/stats.json` members:
/// section → instance name → figures.
pub(crate) type StatsSections = BTreeMap<&'static str, serde_json::Map<String, serde_json::Value>>;

/// `Build` for any handler's settings, by type.
macro_rules! build_by_type {
    ($($name:literal (mod $module:ident) => $settings:ident $(, $defaults:ident)?;)*) => {
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

/// The compiled chains: one per route, and every instance by name, for
/// the admin API (each renders its own metrics and figures) and the next
/// reload.
#[derive(Debug)]
pub(crate) struct Chains {
    pub by_route: Vec<Arc<Chain>>,
    /// Every instance built, by name, for the next reload to keep.
    instances: BTreeMap<String, Instance>,
    /// The routes' names, by position.
    route_names: Vec<String>,
    /// The routes' names and upstreams, as the route-indexed handlers saw them.
    routes_key: String,
}

/// A handler instance and what it was built from.
#[derive(Debug, Clone)]
struct Instance {
    /// Its settings, serialised.
    settings: String,
    handler: Arc<dyn Handler>,
    keep: Keep,
}

impl Chains {
    /// The handlers' own metrics, each instance's in turn (by name).
    pub(crate) fn render_metrics(&self, out: &mut Exposition) {
        for (name, instance) in &self.instances {
            instance.handler.render_metrics(name, out);
        }
    }

    /// For `/stats.json`: each route's figures by route name (from the
    /// handlers of its chain, first come first kept), and each instance's
    /// under its sections.
    pub(crate) fn stats(
        &self,
    ) -> (
        BTreeMap<&str, serde_json::Map<String, serde_json::Value>>,
        StatsSections,
    ) {
        let mut routes = BTreeMap::new();
        for (route, (chain, name)) in self.by_route.iter().zip(&self.route_names).enumerate() {
            let mut figures = serde_json::Map::new();
            for handler in &chain.handlers {
                handler.route_stats(route, &mut figures);
            }
            if !figures.is_empty() {
                routes.entry(name.as_str()).or_insert(figures);
            }
        }
        let mut sections = StatsSections::new();
        for (name, instance) in &self.instances {
            instance.handler.stats(name, &mut sections);
        }
        (routes, sections)
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
        keep: Keep::Always,
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
                    p.instances.get(name).filter(|i| match i.keep {
                        Keep::Always => true,
                        Keep::SameRoutes => p.routes_key == routes_key,
                        Keep::Never => false,
                    })
                })
                .filter(|i| i.settings == serialized)
                .cloned();
            let instance = match kept {
                Some(instance) => instance,
                None => {
                    builder.name = name.to_string();
                    builder.keep = Keep::Always;
                    let handler = settings
                        .build(&mut builder)
                        .with_context(|| format!("middleware.{name}"))?;
                    Instance {
                        settings: serialized,
                        handler,
                        keep: builder.keep,
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
        instances: built,
        route_names: context.route_names.to_vec(),
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
        // Each instance once, by name; the metrics handler renders its
        // family (with no traffic, its HELP and TYPE only).
        let names: Vec<&str> = chains.instances.keys().map(String::as_str).collect();
        assert_eq!(names, ["correlation", "cors", "limit", "metrics"]);
        let mut out = Exposition::new();
        chains.render_metrics(&mut out);
        let text = out.finish();
        assert!(
            text.starts_with("# HELP sluice_http_request_duration_seconds "),
            "{text}"
        );
        assert!(!text.contains("sluice_access_log_dropped_total"), "{text}");
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
        assert_eq!(same.instances["metrics"].keep, Keep::SameRoutes);
        assert_eq!(same.instances["limit"].keep, Keep::Always);
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
            keep: Keep::Always,
        };
        // Every type a chain may name bare builds from its defaults; the
        // ones a reload does not always keep say so (no list of types here:
        // adding a handler edits no test).
        let (mut built, mut not_always) = (0, Vec::new());
        for kind in crate::config::HANDLER_TYPES {
            if let Some(settings) = HandlerSettings::defaults(kind) {
                builder.keep = Keep::Always;
                settings.build(&mut builder).unwrap();
                built += 1;
                if builder.keep != Keep::Always {
                    not_always.push((*kind, builder.keep));
                }
            }
        }
        assert!(
            built >= 6,
            "correlation, metrics, access_log, cors, compress, grpc_web at least"
        );
        assert_eq!(
            not_always,
            [
                ("metrics", Keep::SameRoutes),
                ("access_log", Keep::SameRoutes)
            ]
        );
    }
}
