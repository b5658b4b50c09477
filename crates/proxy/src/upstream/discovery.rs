//! Upstream host names to addresses, with hickory-resolver (no system
//! NSS, so a static binary resolves too). A configured host is an
//! address, a name (`http://api.internal:8080`: every address it answers
//! is a host) or an SRV name (`srv://_http._tcp.api.internal`: every
//! target and port, each target's every address). Names in the hosts file
//! (`discovery.hosts_file`, read again at each resolution) answer before
//! DNS. The server layer re-resolves each name when its answer's TTL runs
//! out, within `discovery.{min,max}_interval`, and compiles a new plan
//! when an answer changed.

use std::{
    collections::BTreeMap,
    net::{IpAddr, SocketAddr},
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use hickory_resolver::{
    config::{ResolveHosts, ResolverConfig},
    name_server::TokioConnectionProvider,
    system_conf::parse_resolv_conf,
    Hosts, TokioResolver,
};
use tracing::debug;

use crate::config::{Config, DiscoverySettings};

/// The addresses of each configured host that needed resolving, keyed by
/// the host as written; sorted, so that equal answers compare equal.
pub(crate) type Answers = BTreeMap<String, Vec<SocketAddr>>;

/// What a configured host names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Address(SocketAddr),
    Name { name: String, port: u16 },
    Srv { name: String },
}

/// A configured host: where it points, and the `host:port` and TLS name
/// it is known by.
#[derive(Debug, Clone)]
pub(crate) struct HostEntry {
    pub target: Target,
    pub authority: String,
    /// The host without brackets (what TLS checks).
    pub host: String,
}

/// Parses `http[s]://HOST[:PORT]` or `srv://NAME`.
pub(crate) fn entry(url: &str) -> anyhow::Result<HostEntry> {
    let uri: http::Uri = url.parse()?;
    let Some(written) = uri.host() else {
        bail!("no host");
    };
    let host = written.trim_start_matches('[').trim_end_matches(']');
    let (target, authority) = if uri.scheme_str() == Some("srv") {
        let name = host.to_string();
        (Target::Srv { name }, written.to_string())
    } else {
        let default_port = if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        };
        let port = uri.port_u16().unwrap_or(default_port);
        let target = match host.parse::<IpAddr>() {
            Ok(ip) => Target::Address(SocketAddr::new(ip, port)),
            Err(_) => Target::Name {
                name: host.to_string(),
                port,
            },
        };
        (target, format!("{written}:{port}"))
    };
    Ok(HostEntry {
        target,
        authority,
        host: host.to_string(),
    })
}

/// Every host of `config` that names something to resolve, as written.
pub(crate) fn names(config: &Config) -> Vec<String> {
    let mut names: Vec<String> = named_hosts(config)
        .map(|(_, host)| host.to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Each upstream's hosts that name something to resolve: (upstream, host).
fn named_hosts(config: &Config) -> impl Iterator<Item = (&str, &str)> {
    config.upstreams.iter().flat_map(|(name, upstream)| {
        upstream
            .hosts
            .iter()
            .filter(|h| entry(&h.value.url).is_ok_and(|e| !matches!(e.target, Target::Address(_))))
            .map(move |h| (name.as_str(), h.value.url.as_str()))
    })
}

/// A resolver that reads the hosts file again before each round.
#[derive(Debug)]
pub(crate) struct Resolver {
    inner: TokioResolver,
    hosts_file: PathBuf,
    settings: DiscoverySettings,
}

/// One name's answer and until when it holds.
#[derive(Debug)]
pub(crate) struct Resolution {
    pub addresses: Vec<SocketAddr>,
    /// When to ask again (the TTL within the configured bounds).
    pub next: Instant,
}

impl Resolver {
    /// With the name servers of `discovery.resolv_conf`, or none (the
    /// hosts file only) when it cannot be read or names none.
    pub(crate) fn new(settings: &DiscoverySettings) -> Self {
        let read = std::fs::read(&settings.resolv_conf)
            .map_err(|err| err.to_string())
            .and_then(|text| parse_resolv_conf(text).map_err(|err| err.to_string()));
        let provider = TokioConnectionProvider::default();
        let mut builder = match read {
            Ok((config, options)) => {
                let mut builder = TokioResolver::builder_with_config(config, provider);
                *builder.options_mut() = options;
                builder
            }
            Err(err) => {
                debug!(file = %settings.resolv_conf, %err, "no name servers; names resolve from the hosts file only");
                TokioResolver::builder_with_config(ResolverConfig::new(), provider)
            }
        };
        builder.options_mut().use_hosts_file = ResolveHosts::Always;
        // The proxy keeps answers itself, as long as their TTL says.
        builder.options_mut().cache_size = 0;
        Self {
            inner: builder.build(),
            hosts_file: PathBuf::from(&settings.hosts_file),
            settings: settings.clone(),
        }
    }

    /// Reads the hosts file again (a missing one is empty).
    pub(crate) fn read_hosts_file(&mut self) {
        let mut hosts = Hosts::default();
        if let Ok(file) = std::fs::File::open(&self.hosts_file) {
            if let Err(err) = hosts.read_hosts_conf(file) {
                debug!(file = %self.hosts_file.display(), %err, "cannot read the hosts file");
            }
        }
        self.inner.set_hosts(Arc::new(hosts));
    }

    /// The addresses `written` (a configured host) stands for now.
    pub(crate) async fn resolve(&self, written: &str) -> anyhow::Result<Resolution> {
        let entry = entry(written)?;
        let now = Instant::now();
        let (mut addresses, valid_until) = match entry.target {
            Target::Address(addr) => (vec![addr], now + self.settings.max_interval),
            Target::Name { name, port } => self.addresses(&name, port).await?,
            Target::Srv { name } => {
                let records = self
                    .inner
                    .srv_lookup(name.as_str())
                    .await
                    .with_context(|| format!("no SRV records for `{name}`"))?;
                let mut valid_until = records.as_lookup().valid_until();
                let mut addresses = Vec::new();
                for srv in records.iter() {
                    let target = srv.target().to_utf8();
                    let (found, until) = self.addresses(&target, srv.port()).await?;
                    addresses.extend(found);
                    valid_until = valid_until.min(until);
                }
                (addresses, valid_until)
            }
        };
        if addresses.is_empty() {
            bail!("`{written}` resolves to no address");
        }
        addresses.sort();
        addresses.dedup();
        Ok(Resolution {
            addresses,
            next: self.next(now, valid_until),
        })
    }

    async fn addresses(&self, name: &str, port: u16) -> anyhow::Result<(Vec<SocketAddr>, Instant)> {
        let found = match self.inner.lookup_ip(name).await {
            Ok(found) => found,
            Err(err) if err.is_no_records_found() => {
                bail!("cannot resolve `{name}`: no such name, or no address")
            }
            Err(err) => bail!("cannot resolve `{name}`: {err}"),
        };
        let addresses = found.iter().map(|ip| SocketAddr::new(ip, port)).collect();
        Ok((addresses, found.valid_until()))
    }

    /// `valid_until` clamped to the configured interval after `now`.
    fn next(&self, now: Instant, valid_until: Instant) -> Instant {
        let ttl = valid_until.saturating_duration_since(now);
        now + ttl.clamp(self.settings.min_interval, self.settings.max_interval)
    }

    /// The interval to try again after a failure.
    pub(crate) fn retry_after(&self) -> Duration {
        self.settings.min_interval
    }
}

/// Resolves every name of `config`; a name that fails keeps its answer in
/// `known` when it has one (and `failed` is called, to count it), and is
/// an error otherwise.
pub(crate) async fn resolve_all(
    resolver: &mut Resolver,
    config: &Config,
    known: &Answers,
    failed: impl Fn(),
) -> anyhow::Result<(Answers, BTreeMap<String, Instant>)> {
    resolver.read_hosts_file();
    let mut answers = Answers::new();
    let mut due = BTreeMap::new();
    for written in names(config) {
        match resolver.resolve(&written).await {
            Ok(answer) => {
                due.insert(written.clone(), answer.next);
                answers.insert(written, answer.addresses);
            }
            Err(err) => match known.get(&written) {
                Some(last) => {
                    failed();
                    tracing::warn!(host = %written, err = %format!("{err:#}"), "resolution failed; the last answer stays");
                    due.insert(written.clone(), Instant::now() + resolver.retry_after());
                    answers.insert(written, last.clone());
                }
                None => {
                    let upstream = named_hosts(config)
                        .find(|(_, host)| *host == written)
                        .map_or("?", |(upstream, _)| upstream);
                    return Err(err.context(format!("upstreams.{upstream}.hosts: `{written}`")));
                }
            },
        }
    }
    Ok((answers, due))
}

/// [`resolve_all`] on a runtime of its own, on a thread of its own (the
/// caller may be in a runtime already).
pub(crate) fn resolve_blocking(config: &Config, known: &Answers) -> anyhow::Result<Answers> {
    if names(config).is_empty() {
        return Ok(Answers::new());
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot build a runtime to resolve upstream hosts")?;
                runtime.block_on(async {
                    let mut resolver = Resolver::new(&config.discovery);
                    // Only a start resolves this way: nothing known, nothing to count.
                    resolve_all(&mut resolver, config, known, || {})
                        .await
                        .map(|(answers, _)| answers)
                })
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the resolver thread panicked")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_addresses_names_or_srv_names() {
        let e = entry("http://127.0.0.1:8080").unwrap();
        assert_eq!(e.target, Target::Address("127.0.0.1:8080".parse().unwrap()));
        let e = entry("https://[::1]").unwrap();
        assert_eq!(e.target, Target::Address("[::1]:443".parse().unwrap()));
        assert_eq!(
            (e.authority.as_str(), e.host.as_str()),
            ("[::1]:443", "::1")
        );
        let e = entry("http://api.internal").unwrap();
        assert_eq!(
            e.target,
            Target::Name {
                name: "api.internal".into(),
                port: 80
            }
        );
        let e = entry("srv://_http._tcp.api.internal").unwrap();
        assert_eq!(
            e.target,
            Target::Srv {
                name: "_http._tcp.api.internal".into()
            }
        );
    }

    #[tokio::test]
    async fn names_resolve_from_the_hosts_file_read_again_each_time() {
        let dir = std::env::temp_dir().join(format!("sluice-hosts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("hosts");
        std::fs::write(&file, "127.0.0.7 api.test\n127.0.0.8 api.test\n").unwrap();
        let settings = DiscoverySettings {
            min_interval: Duration::from_secs(1),
            max_interval: Duration::from_secs(2),
            hosts_file: file.display().to_string(),
            resolv_conf: dir.join("resolv.conf").display().to_string(),
        };
        let mut resolver = Resolver::new(&settings);
        resolver.read_hosts_file();
        let answer = resolver.resolve("http://api.test:81").await.unwrap();
        let want: Vec<SocketAddr> = vec![
            "127.0.0.7:81".parse().unwrap(),
            "127.0.0.8:81".parse().unwrap(),
        ];
        assert_eq!(answer.addresses, want);
        // The hosts file's answers live long; the bound says when to look again.
        assert!(answer.next <= Instant::now() + Duration::from_secs(2));
        std::fs::write(&file, "127.0.0.9 api.test\n").unwrap();
        resolver.read_hosts_file();
        let answer = resolver.resolve("http://api.test:81").await.unwrap();
        assert_eq!(answer.addresses, vec!["127.0.0.9:81".parse().unwrap()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
