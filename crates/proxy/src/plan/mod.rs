//! Layer 4: the plan, the configuration compiled for the hot path: the
//! route table, each route's upstream and middleware chain, the compiled
//! upstreams and the limits. Immutable; a request takes the current plan
//! once and uses it to its end.

mod filters;
pub(crate) mod route;
pub(crate) mod routes;
mod swap;

pub(crate) use route::{Route, RoutePolicy};
pub(crate) use swap::{Plans, Snapshot, WorkerPlan};

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::{
    config::{Config, PathMatch, PathRewriteSettings, PathSettings, RouteSettings},
    ids::{RouteId, UpstreamId},
    middleware::{self, BuildContext, Chains},
    telemetry::{trace::Tracer, Metrics, Shard},
    upstream::{
        discovery::{self, Answers},
        Upstream,
    },
    wire::normalize,
};
use routes::RouteTable;

/// The `http2` section, in the types the `h2` crate takes.
#[derive(Debug)]
pub struct Http2Limits {
    pub max_concurrent_streams: u32,
    pub max_header_list_bytes: u32,
    pub max_frame_bytes: u32,
    pub stream_window: u32,
    pub connection_window: u32,
    pub max_pending_accept_resets: usize,
    pub max_local_error_resets: usize,
    pub max_premature_resets: u32,
    pub premature_reset_window: Duration,
    pub huffman: bool,
}

/// Everything a request needs, compiled from one configuration.
#[derive(Debug)]
pub struct Plan {
    /// Finds a request's route.
    pub(crate) table: RouteTable,
    /// By [`RouteId`].
    routes: Vec<Route>,
    /// How request targets are normalised (`paths`).
    pub paths: PathSettings,
    /// By [`UpstreamId`].
    pub(crate) upstreams: Vec<Upstream>,
    /// Each upstream's id, with its metrics slot.
    upstream_ids: Vec<UpstreamId>,
    pub http2: Http2Limits,
    pub limits: http1::Limits,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    /// A client that takes no response bytes for this long is dropped.
    pub send_timeout: Duration,
    pub trust_forwarded: bool,
    /// An upstream wants PROXY protocol headers: each client connection
    /// keeps the address it connected to for them (`server/listener.rs`).
    pub sends_proxy_protocol: bool,
    /// Every route's middleware, for the admin API's metrics.
    pub(crate) chains: Chains,
    /// The origin of the balancers' nanosecond clock.
    epoch: Instant,
    /// `traces:`, when on: the sampler and the exporter's queue.
    pub(crate) tracer: Option<Arc<Tracer>>,
}

/// What a plan is compiled with besides its configuration.
#[derive(Debug)]
pub(crate) struct Compile<'a> {
    /// Metrics shards and pools per host: one per worker runtime.
    pub shards: usize,
    /// Where routes and upstreams get their metrics slots.
    pub metrics: &'a Metrics,
    /// The addresses of the hosts given by name.
    pub answers: &'a Answers,
    /// The plan in use, if any: the hosts that stay keep its pools and
    /// health, the handlers whose settings did not change are kept, and
    /// the balancers' clock goes on.
    pub previous: Option<&'a Plan>,
    /// For `sluice proxy --check`: handlers create no file.
    pub check: bool,
}

impl Plan {
    /// Compiles a validated configuration on its own (for `--check` and
    /// tests): resolves the host names; fails when one does not resolve or
    /// a handler cannot be built (a key file that cannot be read). It
    /// creates no file (an access log's is opened only if it exists).
    /// `shards`: how many metrics shards the handlers that count keep
    /// (one per runtime).
    pub fn compile(config: &Config, shards: usize) -> anyhow::Result<Self> {
        let answers = discovery::resolve_blocking(config, &Answers::new())?;
        Self::compile_with(
            config,
            &Compile {
                shards,
                metrics: &Metrics::new(shards),
                answers: &answers,
                previous: None,
                check: true,
            },
        )
    }

    /// Compiles a validated configuration with `with`.
    pub(crate) fn compile_with(config: &Config, with: &Compile<'_>) -> anyhow::Result<Self> {
        let names: Vec<&str> = config.upstreams.keys().map(String::as_str).collect();
        let slots = with.metrics.upstream_slots(&names)?;
        let mut index = HashMap::new();
        let mut upstreams = Vec::new();
        let mut upstream_ids = Vec::new();
        for ((name, settings), slot) in config.upstreams.iter().zip(slots) {
            index.insert(name.clone(), upstreams.len());
            upstream_ids.push(UpstreamId::counted(upstreams.len(), slot));
            let mut upstream = Upstream::new(name, settings, with.answers, with.shards)?;
            // A new upstream's hosts are all new: none ramps against
            // another, so none is held back.
            if let Some(previous) = with.previous {
                if let Some(old) = previous.upstream_named(name) {
                    upstream.carry_over(old, previous.clock());
                }
            }
            upstreams.push(upstream);
        }
        for (i, route) in config.routes.iter().enumerate() {
            check_route(route, &config.paths)
                .map_err(|message| anyhow::anyhow!("routes[{i}]: {message}"))?;
        }
        let route_names: Vec<String> = config
            .routes
            .iter()
            .map(|route| route.name().to_string())
            .collect();
        let names: Vec<&str> = route_names.iter().map(String::as_str).collect();
        let route_ids: Vec<RouteId> = with
            .metrics
            .route_slots(&names)?
            .into_iter()
            .enumerate()
            .map(|(index, slot)| RouteId::counted(index, slot))
            .collect();
        let context = BuildContext {
            route_names: &route_names,
            route_upstreams: config
                .routes
                .iter()
                .map(|r| r.upstream_names().next().map_or("", |n| n.value.as_str()))
                .collect(),
            workers: with.shards,
            check: with.check,
        };
        let chains = middleware::build(config, &context, with.previous.map(|p| &p.chains))?;
        let upstream_id = |name: &str| index.get(name).map(|&i| upstream_ids[i]);
        let routes = config
            .routes
            .iter()
            .zip(&chains.by_route)
            .enumerate()
            .map(|(i, (route, chain))| {
                Route::compile(route, chain, upstream_id)
                    .map_err(|err| anyhow::anyhow!("routes[{i}]: {err:#}"))
            })
            .collect::<anyhow::Result<_>>()?;
        let tracer = tracer(config, with.previous)?;
        let limits = &config.limits;
        let http2 = &config.http2;
        let as_u32 = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Ok(Self {
            table: RouteTable::with_ids(&config.routes, &route_ids, config.paths.case),
            routes,
            paths: config.paths,
            upstreams,
            upstream_ids,
            http2: Http2Limits {
                max_concurrent_streams: http2.max_concurrent_streams,
                max_header_list_bytes: as_u32(
                    http2
                        .max_header_list_bytes
                        .unwrap_or(limits.max_header_bytes),
                ),
                max_frame_bytes: as_u32(http2.max_frame_bytes),
                stream_window: as_u32(http2.stream_window),
                connection_window: as_u32(http2.connection_window),
                max_pending_accept_resets: http2.max_pending_accept_resets,
                max_local_error_resets: http2.max_local_error_resets,
                max_premature_resets: http2.max_premature_resets,
                premature_reset_window: http2.premature_reset_window,
                huffman: http2.huffman,
            },
            limits: http1::Limits {
                max_head: usize::try_from(limits.max_header_bytes).unwrap_or(usize::MAX),
                max_body: usize::try_from(limits.max_body_bytes).unwrap_or(usize::MAX),
            },
            header_read_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_timeout,
            send_timeout: limits.send_timeout,
            trust_forwarded: config.forwarded.trust,
            sends_proxy_protocol: config
                .upstreams
                .values()
                .any(|u| u.proxy_protocol.is_some()),
            chains,
            epoch: with.previous.map_or_else(Instant::now, |p| p.epoch),
            tracer,
        })
    }

    fn upstream_named(&self, name: &str) -> Option<&Upstream> {
        self.upstreams.iter().find(|u| u.name == name)
    }

    /// Retires the hosts of this plan (going out) that `next` did not
    /// keep, counting their closed connections in `shard(worker)`;
    /// returns how many.
    pub(crate) fn retire_dropped_hosts<'a>(
        &self,
        next: &Plan,
        shard: impl Fn(usize) -> &'a Shard + Copy,
    ) -> usize {
        self.upstreams
            .iter()
            .zip(&self.upstream_ids)
            .map(|(upstream, &id)| {
                upstream.retire_dropped(id, next.upstream_named(&upstream.name), shard)
            })
            .sum()
    }

    pub(crate) fn route_count(&self) -> usize {
        self.routes.len()
    }

    pub(crate) fn route(&self, id: RouteId) -> &Route {
        &self.routes[id.index()]
    }

    pub(crate) fn upstream(&self, id: UpstreamId) -> &Upstream {
        &self.upstreams[id.index()]
    }

    /// Nanoseconds since start, the balancers' clock.
    pub fn clock(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The tracer of `traces:`: the previous plan's when its settings did not
/// change (its exporter thread goes on), else a new one.
fn tracer(config: &Config, previous: Option<&Plan>) -> anyhow::Result<Option<Arc<Tracer>>> {
    let Some(traces) = &config.traces else {
        return Ok(None);
    };
    let settings = traces
        .settings(|name| std::env::var(name).ok())
        .map_err(|message| anyhow::anyhow!("traces: {message}"))?;
    let kept = previous
        .and_then(|p| p.tracer.as_ref())
        .filter(|t| t.settings == settings);
    Ok(Some(match kept {
        Some(tracer) => Arc::clone(tracer),
        None => Arc::new(Tracer::start(settings)?),
    }))
}

/// A route's paths and host names are in the normal form requests are
/// matched in (else no request could match them, and a rewrite could
/// send what normalisation refused).
fn check_route(route: &RouteSettings, paths: &PathSettings) -> Result<(), String> {
    if route.match_kind != PathMatch::Regex {
        normalize::check_route(&route.path.value, None, paths)?;
    }
    for host in route.host_names() {
        let name = host.strip_prefix("*.").unwrap_or(host);
        normalize::check_route("/", Some(name), paths)?;
    }
    let rewrites = route
        .rewrite
        .iter()
        .map(|r| (&r.value.hostname, &r.value.path, "rewrite"))
        .chain(
            route
                .redirect
                .iter()
                .map(|r| (&r.value.hostname, &r.value.path, "redirect")),
        );
    for (hostname, path, key) in rewrites {
        if let Some(name) = hostname {
            normalize::check_route("/", Some(name), paths)
                .map_err(|message| format!("{key}.hostname: {message}"))?;
        }
        let path = match path {
            Some(PathRewriteSettings::Full(path)) => path,
            Some(PathRewriteSettings::Prefix(path)) if !path.is_empty() => path,
            _ => continue,
        };
        let normal = match path.starts_with('/') {
            true => normalize::check_route(path, None, paths),
            false => Err(format!("`{path}` must start with `/`")),
        };
        normal.map_err(|message| format!("{key}.path: {message}"))?;
    }
    Ok(())
}
