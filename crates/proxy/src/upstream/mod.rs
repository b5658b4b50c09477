//! Layer 3: upstreams and the way to them. An [`Upstream`] is one
//! upstream compiled from its configuration: its hosts (resolved), the
//! balancer that picks among them and keeps their health, its timeouts
//! and TLS. `balance` picks hosts, `connect` opens connections, `pool`
//! keeps HTTP/1.1 connections alive between requests, `queue` gives a
//! request one (opened, or given back by another request) without
//! flooding a busy host, and `h2_pool` multiplexes HTTP/2 streams over a
//! few connections per host;
//! `discovery` resolves host names, and `carry` moves a host's state from
//! one plan's upstream to the next one's.

pub(crate) mod balance;
mod carry;
pub(crate) mod connect;
pub(crate) mod discovery;
pub(crate) mod h2_pool;
pub(crate) mod health;
pub(crate) mod pool;
pub(crate) mod queue;
pub(crate) mod retry;

use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use anyhow::Context;
use http::HeaderValue;
use tls::{rustls::pki_types::ServerName, tokio_rustls::TlsConnector};

use crate::{
    config::{ActiveHealthSettings, Protocol, TimeoutSettings, UpstreamSettings},
    ids::HostId,
};
use balance::Balancer;
use discovery::{Answers, Target};
use pool::HostConns;
use retry::RetryPolicy;

/// One upstream: its hosts, balancer and settings.
#[derive(Debug)]
pub(crate) struct Upstream {
    pub name: String,
    /// Every address of every configured host (a name may answer several);
    /// the index is the host's id in the balancer and the pools.
    pub hosts: Vec<SocketAddr>,
    /// `host:port` of each host as written (for logs).
    pub host_names: Vec<String>,
    /// Each host's pooled connections, per worker (shared with the plans
    /// before and after this one that keep the host).
    pub conns: Vec<Arc<HostConns>>,
    /// What a pooled connection depends on besides the address (protocol,
    /// TLS settings): a reload that changes it starts the pools afresh.
    connection_settings: String,
    pub balancer: Balancer,
    pub timeouts: TimeoutSettings,
    pub retries: u32,
    pub retry: RetryPolicy,
    /// `health.active`: checked by the process's health checker.
    pub active_health: Option<ActiveHealthSettings>,
    pub max_idle: usize,
    pub idle_timeout: Duration,
    pub host_header: Option<HeaderValue>,
    pub protocol: Protocol,
    /// For `https://` hosts.
    pub tls: Option<UpstreamTls>,
    /// Each new connection begins with a PROXY protocol header, and is
    /// reused only for the same client (`pool::Pool::take`).
    pub proxy_protocol: Option<crate::config::SendProxyVersion>,
}

/// How the proxy opens TLS to an upstream's hosts.
pub(crate) struct UpstreamTls {
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

impl Upstream {
    /// `host:port` of a host as written (for logs).
    pub(crate) fn host_name(&self, host: HostId) -> &str {
        &self.host_names[host.index()]
    }

    /// Compiles one upstream: its hosts (names from `answers`), its TLS
    /// connector, pools for `workers` workers; fails when a name has no
    /// answer or a file cannot be read.
    pub(crate) fn new(
        name: &str,
        settings: &UpstreamSettings,
        answers: &Answers,
        workers: usize,
    ) -> anyhow::Result<Self> {
        let mut hosts = Vec::new();
        let mut host_names = Vec::new();
        let mut server_names = Vec::new();
        let mut balanced = Vec::new();
        for host in &settings.hosts {
            let context = || format!("upstreams.{name}.hosts: `{}`", host.value.url);
            let entry = discovery::entry(&host.value.url).with_context(context)?;
            let server_name = ServerName::try_from(entry.host.clone())
                .with_context(|| format!("`{}` is not a DNS name or IP address", entry.host))
                .with_context(context)?;
            let addresses = match entry.target {
                Target::Address(addr) => vec![addr],
                Target::Name { .. } | Target::Srv { .. } => answers
                    .get(&host.value.url)
                    .cloned()
                    .context("the name was not resolved")
                    .with_context(context)?,
            };
            for addr in addresses {
                // Each address is a host of its own to the balancer, with
                // the entry's weight, named by the URL and the address
                // (the hash ring's points, the sticky cookie's value).
                balanced.push((format!("{}@{addr}", host.value.url), host.value.weight));
                hosts.push(addr);
                host_names.push(entry.authority.clone());
                server_names.push(server_name.clone());
            }
        }
        let tls = upstream_tls(name, settings, server_names)?;
        let host_header = match &settings.host_header {
            None => None,
            Some(value) => Some(HeaderValue::from_str(value).with_context(|| {
                format!("upstreams.{name}.host_header: `{value}` is not a valid header value")
            })?),
        };
        let tls_settings = settings.tls.as_ref().map(|t| {
            let value =
                |v: &Option<serde_saphyr::Spanned<String>>| v.as_ref().map(|v| v.value.clone());
            (
                value(&t.ca),
                value(&t.cert),
                value(&t.key),
                t.server_name.clone(),
            )
        });
        Ok(Self {
            name: name.to_string(),
            balancer: Balancer::new(settings, &balanced, workers)
                .with_context(|| format!("upstreams.{name}"))?,
            retry: RetryPolicy::new(settings),
            active_health: settings.health.active.clone(),
            conns: hosts
                .iter()
                .map(|_| Arc::new(HostConns::new(workers)))
                .collect(),
            connection_settings: format!(
                "{:?} {tls_settings:?} {:?}",
                settings.protocol, settings.proxy_protocol
            ),
            hosts,
            host_names,
            timeouts: settings.timeouts.clone(),
            retries: settings.retries,
            max_idle: settings.pool.max_idle,
            idle_timeout: settings.pool.idle_timeout,
            host_header,
            protocol: settings.protocol,
            tls,
            proxy_protocol: settings.proxy_protocol,
        })
    }
}

/// The connector for an upstream's `https://` hosts, if it has any.
fn upstream_tls(
    name: &str,
    upstream: &UpstreamSettings,
    server_names: Vec<ServerName<'static>>,
) -> anyhow::Result<Option<UpstreamTls>> {
    if !upstream
        .hosts
        .iter()
        .any(|h| h.value.url.starts_with("https://"))
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
