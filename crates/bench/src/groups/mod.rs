//! The groups: DESIGN.md's questions, each a function that starts its
//! components (sluice's and each peer's, all at once), measures its rows
//! in rounds (see [`crate::rounds`]), publishes the group and stops them
//! all when it returns; `runtimes` publishes a group per seed.

mod balancing;
mod idle;
mod runtimes;
mod sweeps;
mod throughput;

use std::{net::SocketAddr, time::Duration};

use load::LoadConfig;

use crate::{
    machine::{Peer, PeerKind},
    measure::load_config,
    options::GroupName,
    peers::{ProxySite, Site, UpstreamProtocol},
    process::Component,
    results::Group,
    stage::Bench,
};

/// Measures a group and hands it to [`Bench::publish`].
pub(crate) type GroupFn = fn(&mut Bench<'_>) -> anyhow::Result<()>;

/// Every group in the order a run takes them.
pub(crate) const ALL: &[(GroupName, GroupFn)] = &[
    (GroupName::Baseline, throughput::baseline),
    (GroupName::Proxy, throughput::proxy),
    (GroupName::Middleware, throughput::middleware),
    (GroupName::Protocols, throughput::protocols),
    (GroupName::Lb, balancing::lb),
    (GroupName::LbSlow, balancing::lb_slow),
    (GroupName::Io, sweeps::io),
    (GroupName::Open, sweeps::open),
    (GroupName::Idle, idle::idle),
    (GroupName::Runtimes, runtimes::runtimes),
];

/// A request without an answer after this long is a timeout in the sweeps,
/// where thousands of connections share two cores.
const SWEEP_TIMEOUT: Duration = Duration::from_secs(10);

/// What a row costs besides its load: starting and checking components,
/// settling between rows.
const ROW_OVERHEAD: Duration = Duration::from_millis(400);

/// How long the run should take: every row's warm-up and measured time,
/// for every round, plus a little per row.
pub(crate) fn expected(bench: &Bench<'_>) -> Duration {
    let options = bench.options;
    let profile = bench.profile;
    let peers = bench.peers.len();
    let nginx = usize::from(bench.peers.iter().any(|p| p.kind == PeerKind::Nginx));
    let throughput = profile.warmup + profile.duration + ROW_OVERHEAD;
    let io = profile.io_warmup + profile.io_duration + ROW_OVERHEAD;
    let open = profile.duration + ROW_OVERHEAD;
    let lb_points = options
        .lb_points()
        .iter()
        .filter(|&&p| p <= bench.max_conns)
        .count()
        + usize::from(options.lb_points().iter().any(|&p| p > bench.max_conns));
    let mut total = Duration::ZERO;
    for name in &options.only {
        let (rows, each) = match name {
            GroupName::Baseline | GroupName::Proxy => (1 + peers, throughput),
            GroupName::Middleware => (profile.handlers.len() + 2, throughput),
            // nginx has no HTTP/2 upstreams: 2 of its 4 rows do not run.
            GroupName::Protocols => (4 * (1 + peers) - 2 * nginx, throughput),
            // The four other policies at the first point.
            GroupName::Lb => (lb_points * (1 + peers) + 4, throughput),
            GroupName::LbSlow => (3 + peers, throughput),
            GroupName::Io => (options.io_points().len() * (2 + peers), io),
            // Cold and warm, per rate, for the backend alone and each proxy.
            GroupName::Open => (options.open_rates().len() * 2 * (2 + peers), open),
            GroupName::Idle => {
                total += idle::expected(bench, peers);
                continue;
            }
            GroupName::Runtimes => {
                total += runtimes::expected(bench);
                continue;
            }
            GroupName::Peers => (0, Duration::ZERO),
        };
        total += each * (rows * options.rounds()) as u32;
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
    Site::Proxy(ProxySite {
        listen,
        tls: None,
        h2c_clients: false,
        upstreams,
        upstream_protocol: UpstreamProtocol::Http1,
        max_conns,
        least_conn: false,
    })
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
