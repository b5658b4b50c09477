//! The configuration compiled for the hot path: the route table, each
//! route's upstream by index, resolved upstream addresses and the limits.
//! Built once before binding; shared read-only by every worker.

use std::{
    collections::HashMap,
    net::{SocketAddr, ToSocketAddrs},
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use http::HeaderValue;

use crate::{
    balance::Balancer,
    config::{Config, Runtime, Timeouts},
    middleware::{self, BuildContext, Chains},
    route::RouteTable,
};

/// One upstream: its hosts, balancer and settings.
#[derive(Debug)]
pub struct Upstream {
    pub name: String,
    /// Resolved once at start; the index is the host's id in the balancer and pool.
    pub hosts: Vec<SocketAddr>,
    /// `host:port` of each host as written (for logs).
    pub host_names: Vec<String>,
    pub balancer: Balancer,
    pub timeouts: Timeouts,
    pub retries: u32,
    pub max_idle: usize,
    pub idle_timeout: Duration,
    pub host_header: Option<HeaderValue>,
}

/// Everything a worker needs to serve requests.
#[derive(Debug)]
pub struct Gateway {
    pub routes: RouteTable,
    /// By route index (position in the file): the upstream's index.
    pub route_upstream: Vec<usize>,
    /// By route index: the route's path as configured (metrics label).
    pub route_names: Vec<String>,
    pub upstreams: Vec<Upstream>,
    pub limits: http1::Limits,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    pub trust_forwarded: bool,
    /// Worker threads.
    pub workers: usize,
    /// Runtimes (each with its own listeners, pool and metrics shard).
    pub runtimes: usize,
    /// Each route's middleware chain.
    pub(crate) chains: Chains,
    /// The origin of the balancers' nanosecond clock.
    epoch: Instant,
}

impl Gateway {
    /// Compiles a validated configuration; fails when an upstream host does
    /// not resolve or a handler cannot be built (a key file that cannot be read).
    pub fn new(config: &Config) -> anyhow::Result<Self> {
        let workers = config
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        if workers == 0 {
            bail!("workers must be at least 1");
        }
        let runtimes = match config.runtime {
            Runtime::PerCore => workers,
            Runtime::MultiThread => 1,
        };
        let mut index = HashMap::new();
        let mut upstreams = Vec::new();
        for (name, upstream) in &config.upstreams {
            index.insert(name.clone(), upstreams.len());
            let mut hosts = Vec::new();
            let mut host_names = Vec::new();
            for host in &upstream.hosts {
                let (addr, authority) = resolve(&host.value)
                    .with_context(|| format!("upstreams.{name}.hosts: `{}`", host.value))?;
                hosts.push(addr);
                host_names.push(authority);
            }
            let host_header = match &upstream.host_header {
                None => None,
                Some(value) => Some(HeaderValue::from_str(value).with_context(|| {
                    format!("upstreams.{name}.host_header: `{value}` is not a valid header value")
                })?),
            };
            upstreams.push(Upstream {
                name: name.clone(),
                balancer: Balancer::new(hosts.len(), &upstream.health),
                hosts,
                host_names,
                timeouts: upstream.timeouts.clone(),
                retries: upstream.retries,
                max_idle: upstream.pool.max_idle,
                idle_timeout: upstream.pool.idle_timeout,
                host_header,
            });
        }
        let route_upstream = config
            .routes
            .iter()
            .map(|route| index[&route.upstream.value])
            .collect();
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
            workers: runtimes,
        };
        let chains = middleware::build(config, &context)?;
        let limits = &config.limits;
        Ok(Self {
            routes: RouteTable::new(&config.routes),
            route_upstream,
            route_names,
            upstreams,
            limits: http1::Limits {
                max_head: usize::try_from(limits.max_header_bytes).unwrap_or(usize::MAX),
                max_body: usize::try_from(limits.max_body_bytes).unwrap_or(usize::MAX),
            },
            header_read_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_timeout,
            max_connections: limits.max_connections,
            trust_forwarded: config.forwarded.trust,
            workers,
            runtimes,
            chains,
            epoch: Instant::now(),
        })
    }

    /// Nanoseconds since start, the balancers' clock.
    pub fn clock(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// `http://HOST[:PORT]` to its first address and `HOST:PORT`.
fn resolve(url: &str) -> anyhow::Result<(SocketAddr, String)> {
    let uri: http::Uri = url.parse()?;
    let Some(host) = uri.host() else {
        bail!("no host");
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(80);
    let addr = (host, port)
        .to_socket_addrs()
        .context("cannot resolve the host")?
        .next()
        .context("the host resolves to no address")?;
    Ok((addr, format!("{}:{port}", uri.host().unwrap_or(host))))
}
