//! The groups: DESIGN.md's questions, each a function that starts its
//! components, measures its rows (sluice's, then each peer's) and stops
//! them all when it returns.

use std::{net::SocketAddr, time::Duration};

use anyhow::Context;
use load::LoadConfig;

use crate::{
    machine::Peer,
    measure::{load_config, RowSpec},
    options::GroupName,
    peers::{ProxySite, Site, UpstreamProtocol},
    process::Component,
    results::Group,
    stage::Bench,
};

pub(crate) type GroupFn = fn(&mut Bench<'_>) -> anyhow::Result<Group>;

/// Every group in the order a run takes them.
pub(crate) const ALL: &[(GroupName, GroupFn)] = &[
    (GroupName::Baseline, baseline),
    (GroupName::Proxy, proxy),
    (GroupName::Middleware, middleware),
    (GroupName::Protocols, protocols),
    (GroupName::Lb, lb),
    (GroupName::Io, io),
    (GroupName::Open, open),
];

/// The OpenAPI description the validate handler checks requests against.
const PETSTORE_SPEC: &str = include_str!("../../../specs/petstore.yaml");
/// seeds/003's message: the downstream waits `delay` ms.
const MESSAGE: &str = r#"{"id":"1","payload":"sample payload","delay":DELAY}"#;
/// A request without an answer after this long is a timeout in the sweeps,
/// where thousands of connections share two cores.
const SWEEP_TIMEOUT: Duration = Duration::from_secs(10);

fn begin(bench: &mut Bench<'_>, name: GroupName, title: &str, question: &str) -> Group {
    bench.observer.group_started(name.as_str(), title);
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
        upstreams,
        upstream_protocol: UpstreamProtocol::Http1,
        max_conns,
    })
}

/// A round-robin upstream named `backend` over `hosts`.
fn upstream_yaml(name: &str, hosts: &[SocketAddr], extra: &str) -> String {
    let hosts: Vec<String> = hosts.iter().map(|h| format!("\"http://{h}\"")).collect();
    format!(
        "  {name}:\n    hosts: [{}]\n    pool: {{ max_idle: 16384 }}\n    timeouts: {{ request: 30s }}\n{extra}",
        hosts.join(", ")
    )
}

/// Rows of a peer standing where sluice stood, or a note why it cannot.
fn peer_component(
    bench: &mut Bench<'_>,
    group: &mut Group,
    peer: &Peer,
    name: &str,
    site: &Site<'_>,
    listen: SocketAddr,
) -> anyhow::Result<Option<Component>> {
    match bench.peer(peer, name, site, listen)? {
        Ok(component) => Ok(Some(component)),
        Err(why) => {
            group.notes.push(format!("{name}: not measured: {why}"));
            Ok(None)
        }
    }
}

/// Question 1.
fn baseline(bench: &mut Bench<'_>) -> anyhow::Result<Group> {
    let mut group = begin(
        bench,
        GroupName::Baseline,
        "Backend alone",
        "What is the baseline throughput and latency of the backend alone?",
    );
    let (mut backend, addr) = bench.serve("petstore", &[], true)?;
    let spec = RowSpec::new(
        "petstore (sluice serve)",
        "backend",
        throughput(bench, &format!("http://{addr}/v1/pets"))?,
    );
    group
        .rows
        .push(bench.measure("baseline", spec, &mut [&mut backend])?);
    drop(backend);
    for peer in bench.peers.clone() {
        let listen = bench.port()?;
        let site = Site::Static {
            listen,
            body: backends::PETS,
            content_type: "application/json",
        };
        let name = format!("{} static petstore", peer.kind.name());
        let Some(mut server) = peer_component(bench, &mut group, &peer, &name, &site, listen)?
        else {
            continue;
        };
        let spec = RowSpec::new(
            format!("petstore bytes ({})", peer.kind.name()),
            peer.kind.name(),
            throughput(bench, &format!("http://{listen}/v1/pets"))?,
        );
        group
            .rows
            .push(bench.measure("baseline", spec, &mut [&mut server])?);
    }
    Ok(group)
}

/// Question 2: the same backend behind each proxy, nothing else on the path.
fn proxy(bench: &mut Bench<'_>) -> anyhow::Result<Group> {
    let mut group = begin(
        bench,
        GroupName::Proxy,
        "Proxy in front of the backend",
        "What does adding the proxy in front of the backend cost?",
    );
    let (mut backend, backend_addr) = bench.serve("petstore", &[], false)?;
    let listen = bench.port()?;
    let yaml = one_route_yaml(listen, &[backend_addr], bench.options.connections);
    let mut sluice = bench.sluice_proxy("sluice proxy", &yaml, &[listen])?;
    let url = format!("http://{listen}/v1/pets");
    let spec = RowSpec::new("sluice -> petstore", "sluice", throughput(bench, &url)?);
    group
        .rows
        .push(bench.measure("proxy", spec, &mut [&mut sluice, &mut backend])?);
    drop(sluice);
    for peer in bench.peers.clone() {
        let listen = bench.port()?;
        let site = plain_proxy_site(
            listen,
            std::slice::from_ref(&backend_addr),
            bench.options.connections,
        );
        let name = format!("{} proxy", peer.kind.name());
        let Some(mut server) = peer_component(bench, &mut group, &peer, &name, &site, listen)?
        else {
            continue;
        };
        let spec = RowSpec::new(
            format!("{} -> petstore", peer.kind.name()),
            peer.kind.name(),
            throughput(bench, &format!("http://{listen}/v1/pets"))?,
        );
        group
            .rows
            .push(bench.measure("proxy", spec, &mut [&mut server, &mut backend])?);
    }
    Ok(group)
}

/// Question 3: one sluice process with a route per handler, told apart by
/// Host, so that every handler is measured on the same process.
fn middleware(bench: &mut Bench<'_>) -> anyhow::Result<Group> {
    let mut group = begin(
        bench,
        GroupName::Middleware,
        "Middleware handlers",
        "What does each middleware handler cost, alone and as the full default chain?",
    );
    if bench.options.runs(GroupName::Peers) {
        group
            .notes
            .push("nginx and HAProxy have no equivalent of these handlers: no peer rows.".into());
    }
    let (mut backend, backend_addr) = bench.serve("petstore", &[], false)?;
    let keys = bench.work.join("jwt");
    std::fs::create_dir_all(&keys).with_context(|| format!("cannot create {}", keys.display()))?;
    let key = jwt::generate_key(jwt::Algorithm::RS256, "bench")
        .map_err(|err| anyhow::anyhow!("cannot make a test key: {err}"))?;
    let jwks = keys.join("jwks.json");
    std::fs::write(&jwks, key.jwks_json())
        .with_context(|| format!("cannot write {}", jwks.display()))?;
    let token = key
        .sign(&serde_json::json!({
            "iss": "https://issuer.example",
            "aud": "petstore",
            "sub": "bench",
            "scope": "pets:read",
            "iat": jwt::unix_now(),
            "exp": jwt::unix_now() + 86_400,
        }))
        .map_err(|err| anyhow::anyhow!("cannot sign a test token: {err}"))?;
    let spec_file = bench.work.join("petstore.yaml");
    std::fs::write(&spec_file, PETSTORE_SPEC)
        .with_context(|| format!("cannot write {}", spec_file.display()))?;
    // The access log goes to memory where there is /dev/shm: disk
    // writeback would land on whichever row runs next.
    let log_dir = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        bench.work.clone()
    };
    let access_log = log_dir.join(format!("sluice-bench-{}-access.log", std::process::id()));
    let mut scenarios: Vec<(&str, String)> = vec![("empty chain", "[]".into())];
    for handler in bench.profile.handlers {
        scenarios.push((handler, format!("[{handler}]")));
    }
    scenarios.push(("default chain", "default".into()));
    let listen = bench.port()?;
    let mut routes = String::new();
    for (name, chain) in &scenarios {
        routes.push_str(&format!(
            "  - {{ path: /, host: {}, chain: {chain}, upstream: backend }}\n",
            host_of(name)
        ));
    }
    let yaml = sluice_yaml(
        bench.options.connections,
        &format!(
            "listeners: [{{ address: {listen} }}]\nupstreams:\n{}\
middleware:
  access_log: {{ path: \"{}\" }}
  headers: {{ request: {{ set: {{ x-env: bench }} }}, response: {{ set: {{ x-served-by: sluice }} }} }}
  ip_filter: {{ allow: [127.0.0.0/8] }}
  body_limit: {{ max: 1MiB }}
  jwt: {{ jwks: \"{}\", algorithms: [RS256], issuer: \"https://issuer.example\", audience: [petstore], scopes: [pets:read] }}
  validate: {{ openapi: \"{}\" }}
  rate_limit: {{ rate: 1000000/s }}
chains:
  default: [correlation, metrics, access_log, jwt, validate, rate_limit, headers]
routes:
{routes}",
            upstream_yaml("backend", &[backend_addr], ""),
            access_log.display(),
            jwks.display(),
            spec_file.display(),
        ),
    );
    let mut sluice = bench.sluice_proxy("sluice proxy (middleware)", &yaml, &[listen])?;
    let url = format!("http://{listen}/v1/pets");
    let outcome = (|| {
        for (name, _) in &scenarios {
            let mut config = throughput(bench, &url)?;
            config.headers = vec![
                header("host", &host_of(name))?,
                header("authorization", &format!("Bearer {token}"))?,
            ];
            let spec = RowSpec::new(*name, "sluice", config);
            let row = bench.measure("middleware", spec, &mut [&mut sluice, &mut backend])?;
            // Each row starts with an empty log, as the first did.
            let _ = std::fs::write(&access_log, b"");
            group.rows.push(row);
        }
        anyhow::Ok(())
    })();
    let _ = std::fs::remove_file(&access_log);
    outcome?;
    Ok(group)
}

/// `default chain` becomes the host `default-chain`.
fn host_of(scenario: &str) -> String {
    scenario.replace([' ', '_'], "-")
}

fn header(name: &str, value: &str) -> anyhow::Result<(http::HeaderName, http::HeaderValue)> {
    Ok((
        http::HeaderName::from_bytes(name.as_bytes())?,
        http::HeaderValue::from_str(value)?,
    ))
}

/// Question 4: HTTP/1.1, h2c and h2 over TLS to the backend, and a TLS listener.
fn protocols(bench: &mut Bench<'_>) -> anyhow::Result<Group> {
    let mut group = begin(
        bench,
        GroupName::Protocols,
        "Protocols",
        "HTTP/1.1 vs HTTP/2 (h2c and h2 over TLS) between proxy and backend; TLS on the listener.",
    );
    let tls = bench.tls()?;
    let (mut plain, plain_addr) = bench.serve("petstore", &[], false)?;
    let tls_args = [
        "--tls-cert".to_string(),
        tls.cert.display().to_string(),
        "--tls-key".to_string(),
        tls.key.display().to_string(),
    ];
    let (mut secure, secure_addr) = bench.serve("petstore", &tls_args, false)?;
    // (label, host the route matches, the listener is TLS, upstream protocol)
    let cases = [
        ("HTTP/1.1 -> HTTP/1.1", "h1", false, UpstreamProtocol::Http1),
        (
            "TLS listener -> HTTP/1.1",
            "tls",
            true,
            UpstreamProtocol::Http1,
        ),
        ("HTTP/1.1 -> h2c", "h2c", false, UpstreamProtocol::H2c),
        (
            "HTTP/1.1 -> h2 (TLS)",
            "h2",
            false,
            UpstreamProtocol::H2Tls { ca: &tls.ca },
        ),
    ];
    let plain_listen = bench.port()?;
    let tls_listen = bench.port()?;
    let yaml = sluice_yaml(
        bench.options.connections,
        &format!(
            "listeners:\n  - {{ address: {plain_listen} }}\n  - {{ address: {tls_listen}, tls: {{ cert: \"{}\", key: \"{}\" }} }}\n\
upstreams:\n{}{}  h2:\n    hosts: [\"https://{secure_addr}\"]\n    protocol: h2\n    tls: {{ ca: \"{}\" }}\n\
routes:\n  - {{ path: /, host: h1, upstream: h1 }}\n  - {{ path: /, host: tls, upstream: h1 }}\n  \
- {{ path: /, host: h2c, upstream: h2c }}\n  - {{ path: /, host: h2, upstream: h2 }}\n",
            tls.cert.display(),
            tls.key.display(),
            upstream_yaml("h1", &[plain_addr], ""),
            upstream_yaml("h2c", &[plain_addr], "    protocol: h2c\n"),
            tls.ca.display(),
        ),
    );
    let mut sluice = bench.sluice_proxy(
        "sluice proxy (protocols)",
        &yaml,
        &[plain_listen, tls_listen],
    )?;
    let load_for = |bench: &Bench<'_>, listen: SocketAddr, secure_listener: bool, host: &str| {
        let scheme = if secure_listener { "https" } else { "http" };
        let mut config = throughput(bench, &format!("{scheme}://{listen}/v1/pets"))?;
        config.cacert = Some(tls.ca.clone());
        config.headers = vec![header("host", host)?];
        anyhow::Ok(config)
    };
    for (label, host, secure_listener, _) in &cases {
        let listen = if *secure_listener {
            tls_listen
        } else {
            plain_listen
        };
        let spec = RowSpec::new(
            *label,
            "sluice",
            load_for(bench, listen, *secure_listener, host)?,
        );
        group.rows.push(bench.measure(
            "protocols",
            spec,
            &mut [&mut sluice, &mut plain, &mut secure],
        )?);
    }
    drop(sluice);
    for peer in bench.peers.clone() {
        for (label, host, secure_listener, upstream_protocol) in &cases {
            let listen = bench.port()?;
            let upstream = match upstream_protocol {
                UpstreamProtocol::H2Tls { .. } => secure_addr,
                _ => plain_addr,
            };
            let site = Site::Proxy(ProxySite {
                listen,
                tls: secure_listener.then_some(&tls),
                upstreams: &[upstream],
                upstream_protocol: *upstream_protocol,
                max_conns: bench.options.connections,
            });
            let name = format!("{} {label}", peer.kind.name());
            let Some(mut server) = peer_component(bench, &mut group, &peer, &name, &site, listen)?
            else {
                continue;
            };
            let spec = RowSpec::new(
                *label,
                peer.kind.name(),
                load_for(bench, listen, *secure_listener, host)?,
            );
            group.rows.push(bench.measure(
                "protocols",
                spec,
                &mut [&mut server, &mut plain, &mut secure],
            )?);
        }
    }
    Ok(group)
}

/// sluice, then each peer, as HTTP/1.1 proxies (round robin) in front of
/// `upstreams`, all started at once: `(system, process, address)`.
fn proxies(
    bench: &mut Bench<'_>,
    group: &mut Group,
    name: &str,
    upstreams: &[SocketAddr],
    max_conns: usize,
) -> anyhow::Result<Vec<(String, Component, SocketAddr)>> {
    let listen = bench.port()?;
    let yaml = one_route_yaml(listen, upstreams, max_conns);
    let sluice = bench.sluice_proxy(&format!("sluice proxy ({name})"), &yaml, &[listen])?;
    let mut systems = vec![("sluice".to_string(), sluice, listen)];
    for peer in bench.peers.clone() {
        let listen = bench.port()?;
        let site = plain_proxy_site(listen, upstreams, max_conns);
        let component = format!("{} {name}", peer.kind.name());
        if let Some(server) = peer_component(bench, group, &peer, &component, &site, listen)? {
            systems.push((peer.kind.name().to_string(), server, listen));
        }
    }
    Ok(systems)
}

/// Question 6 (seeds/002): round robin over five 1 KB backends, across a
/// concurrency sweep.
fn lb(bench: &mut Bench<'_>) -> anyhow::Result<Group> {
    let mut group = begin(
        bench,
        GroupName::Lb,
        "Load balancing over 5 backends",
        "How does round robin over five 1 KB backends hold up from hundreds to thousands of connections?",
    );
    let points = bench.capped("lb", bench.options.lb_points());
    let top = points.iter().copied().max().unwrap_or(1);
    let mut backends = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..5 {
        let (backend, addr) = bench.serve("static", &["--size".into(), "1024".into()], false)?;
        backends.push(backend);
        addrs.push(addr);
    }
    let mut systems = proxies(bench, &mut group, "lb", &addrs, top)?;
    // One system at a time: the others are started but idle.
    for (system, server, listen) in &mut systems {
        for &connections in &points {
            let mut config = load_config(
                &format!("http://{listen}/static"),
                connections,
                bench.profile.duration,
                bench.profile.warmup,
            )?;
            config.timeout = SWEEP_TIMEOUT;
            let spec = RowSpec::new(format!("{system} @ {connections}"), system, config)
                .sweep("connections", connections as f64);
            let mut all: Vec<&mut Component> = vec![server];
            all.extend(backends.iter_mut());
            group.rows.push(bench.measure("lb", spec, &mut all)?);
        }
    }
    Ok(group)
}

/// Question 7 (seeds/003): users with think time through `passthrough`
/// to a slow `downstream`, across a users sweep; p95 is the figure.
fn io(bench: &mut Bench<'_>) -> anyhow::Result<Group> {
    let mut group = begin(
        bench,
        GroupName::Io,
        "IO-heavy passthrough",
        "With users who think 1-2 s between requests, in front of a 300 ms downstream, what is p95 from hundreds to thousands of users?",
    );
    let points = bench.capped("io", bench.options.io_points());
    let (mut downstream, downstream_addr) = bench.serve("downstream", &[], false)?;
    let (mut passthrough, passthrough_addr) = bench.serve(
        "passthrough",
        &["--downstream".into(), format!("http://{downstream_addr}")],
        false,
    )?;
    let top = points.iter().copied().max().unwrap_or(1);
    let mut systems: Vec<(String, Option<Component>, SocketAddr)> =
        vec![("backend".into(), None, passthrough_addr)];
    for (system, server, listen) in proxies(bench, &mut group, "io", &[passthrough_addr], top)? {
        systems.push((system, Some(server), listen));
    }
    let body = MESSAGE.replace(
        "DELAY",
        &bench.options.downstream_delay.as_millis().to_string(),
    );
    let (think_min, think_max) = bench.options.think;
    for (system, server, listen) in &mut systems {
        for &users in &points {
            let url = format!("http://{listen}/passthrough/message");
            let mut config = LoadConfig::new(&[(http::Method::POST, url)])
                .map_err(|err| anyhow::anyhow!("{err}"))?;
            config.connections = users;
            config.duration = bench.profile.io_duration;
            config.warmup = bench.profile.io_warmup;
            config.ramp = bench.profile.io_warmup;
            config.think = Some(load::ThinkTime {
                min: think_min,
                max: think_max,
            });
            config.timeout = SWEEP_TIMEOUT;
            config.body = body.clone().into();
            config.headers = vec![header("content-type", "application/json")?];
            let label = if system == "backend" {
                format!("passthrough alone @ {users}")
            } else {
                format!("{system} -> passthrough @ {users}")
            };
            let spec = RowSpec::new(label, system, config).sweep("users", users as f64);
            let mut all: Vec<&mut Component> = Vec::new();
            if let Some(server) = server.as_mut() {
                all.push(server);
            }
            all.push(&mut passthrough);
            all.push(&mut downstream);
            group.rows.push(bench.measure("io", spec, &mut all)?);
        }
    }
    Ok(group)
}

/// Question 5 and seeds/004: an open arrival rate on `customers`, the
/// first run after a start (cold) and the next (warm).
fn open(bench: &mut Bench<'_>) -> anyhow::Result<Group> {
    let mut group = begin(
        bench,
        GroupName::Open,
        "Open arrival rate on customers",
        "At a fixed arrival rate, what latency do clients see right after a start (cold) and once warm?",
    );
    let rates = bench.options.open_rates();
    let (mut backend, backend_addr) = bench.serve("customers", &[], false)?;
    let mut systems: Vec<Option<Peer>> = vec![None];
    systems.extend(bench.peers.clone().into_iter().map(Some));
    // The backend alone first, on a fresh process per rate.
    for &rate in &rates {
        let (mut fresh, addr) = bench.serve("customers", &[], true)?;
        for phase in ["cold", "warm"] {
            let spec = open_spec(bench, "backend", "customers alone", addr, rate, phase)?;
            group
                .rows
                .push(bench.measure("open", spec, &mut [&mut fresh])?);
        }
    }
    for system in systems {
        for &rate in &rates {
            let listen = bench.port()?;
            let mut server = match &system {
                None => {
                    let yaml = one_route_yaml(listen, &[backend_addr], bench.options.connections);
                    bench.sluice_proxy(&format!("sluice proxy (open {rate})"), &yaml, &[listen])?
                }
                Some(peer) => {
                    let site = plain_proxy_site(
                        listen,
                        std::slice::from_ref(&backend_addr),
                        bench.options.connections,
                    );
                    let name = format!("{} open {rate}", peer.kind.name());
                    match peer_component(bench, &mut group, peer, &name, &site, listen)? {
                        Some(server) => server,
                        None => break,
                    }
                }
            };
            let name = system.as_ref().map_or("sluice", |p| p.kind.name());
            for phase in ["cold", "warm"] {
                let spec = open_spec(
                    bench,
                    name,
                    &format!("{name} -> customers"),
                    listen,
                    rate,
                    phase,
                )?;
                group
                    .rows
                    .push(bench.measure("open", spec, &mut [&mut server, &mut backend])?);
            }
        }
    }
    Ok(group)
}

fn open_spec(
    bench: &Bench<'_>,
    system: &str,
    label: &str,
    addr: SocketAddr,
    rate: f64,
    phase: &str,
) -> anyhow::Result<RowSpec> {
    // Cold means no warm-up at all: the first requests are measured.
    let mut config = load_config(
        &format!("http://{addr}/customers"),
        bench.options.connections,
        bench.profile.duration,
        Duration::ZERO,
    )?;
    config.rate = Some(rate);
    config.timeout = SWEEP_TIMEOUT;
    Ok(
        RowSpec::new(format!("{label} @ {rate} req/s, {phase}"), system, config)
            .sweep("rate", rate)
            .phase(phase),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_for_scenarios() {
        assert_eq!(host_of("default chain"), "default-chain");
        assert_eq!(host_of("ip_filter"), "ip-filter");
    }
}
