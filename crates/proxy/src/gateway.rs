//! The configuration compiled for the hot path: the route table, each
//! route's upstream by index, resolved upstream addresses and the limits.
//! Built once before binding; shared read-only by every worker.

use std::{
    collections::HashMap,
    net::{SocketAddr, ToSocketAddrs},
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use http::HeaderValue;
use tls::{rustls::pki_types::ServerName, tokio_rustls::TlsConnector};

use crate::{
    balance::Balancer,
    config::{Config, HttpVersion, Paths, Protocol, Runtime, Timeouts},
    listener::TlsListener,
    middleware::{self, BuildContext, Chains},
    normalize,
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
    pub protocol: Protocol,
    /// For `https://` hosts.
    pub tls: Option<UpstreamTls>,
}

/// How the proxy opens TLS to an upstream's hosts.
pub struct UpstreamTls {
    pub connector: TlsConnector,
    /// The SNI and certificate name for each host.
    pub server_names: Vec<ServerName<'static>>,
}

impl std::fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("server_names", &self.server_names)
            .finish_non_exhaustive()
    }
}

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

/// Everything a worker needs to serve requests.
#[derive(Debug)]
pub struct Gateway {
    pub routes: RouteTable,
    /// By route index (position in the file): the upstream's index.
    pub route_upstream: Vec<usize>,
    /// By route index: the route's path as configured (metrics label).
    pub route_names: Vec<String>,
    /// By route index: the protocols its requests may upgrade to (lower case).
    pub route_upgrades: Vec<Vec<String>>,
    /// How request targets are normalised (`paths`).
    pub paths: Paths,
    pub upstreams: Vec<Upstream>,
    /// By listener (configuration order): its TLS settings if it is a TLS
    /// listener, and the HTTP versions it serves.
    pub(crate) listeners: Vec<(Option<Arc<TlsListener>>, Vec<HttpVersion>)>,
    pub http2: Http2Settings,
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
            let mut server_names = Vec::new();
            for host in &upstream.hosts {
                let (addr, authority, server_name) = resolve(&host.value)
                    .with_context(|| format!("upstreams.{name}.hosts: `{}`", host.value))?;
                hosts.push(addr);
                host_names.push(authority);
                server_names.push(server_name);
            }
            let tls = upstream_tls(name, upstream, server_names)?;
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
                protocol: upstream.protocol,
                tls,
            });
        }
        for (i, route) in config.routes.iter().enumerate() {
            normalize::check_route(&route.path.value, route.host.as_deref(), &config.paths)
                .map_err(|message| anyhow::anyhow!("routes[{i}]: {message}"))?;
        }
        let route_upgrades = config
            .routes
            .iter()
            .map(|route| {
                route
                    .upgrades
                    .iter()
                    .map(|p| p.value.to_ascii_lowercase())
                    .collect()
            })
            .collect();
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
        let listeners = config
            .listeners
            .iter()
            .enumerate()
            .map(|(i, listener)| {
                let tls = listener
                    .tls
                    .as_ref()
                    .map(|tls| TlsListener::load(tls, &listener.protocols).map(Arc::new))
                    .transpose()
                    .with_context(|| format!("listeners[{i}].tls"))?;
                Ok((tls, listener.protocols.clone()))
            })
            .collect::<anyhow::Result<_>>()?;
        let http2 = &config.http2;
        let as_u32 = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Ok(Self {
            routes: RouteTable::new(&config.routes, config.paths.case),
            route_upstream,
            route_names,
            route_upgrades,
            paths: config.paths,
            upstreams,
            listeners,
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

/// The connector for an upstream's `https://` hosts, if it has any.
fn upstream_tls(
    name: &str,
    upstream: &crate::config::Upstream,
    server_names: Vec<ServerName<'static>>,
) -> anyhow::Result<Option<UpstreamTls>> {
    if !upstream
        .hosts
        .iter()
        .any(|h| h.value.starts_with("https://"))
    {
        return Ok(None);
    }
    let settings = upstream.tls.clone().unwrap_or_default();
    let ca = settings.ca.as_ref().map(|ca| Path::new(&ca.value));
    let trust = ca.map_or(tls::Trust::WebRoots, tls::Trust::CaFile);
    let identity = match (&settings.cert, &settings.key) {
        (Some(cert), Some(key)) => Some(tls::Identity {
            cert: Path::new(&cert.value),
            key: Path::new(&key.value),
        }),
        _ => None,
    };
    let alpn: &[&[u8]] = match upstream.protocol {
        Protocol::H2 => &[tls::ALPN_H2],
        Protocol::Http1 | Protocol::H2c => &[tls::ALPN_HTTP11],
    };
    let config = tls::client_config(trust, identity, alpn)
        .with_context(|| format!("upstreams.{name}.tls"))?;
    let server_names = match &settings.server_name {
        Some(fixed) => {
            let fixed = ServerName::try_from(fixed.clone()).with_context(|| {
                format!("upstreams.{name}.tls.server_name: `{fixed}` is not a DNS name or IP")
            })?;
            vec![fixed; server_names.len()]
        }
        None => server_names,
    };
    Ok(Some(UpstreamTls {
        connector: TlsConnector::from(Arc::new(config)),
        server_names,
    }))
}

/// `http[s]://HOST[:PORT]` to its first address, `HOST:PORT`, and the
/// name TLS would check.
fn resolve(url: &str) -> anyhow::Result<(SocketAddr, String, ServerName<'static>)> {
    let uri: http::Uri = url.parse()?;
    let Some(host) = uri.host() else {
        bail!("no host");
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let default_port = if uri.scheme_str() == Some("https") {
        443
    } else {
        80
    };
    let port = uri.port_u16().unwrap_or(default_port);
    let server_name = ServerName::try_from(host.to_string())
        .with_context(|| format!("`{host}` is not a DNS name or IP address"))?;
    let addr = (host, port)
        .to_socket_addrs()
        .context("cannot resolve the host")?
        .next()
        .context("the host resolves to no address")?;
    Ok((
        addr,
        format!("{}:{port}", uri.host().unwrap_or(host)),
        server_name,
    ))
}
