//! Layer 4: the plan, the configuration compiled for the hot path: the
//! route table, each route's upstream and middleware chain, the compiled
//! upstreams and the limits. Immutable; a request takes the current plan
//! once and uses it to its end.

pub(crate) mod routes;
mod swap;

pub(crate) use swap::{Plans, Snapshot, WorkerPlan};

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::{
    config::{Config, Paths},
    ids::{RouteId, UpstreamId},
    middleware::{self, BuildContext, Chain, Chains},
    upstream::Upstream,
    wire::normalize,
};
use routes::RouteTable;

/// The `http2` section, in the types the `h2` crate takes.
#[derive(Debug)]
pub struct Http2Settings {
    pub max_concurrent_streams: u32,
    pub max_header_list_bytes: u32,
    pub max_frame_bytes: u32,
    pub stream_window: u32,
    pub connection_window: u32,
    pub max_pending_accept_resets: usize,
    pub max_local_error_resets: usize,
}

/// One route as a request needs it.
#[derive(Debug)]
pub(crate) struct Route {
    /// The path as configured (the metrics label).
    pub name: String,
    pub upstream: UpstreamId,
    /// The protocols its requests may upgrade to (lower case).
    pub upgrades: Vec<String>,
    pub chain: Arc<Chain>,
}

/// Everything a request needs, compiled from one configuration.
#[derive(Debug)]
pub struct Plan {
    /// Finds a request's route.
    pub(crate) table: RouteTable,
    /// By [`RouteId`].
    routes: Vec<Route>,
    /// How request targets are normalised (`paths`).
    pub paths: Paths,
    /// By [`UpstreamId`].
    pub(crate) upstreams: Vec<Upstream>,
    pub http2: Http2Settings,
    pub limits: http1::Limits,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub trust_forwarded: bool,
    /// Every route's middleware, for the admin API's metrics.
    pub(crate) chains: Chains,
    /// The origin of the balancers' nanosecond clock.
    epoch: Instant,
}

impl Plan {
    /// Compiles a validated configuration; fails when an upstream host does
    /// not resolve or a handler cannot be built (a key file that cannot be read).
    /// `shards`: how many metrics shards the handlers that count keep
    /// (one per runtime).
    pub fn compile(config: &Config, shards: usize) -> anyhow::Result<Self> {
        let mut index = HashMap::new();
        let mut upstreams = Vec::new();
        for (name, upstream) in &config.upstreams {
            index.insert(name.clone(), upstreams.len());
            upstreams.push(Upstream::new(name, upstream)?);
        }
        for (i, route) in config.routes.iter().enumerate() {
            normalize::check_route(&route.path.value, route.host.as_deref(), &config.paths)
                .map_err(|message| anyhow::anyhow!("routes[{i}]: {message}"))?;
        }
        let route_names: Vec<String> = config
            .routes
            .iter()
            .map(|route| route.path.value.clone())
            .collect();
        let context = BuildContext {
            route_names: &route_names,
            route_upstreams: config
                .routes
                .iter()
                .map(|r| r.upstream.value.as_str())
                .collect(),
            workers: shards,
        };
        let chains = middleware::build(config, &context)?;
        let routes = config
            .routes
            .iter()
            .zip(&chains.by_route)
            .map(|(route, chain)| Route {
                name: route.path.value.clone(),
                upstream: UpstreamId::new(index[&route.upstream.value]),
                upgrades: route
                    .upgrades
                    .iter()
                    .map(|p| p.value.to_ascii_lowercase())
                    .collect(),
                chain: Arc::clone(chain),
            })
            .collect();
        let limits = &config.limits;
        let http2 = &config.http2;
        let as_u32 = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Ok(Self {
            table: RouteTable::new(&config.routes, config.paths.case),
            routes,
            paths: config.paths,
            upstreams,
            http2: Http2Settings {
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
            },
            limits: http1::Limits {
                max_head: usize::try_from(limits.max_header_bytes).unwrap_or(usize::MAX),
                max_body: usize::try_from(limits.max_body_bytes).unwrap_or(usize::MAX),
            },
            header_read_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_timeout,
            trust_forwarded: config.forwarded.trust,
            chains,
            epoch: Instant::now(),
        })
    }

    pub(crate) fn route_count(&self) -> usize {
        self.routes.len()
    }

    /// The routes' names, by [`RouteId`] (the metrics labels).
    pub(crate) fn route_names(&self) -> impl Iterator<Item = &str> {
        self.routes.iter().map(|r| r.name.as_str())
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
