//! The sweep groups (questions 5 to 7): one variable (connections, users,
//! arrival rate) stepped across its points, each point a block of rows
//! (one per system) measured in rotated rounds.

use std::{net::SocketAddr, time::Duration};

use load::LoadConfig;

use super::{
    begin, header, one_route_yaml, peer_component, plain_proxy_site, proxies, SWEEP_TIMEOUT,
};
use crate::{
    machine::{Peer, PeerKind},
    measure::{load_config, Measured, RowSpec},
    options::GroupName,
    process::Component,
    results::{Group, Row},
    rounds::{rotation, Trial},
    stage::Bench,
    stage::Round,
};

/// seeds/003's message: the downstream waits `delay` ms.
const MESSAGE: &str = r#"{"id":"1","payload":"sample payload","delay":DELAY}"#;

/// Question 7 (seeds/003): users with think time through `passthrough`
/// to a slow `downstream`, across a users sweep; p95 is the figure.
pub(super) fn io(bench: &mut Bench<'_>) -> anyhow::Result<()> {
    let mut group = begin(
        bench,
        GroupName::Io.as_str(),
        "IO-heavy passthrough",
        "With users who think 1-2 s between requests, in front of a 300 ms downstream, what is p95 from hundreds to thousands of users?",
    );
    let points = bench.capped("io", bench.options.io_points());
    let (downstream, downstream_addr) = bench.serve("downstream", &[], false)?;
    let (passthrough, passthrough_addr) = bench.serve(
        "passthrough",
        &["--downstream".into(), format!("http://{downstream_addr}")],
        false,
    )?;
    let mut components = vec![downstream, passthrough];
    let top = points.iter().copied().max().unwrap_or(1);
    // The backend alone is measured on the passthrough itself.
    let mut systems = vec![("backend".to_string(), 1, passthrough_addr)];
    systems.extend(proxies(
        bench,
        &mut group,
        &mut components,
        "io",
        &[passthrough_addr],
        top,
    )?);
    let body = message(bench);
    let blocks = io_blocks(bench, &systems, &points, &body, &[1, 0])?;
    group.rows = bench.run_blocks("io", &mut components, blocks, &mut || {})?;
    group.notes.push(DRAINED_NOTE.to_string());
    bench.publish(group);
    Ok(())
}

/// What the saturating groups did so that no row inherits a backlog or
/// is cut shorter than its latency.
pub(super) const DRAINED_NOTE: &str = "Before each row the bench waited until the row's target \
     (and the previous row's) answered the row's own request within half again its unloaded \
     latency (at most 60 s), so that no row inherits the backlog of the one before; the rows' \
     order rotates each round. A row whose window was shorter than 3x the latency it saw got a \
     longer one (unless --duration fixed the windows), and so did every row sharing its window \
     (its connection or user count; in lb every row), all measured again from the first round, \
     so that no two rows compared were measured over different windows; one still too short, \
     or started on a target that never drained, is marked not comparable.";

/// The io group's blocks: per user count, a row for each of `systems`
/// (`(system, component, listen)`; `backend` is the passthrough alone),
/// each waiting for its target to drain, its window lengthened to its
/// latency; `supporting` are the components every row needs alive (the
/// passthrough, the downstream).
pub(super) fn io_blocks(
    bench: &Bench<'_>,
    systems: &[(String, usize, SocketAddr)],
    points: &[usize],
    body: &str,
    supporting: &[usize],
) -> anyhow::Result<Vec<Vec<Trial>>> {
    let mut blocks = Vec::new();
    for &users in points {
        let mut block = Vec::new();
        for (system, index, listen) in systems {
            let config = users_config(bench, *listen, users, body)?;
            let label = if system == "backend" {
                format!("passthrough alone @ {users}")
            } else {
                format!("{system} -> passthrough @ {users}")
            };
            let spec = RowSpec::new(label, system, config).sweep("users", users as f64);
            block.push(
                Trial::new(spec, &stage(*index, supporting))
                    .drained()
                    .adaptive(),
            );
        }
        blocks.push(block);
    }
    Ok(blocks)
}

/// The system under test first, then the components it stands on.
pub(super) fn stage(sut: usize, supporting: &[usize]) -> Vec<usize> {
    std::iter::once(sut)
        .chain(supporting.iter().copied().filter(|&c| c != sut))
        .collect()
}

/// The io group's rows at `points` (as capped): the passthrough alone,
/// sluice and each peer in front of it, at every point.
pub(super) fn io_rows(points: usize, peers: &[PeerKind]) -> usize {
    points * (1 + super::plain_proxies(peers))
}

/// The open group's rows: cold and warm, at every rate, for the backend
/// alone, sluice and each peer.
pub(super) fn open_rows(rates: usize, peers: &[PeerKind]) -> usize {
    rates * 2 * (1 + super::plain_proxies(peers))
}

/// seeds/003's message with the run's downstream delay.
pub(super) fn message(bench: &Bench<'_>) -> String {
    MESSAGE.replace(
        "DELAY",
        &bench.options.downstream_delay.as_millis().to_string(),
    )
}

/// `users` users posting the message to `listen`, thinking between answers.
pub(super) fn users_config(
    bench: &Bench<'_>,
    listen: SocketAddr,
    users: usize,
    body: &str,
) -> anyhow::Result<LoadConfig> {
    let url = format!("http://{listen}/passthrough/message");
    let mut config =
        LoadConfig::new(&[(http::Method::POST, url)]).map_err(|err| anyhow::anyhow!("{err}"))?;
    config.connections = users;
    config.duration = bench.profile.io_duration;
    config.warmup = bench.profile.io_warmup;
    config.ramp = bench.profile.io_warmup;
    let (min, max) = bench.options.think;
    config.think = Some(load::ThinkTime { min, max });
    config.timeout = SWEEP_TIMEOUT;
    config.body = body.to_string().into();
    config.headers = vec![header("content-type", "application/json")?];
    Ok(config)
}

/// Question 5 and seeds/004: an open arrival rate on `customers`, the
/// first run after a start (cold) and the next (warm). Every round starts
/// each system afresh, so that each round has a cold run.
pub(super) fn open(bench: &mut Bench<'_>) -> anyhow::Result<()> {
    let mut group = begin(
        bench,
        GroupName::Open.as_str(),
        "Open arrival rate on customers",
        "At a fixed arrival rate, what latency do clients see right after a start (cold) and once warm?",
    );
    let rates = bench.options.open_rates();
    let (mut backend, backend_addr) = bench.serve("customers", &[], false)?;
    let mut systems: Vec<System> = vec![System::Alone, System::Sluice];
    systems.extend(bench.peers.clone().into_iter().map(System::Peer));
    let rows = cold_and_warm(
        bench,
        &mut group,
        &systems,
        &rates,
        Some(&mut backend),
        |bench, notes, system, rate| start_fresh(bench, notes, system, rate, backend_addr),
        |bench, system, addr, rate, phase| {
            let name = system.name();
            let label = match system {
                System::Alone => "customers alone".to_string(),
                _ => format!("{name} -> customers"),
            };
            Ok(RowSpec::new(
                format!("{label} @ {rate} req/s, {phase}"),
                name,
                open_load(bench, addr, rate)?,
            ))
        },
    )?;
    group.rows = rows;
    bench.publish(group);
    Ok(())
}

/// What a fresh system of [`cold_and_warm`] is: its process and where it
/// listens; `None` when it cannot play the part (a note says why).
pub(super) type Fresh = Option<(Component, SocketAddr)>;

/// The open model's rows, per rate: in each round every system, in rotated
/// order, is started afresh and measured twice, cold (the first run after
/// its start) then warm (the next run), neither with a warm-up. `spec`
/// labels a row (its sweep point and phase are set here); a system that
/// `stands_alone` is loaded directly, any other in front of `upstream`,
/// which must live through its rows. `start` may leave a note in the
/// group's notes (said once however many rounds say it).
pub(super) fn cold_and_warm<S: Standing>(
    bench: &mut Bench<'_>,
    group: &mut Group,
    systems: &[S],
    rates: &[f64],
    mut upstream: Option<&mut Component>,
    mut start: impl FnMut(&mut Bench<'_>, &mut Vec<String>, &S, f64) -> anyhow::Result<Fresh>,
    spec: impl Fn(&Bench<'_>, &S, SocketAddr, f64, &str) -> anyhow::Result<RowSpec>,
) -> anyhow::Result<Vec<Row>> {
    let rounds = bench.options.rounds();
    let mut rows = Vec::new();
    for &rate in rates {
        // Per system: its cold row and its warm row.
        let mut measured: Vec<[Option<Measured>; 2]> =
            systems.iter().map(|_| [None, None]).collect();
        for index in 0..rounds {
            let round = Round::measured(index, rounds);
            for i in rotation(systems.len(), index) {
                let system = &systems[i];
                let Some((mut server, addr)) = start(bench, &mut group.notes, system, rate)? else {
                    continue;
                };
                for (row, phase) in measured[i].iter_mut().zip(["cold", "warm"]) {
                    let spec = spec(bench, system, addr, rate, phase)?
                        .sweep("rate", rate)
                        .phase(phase);
                    let mut stage: Vec<&mut Component> = vec![&mut server];
                    if !system.stands_alone() {
                        stage.extend(upstream.as_deref_mut());
                    }
                    let sample = bench.sample(&group.name, &spec, round, &mut stage)?;
                    row.get_or_insert_with(|| Measured::new(spec)).add(sample);
                }
            }
        }
        for row in measured.into_iter().flatten().flatten() {
            rows.extend(row.finish());
        }
    }
    // A system that cannot play the part says so once, not once a round.
    let mut seen = std::collections::HashSet::new();
    group.notes.retain(|note| seen.insert(note.clone()));
    Ok(rows)
}

/// Whether a system of [`cold_and_warm`] is loaded directly.
pub(super) trait Standing {
    fn stands_alone(&self) -> bool;
}

/// Who the open group measures.
#[derive(Debug, Clone)]
enum System {
    /// The backend alone, loaded directly.
    Alone,
    Sluice,
    Peer(Peer),
}

impl Standing for System {
    fn stands_alone(&self) -> bool {
        matches!(self, System::Alone)
    }
}

impl System {
    fn name(&self) -> &'static str {
        match self {
            System::Alone => "backend",
            System::Sluice => "sluice",
            System::Peer(peer) => peer.kind.name(),
        }
    }
}

/// A fresh process of `system` (in front of `backend` unless alone) and
/// where it listens; `None` when a peer cannot play the part.
fn start_fresh(
    bench: &mut Bench<'_>,
    notes: &mut Vec<String>,
    system: &System,
    rate: f64,
    backend: SocketAddr,
) -> anyhow::Result<Fresh> {
    match system {
        System::Alone => bench.serve("customers", &[], true).map(Some),
        System::Sluice => {
            let listen = bench.port()?;
            let yaml = one_route_yaml(listen, &[backend], bench.options.connections);
            let name = format!("sluice proxy (open {rate})");
            Ok(Some((bench.sluice_proxy(&name, &yaml, &[listen])?, listen)))
        }
        System::Peer(peer) => {
            let listen = bench.port()?;
            let site = plain_proxy_site(
                listen,
                std::slice::from_ref(&backend),
                bench.options.connections,
            );
            let name = format!("{} open {rate}", peer.kind.name());
            Ok(peer_component(bench, notes, peer, &name, &site, listen)?.map(|c| (c, listen)))
        }
    }
}

/// `GET /customers` on `addr` at `rate`, with no warm-up: a cold row's
/// first requests are measured.
pub(super) fn open_load(
    bench: &Bench<'_>,
    addr: SocketAddr,
    rate: f64,
) -> anyhow::Result<LoadConfig> {
    let mut config = load_config(
        &format!("http://{addr}/customers"),
        bench.options.connections,
        bench.profile.duration,
        Duration::ZERO,
    )?;
    config.rate = Some(rate);
    config.timeout = SWEEP_TIMEOUT;
    Ok(config)
}
