//! The groups, one per benchmark question (the table at the top of
//! docs/BENCH.md), each a function that starts its components (sluice's
//! and each peer's, all at once), measures its rows in rounds (see
//! [`crate::rounds`]), publishes the group and stops them all when it
//! returns; `runtimes` publishes a group per seed.

#[cfg(test)]
mod backlog;
mod balancing;
mod gateway;
mod idle;
mod middleware;
mod oidc;
mod runtimes;
mod sweeps;
mod throughput;

use std::{net::SocketAddr, time::Duration};

use load::LoadConfig;

use crate::{
    machine::{Peer, PeerKind},
    measure::load_config,
    options::{BenchOptions, GroupName, Profile},
    peers::{plays, ProxySite, Site},
    process::Component,
    results::Group,
    stage::{cap, Bench},
};

/// Measures a group and hands it to [`Bench::publish`].
pub(crate) type GroupFn = fn(&mut Bench<'_>) -> anyhow::Result<()>;

/// Every group in the order a run takes them.
pub(crate) const ALL: &[(GroupName, GroupFn)] = &[
    (GroupName::Baseline, throughput::baseline),
    (GroupName::Proxy, throughput::proxy),
    (GroupName::Middleware, middleware::middleware),
    (GroupName::Protocols, throughput::protocols),
    (GroupName::Lb, balancing::lb),
    (GroupName::LbSlow, balancing::lb_slow),
    (GroupName::Io, sweeps::io),
    (GroupName::Open, sweeps::open),
    (GroupName::Idle, idle::idle),
    (GroupName::Gateway, gateway::gateway),
    (GroupName::Runtimes, runtimes::runtimes),
];

/// A request without an answer after this long is a timeout in the sweeps,
/// where thousands of connections share two cores.
const SWEEP_TIMEOUT: Duration = Duration::from_secs(10);

/// What a row costs besides its load: starting and checking components,
/// settling between rows.
const ROW_OVERHEAD: Duration = Duration::from_millis(400);

/// What the run's estimate needs to know of it: what was asked, the
/// profile, the peers found and the sweeps' top.
pub(crate) struct Outline<'a> {
    pub(crate) options: &'a BenchOptions,
    pub(crate) profile: Profile,
    pub(crate) peers: Vec<PeerKind>,
    pub(crate) max_conns: usize,
}

impl<'a> Outline<'a> {
    pub(crate) fn of(bench: &'a Bench<'_>) -> Self {
        Self {
            options: bench.options,
            profile: bench.profile,
            peers: bench.peers.iter().map(|p| p.kind).collect(),
            max_conns: bench.max_conns,
        }
    }

    /// A sweep's points as [`Bench::capped`] leaves them.
    pub(crate) fn capped(&self, points: Vec<usize>) -> Vec<usize> {
        cap(&points, self.max_conns).0
    }
}

/// How many of `peers` can play `site` (the others are skipped with a note).
fn players(peers: &[PeerKind], site: &Site<'_>) -> usize {
    peers.iter().filter(|&&kind| plays(kind, site)).count()
}

/// sluice and each of `peers` that plays a plain proxy ([`proxies`]).
fn plain_proxies(peers: &[PeerKind]) -> usize {
    let addr = SocketAddr::from(([127, 0, 0, 1], 1));
    1 + players(peers, &plain_proxy_site(addr, &[addr], 1))
}

/// The rows a group measures and how long it should take, every round
/// counted; `None` for `runtimes` (see [`runtimes::expected`]) and
/// `peers`. Each count comes from the lists and points the group
/// function builds its rows from.
pub(crate) fn planned(outline: &Outline<'_>, name: GroupName) -> Option<(usize, Duration)> {
    let options = outline.options;
    let profile = outline.profile;
    let peers = &outline.peers;
    let throughput = profile.warmup + profile.duration + ROW_OVERHEAD;
    let io = profile.io_warmup + profile.io_duration + ROW_OVERHEAD;
    let open = profile.duration + ROW_OVERHEAD;
    let (rows, each) = match name {
        GroupName::Baseline => {
            let addr = SocketAddr::from(([127, 0, 0, 1], 1));
            (
                1 + players(peers, &throughput::petstore_bytes(addr)),
                throughput,
            )
        }
        GroupName::Proxy => (plain_proxies(peers), throughput),
        GroupName::Middleware => {
            let addr = [SocketAddr::from(([127, 0, 0, 1], 1))];
            let jwks = std::path::Path::new("jwks.json");
            let handlers = options.handlers();
            let peer_rows: usize = handlers
                .iter()
                .filter_map(|h| middleware::handler_site(h, addr[0], &addr, jwks, 1))
                .map(|site| players(peers, &site))
                .sum();
            (
                middleware::scenarios(&handlers).len()
                    + usize::from(middleware::redis_row(&handlers))
                    + usize::from(middleware::oidc_row(&handlers))
                    + peer_rows,
                throughput,
            )
        }
        GroupName::Protocols => (throughput::protocols_rows(peers), throughput),
        GroupName::Lb => {
            let points = outline.capped(options.lb_points()).len();
            (balancing::lb_rows(points, peers), throughput)
        }
        GroupName::LbSlow => (balancing::lb_slow_rows(peers), throughput),
        GroupName::Io => {
            let points = outline.capped(options.io_points()).len();
            (sweeps::io_rows(points, peers), io)
        }
        GroupName::Open => (sweeps::open_rows(options.open_rates().len(), peers), open),
        // RSS does not move with the machine's load: measured once.
        GroupName::Idle => return Some(idle::expected(outline)),
        // sluice's bare proxy and chain, and Envoy's.
        GroupName::Gateway => (2 * (1 + gateway::peers_of(peers)), throughput),
        GroupName::Runtimes | GroupName::Peers => return None,
    };
    Some((rows, each * (rows * options.rounds()) as u32))
}

/// How long the run should take: every row's warm-up and measured time,
/// for every round, plus a little per row.
pub(crate) fn expected(outline: &Outline<'_>) -> Duration {
    let mut total = Duration::ZERO;
    for &name in &outline.options.only {
        total += match name {
            GroupName::Runtimes => runtimes::expected(outline),
            _ => planned(outline, name).map_or(Duration::ZERO, |(_, time)| time),
        };
    }
    total
}

fn begin(bench: &mut Bench<'_>, name: &str, title: &str, question: &str) -> Group {
    bench.observer.group_started(name, title);
    Group {
        name: name.to_string(),
        title: title.to_string(),
        question: question.to_string(),
        rows: Vec::new(),
        notes: Vec::new(),
    }
}

/// The throughput rows' load: the run's connections, pipeline, duration
/// and warm-up.
fn throughput(bench: &Bench<'_>, url: &str) -> anyhow::Result<LoadConfig> {
    let mut config = load_config(
        url,
        bench.options.connections,
        bench.profile.duration,
        bench.profile.warmup,
    )?;
    config.pipeline = bench.options.pipeline;
    Ok(config)
}

/// A `sluice proxy` configuration: one worker, warnings only, room for
/// `max_conns` clients; `body` holds listeners, upstreams, routes and
/// anything else.
fn sluice_yaml(max_conns: usize, body: &str) -> String {
    format!(
        "workers: 1\nlog: {{ level: warn }}\nlimits: {{ max_connections: {} }}\n{body}",
        max_conns + 64
    )
}

/// sluice with one listener and one route to `upstreams` (round robin).
fn one_route_yaml(listen: SocketAddr, upstreams: &[SocketAddr], max_conns: usize) -> String {
    sluice_yaml(
        max_conns,
        &format!(
            "listeners: [{{ address: {listen} }}]\nupstreams:\n{}routes:\n  - {{ path: /, upstream: backend }}\n",
            upstream_yaml("backend", upstreams, "")
        ),
    )
}

/// A peer as a plain HTTP/1.1 proxy (round robin) in front of `upstreams`.
fn plain_proxy_site(listen: SocketAddr, upstreams: &[SocketAddr], max_conns: usize) -> Site<'_> {
    Site::Proxy(ProxySite::plain(listen, upstreams, max_conns))
}

/// The start of a gateway's sluice configuration: the listener, the
/// upstream `backend`, and `middleware:` with an access log to `log` and
/// headers set on request and response; the group adds its handlers.
fn gateway_yaml_start(listen: SocketAddr, backend: SocketAddr, log: &std::path::Path) -> String {
    format!(
        "listeners: [{{ address: {listen} }}]\nupstreams:\n{}\
middleware:
  access_log: {{ path: \"{}\" }}
  headers: {{ request: {{ set: {{ x-env: bench }} }}, response: {{ set: {{ x-served-by: sluice }} }} }}
",
        upstream_yaml("backend", &[backend], ""),
        log.display()
    )
}

/// A round-robin upstream named `name` over `hosts`.
fn upstream_yaml(name: &str, hosts: &[SocketAddr], extra: &str) -> String {
    let hosts: Vec<String> = hosts.iter().map(|h| format!("\"http://{h}\"")).collect();
    format!(
        "  {name}:\n    hosts: [{}]\n    pool: {{ max_idle: 16384 }}\n    timeouts: {{ request: 30s }}\n{extra}",
        hosts.join(", ")
    )
}

/// A peer standing where sluice stood, or a note why it cannot.
fn peer_component(
    bench: &mut Bench<'_>,
    notes: &mut Vec<String>,
    peer: &Peer,
    name: &str,
    site: &Site<'_>,
    listen: SocketAddr,
) -> anyhow::Result<Option<Component>> {
    match bench.peer(peer, name, site, listen)? {
        Ok(component) => Ok(Some(component)),
        Err(why) => {
            notes.push(format!("{name}: not measured: {why}"));
            Ok(None)
        }
    }
}

/// A peer's row: the peer started on `site` (or a note why not), and its
/// trial, GET /v1/pets with `headers` under the throughput rows' load,
/// its stage the peer and the backend at `backend` in `components`.
#[allow(clippy::too_many_arguments)]
fn peer_row(
    bench: &mut Bench<'_>,
    notes: &mut Vec<String>,
    components: &mut Vec<Component>,
    trials: &mut Vec<crate::rounds::Trial>,
    peer: &Peer,
    (name, site, listen): (String, &Site<'_>, SocketAddr),
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
    backend: usize,
) -> anyhow::Result<()> {
    let Some(server) = peer_component(bench, notes, peer, &name, site, listen)? else {
        return Ok(());
    };
    components.push(server);
    let mut config = throughput(bench, &format!("http://{listen}/v1/pets"))?;
    config.headers = headers;
    let spec = crate::measure::RowSpec::new(name, peer.kind.name(), config);
    trials.push(crate::rounds::Trial::new(
        spec,
        &[components.len() - 1, backend],
    ));
    Ok(())
}

/// sluice, then each peer, as HTTP/1.1 proxies (round robin) in front of
/// `upstreams`, all started at once and pushed onto `components`:
/// `(system, index in components, address)`.
fn proxies(
    bench: &mut Bench<'_>,
    group: &mut Group,
    components: &mut Vec<Component>,
    name: &str,
    upstreams: &[SocketAddr],
    max_conns: usize,
) -> anyhow::Result<Vec<(String, usize, SocketAddr)>> {
    let listen = bench.port()?;
    let yaml = one_route_yaml(listen, upstreams, max_conns);
    components.push(bench.sluice_proxy(&format!("sluice proxy ({name})"), &yaml, &[listen])?);
    let mut systems = vec![("sluice".to_string(), components.len() - 1, listen)];
    for peer in bench.peers.clone() {
        let listen = bench.port()?;
        let site = plain_proxy_site(listen, upstreams, max_conns);
        let component = format!("{} {name}", peer.kind.name());
        if let Some(server) =
            peer_component(bench, &mut group.notes, &peer, &component, &site, listen)?
        {
            components.push(server);
            systems.push((peer.kind.name().to_string(), components.len() - 1, listen));
        }
    }
    Ok(systems)
}

fn header(name: &str, value: &str) -> anyhow::Result<(http::HeaderName, http::HeaderValue)> {
    Ok((
        http::HeaderName::from_bytes(name.as_bytes())?,
        http::HeaderValue::from_str(value)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The middleware rows that need something installed here.
    fn installed_rows(handlers: &[&str]) -> usize {
        usize::from(middleware::redis_row(handlers)) + usize::from(middleware::oidc_row(handlers))
    }

    fn rows(outline: &Outline<'_>) -> Vec<(GroupName, usize)> {
        GroupName::ALL
            .into_iter()
            .filter_map(|name| planned(outline, name).map(|(rows, _)| (name, rows)))
            .collect()
    }

    /// The counts follow the lists each group function builds its rows
    /// from: protocols' cases, lb's policies, lb-slow's policies, idle's
    /// protocols and points, the sweeps' points as capped, and a peer
    /// only where its configuration can be written.
    #[test]
    fn the_estimate_counts_the_rows_each_group_builds() {
        let options = BenchOptions::new("sluice".into(), "out".into());
        let both = Outline {
            options: &options,
            profile: options.profile(),
            peers: vec![PeerKind::Haproxy, PeerKind::Nginx],
            max_conns: options.max_conns,
        };
        use GroupName::*;
        assert_eq!(
            rows(&both),
            [
                (Baseline, 3),
                (Proxy, 3),
                // The empty chain, fourteen handlers alone (ext_authz
                // twice: asking, and its cache), the default chain;
                // HAProxy's and nginx's rate limits; rate_limit on Redis
                // where redis-server is installed, oidc where node and
                // the provider are.
                (Middleware, 18 + installed_rows(&options.handlers())),
                // Eight cases for sluice; HAProxy plays the six without
                // HTTP/3 clients, nginx the three of those with HTTP/1.1
                // upstreams.
                (Protocols, 17),
                // Three proxies at three points, four more policies at 500.
                (Lb, 13),
                // Three sluice policies, each peer's fewest connections.
                (LbSlow, 5),
                // Alone, sluice and two peers at three user counts.
                (Io, 12),
                // The same four, cold and warm, at two rates.
                (Open, 16),
                // Three systems, HTTP/1.1 and HTTP/2, 1,000 and 10,000.
                (Idle, 12),
                // sluice's bare proxy and chain; neither peer plays the chain.
                (Gateway, 2),
            ]
        );
        let every = Outline {
            peers: PeerKind::ALL.to_vec(),
            ..both
        };
        assert_eq!(
            rows(&every),
            [
                // Envoy and Caddy answer the bytes; Traefik and nghttpx cannot.
                (Baseline, 5),
                (Proxy, 7),
                // Envoy's jwt_authn; Envoy's, Traefik's, nginx's and
                // HAProxy's rate limits; rate_limit on Redis where installed.
                (Middleware, 21 + installed_rows(&options.handlers())),
                // sluice, HAProxy, Envoy, Traefik, Caddy and nghttpx play
                // the six cases without HTTP/3 clients, nginx three;
                // sluice and Caddy the two with HTTP/3 clients.
                (Protocols, 43),
                (Lb, 25),
                // nghttpx has no fewest-connections policy.
                (LbSlow, 8),
                (Io, 24),
                (Open, 32),
                (Idle, 28),
                // sluice's and Envoy's bare proxy and chain.
                (Gateway, 4),
            ]
        );
        assert_eq!(throughput::CASES.len(), 8);

        let mut quick = options.clone();
        quick.quick = true;
        let alone = Outline {
            options: &quick,
            profile: quick.profile(),
            peers: Vec::new(),
            // An open-file limit that lowers the sweeps' tops.
            max_conns: 1_500,
        };
        assert_eq!(
            rows(&alone),
            [
                (Baseline, 1),
                (Proxy, 1),
                (Middleware, 4 + installed_rows(&quick.handlers())),
                (Protocols, 8),
                // 500 and 1,500 (for 2,000); four more policies at 500.
                (Lb, 6),
                (LbSlow, 3),
                (Io, 4),
                (Open, 4),
                // 1,000 only, HTTP/1.1 and HTTP/2.
                (Idle, 2),
                (Gateway, 2),
            ]
        );

        // `--handlers oidc`: the two chains, and oidc where it can run.
        let mut oidc = options.clone();
        oidc.handlers = Some(vec!["oidc"]);
        let alone = Outline {
            options: &oidc,
            profile: oidc.profile(),
            peers: PeerKind::ALL.to_vec(),
            max_conns: oidc.max_conns,
        };
        assert_eq!(
            planned(&alone, Middleware).map(|(rows, _)| rows),
            Some(2 + installed_rows(&["oidc"]))
        );
    }

    /// The figures docs/BENCH.md, the README, `--help` and [`Profile`]
    /// quote, with every peer: about 26 minutes, and about 4.5 for
    /// `--quick` (the estimate; docs/BENCH.md has a measured run). The
    /// Redis and oidc rows add 9 s each where their components are
    /// installed.
    #[test]
    fn the_estimate_of_a_full_and_a_quick_run() {
        let options = BenchOptions::new("sluice".into(), "out".into());
        let mut quick = options.clone();
        quick.quick = true;
        for (options, about) in [(&options, 25 * 60 + 30..=27 * 60), (&quick, 240..=300)] {
            let outline = Outline {
                options,
                profile: options.profile(),
                peers: PeerKind::ALL.to_vec(),
                max_conns: options.max_conns,
            };
            let total = expected(&outline).as_secs();
            assert!(about.contains(&total), "{total} s, not {about:?}");
        }
    }
}
