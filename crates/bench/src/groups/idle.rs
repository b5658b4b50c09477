//! The memory question (issue 17): what an idle client connection costs
//! each proxy. For each protocol and number of connections, each system
//! starts fresh in front of the same backend, takes one request (so that
//! its upstream connection exists), then that many connections that each
//! make one request and stay open; the row's figure is the RSS rise
//! divided by the connections. RSS does not move with the machine's
//! load, so each row is measured once, not in rounds.

use std::{net::SocketAddr, time::Duration};

use load::idle::{open_idle, rss_kib, IdleProtocol};

use super::{begin, peer_component, sluice_yaml, upstream_yaml};
use crate::{
    options::GroupName,
    peers::{ProxySite, Site},
    process::{Component, Usage},
    results::{Figures, IdleMemory, LoadShape, Row},
    stage::Bench,
};

/// After the first connection opened, before RSS is read: the proxy has
/// finished its bookkeeping for the request.
const SETTLE: Duration = Duration::from_millis(300);
/// After the last connection opened, before RSS is read: the connections
/// are idle (sluice parks an HTTP/1.1 connection idle for a second: its
/// task goes).
const IDLE: Duration = Duration::from_secs(2);

/// The protocols measured, each at every point.
const PROTOCOLS: [IdleProtocol; 2] = [IdleProtocol::Http1, IdleProtocol::H2];

/// The group's rows and how long they take: each protocol at each point
/// (as capped) for sluice and each peer that plays it, each row a start,
/// the connections opened (about 0.3 ms each on two cores), a settle and
/// the idle wait; measured once, not in rounds.
pub(super) fn expected(outline: &super::Outline<'_>) -> (usize, Duration) {
    let addr = SocketAddr::from(([127, 0, 0, 1], 1));
    let mut rows = 0;
    let mut time = Duration::ZERO;
    for protocol in PROTOCOLS {
        let systems = 1 + super::players(&outline.peers, &site(addr, &[addr], protocol, 1));
        for connections in outline.capped(outline.profile.idle_points.to_vec()) {
            rows += systems;
            let each = super::ROW_OVERHEAD
                + SETTLE
                + IDLE
                + Duration::from_micros(300) * connections as u32;
            time += each * systems as u32;
        }
    }
    (rows, time)
}

pub(super) fn idle(bench: &mut Bench<'_>) -> anyhow::Result<()> {
    let mut group = begin(
        bench,
        GroupName::Idle.as_str(),
        "Memory per idle connection",
        "What does an idle keep-alive client connection cost each proxy in RSS, over HTTP/1.1 and HTTP/2?",
    );
    let points = bench.capped("idle", bench.profile.idle_points.to_vec());
    let (backend, backend_addr) =
        bench.serve("static", &["--size".into(), "1024".into()], false)?;
    let upstreams = [backend_addr];
    for protocol in PROTOCOLS {
        for &connections in &points {
            for (system, mut component, listen) in
                systems(bench, &mut group, &upstreams, protocol, connections)?
            {
                match measure(&mut component, listen, protocol, connections) {
                    Ok(memory) => {
                        let shape = (listen, protocol, connections);
                        group.rows.push(row(&system, &component, shape, memory));
                    }
                    Err(err) => group.notes.push(format!(
                        "{system} {} @ {connections}: not measured: {err:#}",
                        protocol.as_str()
                    )),
                }
                component.stop();
            }
        }
    }
    drop(backend);
    bench.publish(group);
    Ok(())
}

/// sluice and each peer, each started fresh for one row: `(system,
/// component, listen)`.
fn systems(
    bench: &mut Bench<'_>,
    group: &mut crate::results::Group,
    upstreams: &[SocketAddr],
    protocol: IdleProtocol,
    connections: usize,
) -> anyhow::Result<Vec<(String, Component, SocketAddr)>> {
    let h2 = protocol == IdleProtocol::H2;
    let listen = bench.port()?;
    let protocols = if h2 { "h2" } else { "http1" };
    let yaml = sluice_yaml(
        connections,
        &format!(
            "listeners: [{{ address: {listen}, protocols: [{protocols}] }}]\nupstreams:\n{}routes:\n  - {{ path: /, upstream: backend }}\n",
            upstream_yaml("backend", upstreams, "")
        ),
    );
    let name = format!("sluice proxy (idle {protocols} {connections})");
    let mut systems = vec![(
        "sluice".to_string(),
        bench.sluice_proxy(&name, &yaml, &[listen])?,
        listen,
    )];
    for peer in bench.peers.clone() {
        let listen = bench.port()?;
        let site = site(listen, upstreams, protocol, connections);
        let name = format!("{} idle {protocols} {connections}", peer.kind.name());
        if let Some(component) =
            peer_component(bench, &mut group.notes, &peer, &name, &site, listen)?
        {
            systems.push((peer.kind.name().to_string(), component, listen));
        }
    }
    Ok(systems)
}

/// A peer in front of `upstreams` whose clients speak `protocol` (h2c
/// with prior knowledge for HTTP/2).
fn site(
    listen: SocketAddr,
    upstreams: &[SocketAddr],
    protocol: IdleProtocol,
    connections: usize,
) -> Site<'_> {
    Site::Proxy(ProxySite {
        h2c_clients: protocol == IdleProtocol::H2,
        ..ProxySite::plain(listen, upstreams, connections)
    })
}

/// Opens the connections and reads the RSS rise; they close when it returns.
fn measure(
    component: &mut Component,
    listen: SocketAddr,
    protocol: IdleProtocol,
    connections: usize,
) -> anyhow::Result<IdleMemory> {
    let pid = component.pid();
    let open = || open_idle(listen, protocol, "idle.bench", "/");
    let _warm = open()?;
    std::thread::sleep(SETTLE);
    let before = rss_kib(pid).ok_or_else(|| anyhow::anyhow!("no /proc/{pid}/status"))?;
    let mut open_conns = Vec::with_capacity(connections);
    for _ in 0..connections {
        open_conns.push(open()?);
    }
    std::thread::sleep(IDLE);
    component.check_alive("idle connections")?;
    let after = rss_kib(pid).ok_or_else(|| anyhow::anyhow!("no /proc/{pid}/status"))?;
    Ok(IdleMemory {
        rss_before_kib: before,
        rss_idle_kib: after,
        bytes_per_connection: after.saturating_sub(before) as f64 * 1024.0 / connections as f64,
    })
}

fn row(
    system: &str,
    component: &Component,
    (listen, protocol, connections): (SocketAddr, IdleProtocol, usize),
    memory: IdleMemory,
) -> Row {
    let usage = Usage::of(component.pid());
    let figures = Figures::memory_only(component.name().to_string(), usage.peak_rss_kib);
    Row {
        label: format!("{system} {} @ {connections}", protocol.as_str()),
        system: system.to_string(),
        // The count is in the label and the load, not a sweep point: the
        // sweep charts and pivots are about load.
        sweep: None,
        phase: None,
        runtime: None,
        warmup_rounds: 0,
        load: LoadShape {
            request: format!("GET http://{listen}/, then idle"),
            protocol: protocol.as_str().to_string(),
            connections,
            pipeline: 1,
            rate: None,
            think_ms: None,
            duration_s: 0.0,
            warmup_s: 0.0,
        },
        figures: figures.clone(),
        rounds: vec![figures],
        not_comparable: Vec::new(),
        idle: Some(memory),
    }
}
