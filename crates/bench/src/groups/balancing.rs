//! The load-balancing groups (docs/LOAD-BALANCING.md): `lb`, seeds/002's
//! round robin over five backends across a concurrency sweep, with
//! sluice's other policies at the sweep's first point; and `lb-slow`,
//! five backends one of which answers `--slow-delay` later, where a
//! policy that avoids the slow host keeps p99 low.

use std::net::SocketAddr;

use super::{begin, peer_component, proxies, sluice_yaml, upstream_yaml, SWEEP_TIMEOUT};
use crate::{
    machine::PeerKind,
    measure::{load_config, RowSpec},
    options::{GroupName, Profile},
    peers::{ProxySite, Site},
    process::Component,
    rounds::{Trial, Window},
    stage::Bench,
};

/// sluice's policies besides round robin, each with its upstream keys.
/// `hash` hashes the path, which is the same for every request, so its
/// bounded load is what spreads them.
const POLICIES: &[(&str, &str)] = &[
    ("random", "    balance: random\n"),
    ("least_request", "    balance: least_request\n"),
    ("least_time", "    balance: least_time\n"),
    (
        "hash",
        "    balance: hash\n    hash: { key: path, bounded_load: 1.25 }\n",
    ),
];

/// The lb-slow group's sluice policies.
const SLOW_POLICIES: &[(&str, &str)] = &[
    ("round_robin", ""),
    ("least_request", "    balance: least_request\n"),
    ("least_time", "    balance: least_time\n"),
];

/// The measurement: `wrk -t1 -c32` over five hosts.
pub(super) const SLOW_CONNECTIONS: usize = 32;

/// Question 6 (seeds/002): round robin over five 1 KB backends, across a
/// concurrency sweep; sluice's other policies at the first point.
pub(super) fn lb(bench: &mut Bench<'_>) -> anyhow::Result<()> {
    let mut group = begin(
        bench,
        GroupName::Lb.as_str(),
        "Load balancing over 5 backends",
        "How does round robin over five 1 KB backends hold up from hundreds to thousands of connections, and what do the other policies cost?",
    );
    let points = bench.capped("lb", bench.options.lb_points());
    let top = points.iter().copied().max().unwrap_or(1);
    let (mut components, addrs) = backends(bench, None)?;
    let systems = proxies(bench, &mut group, &mut components, "lb", &addrs, top)?;
    let policies = sluice_policies(bench, &mut components, "lb", &addrs, top, POLICIES)?;
    let blocks = lb_blocks(bench, &systems, &policies, &points, &[0, 1, 2, 3, 4])?;
    let first = lb_window(&bench.profile);
    let (rows, used) =
        bench.run_blocks_in_one_window("lb", &mut components, blocks, first, &mut || {})?;
    group.rows = rows;
    group.notes.push(super::sweeps::DRAINED_NOTE.to_string());
    group.notes.push(window_note(first, used));
    bench.publish(group);
    Ok(())
}

/// The window every row of the lb group starts with, whatever its
/// system, policy or point: the run's warm-up and duration (`--quick`'s,
/// or `--warmup` and `--duration` when given). The one place it is
/// chosen; [`Bench::run_blocks_in_one_window`] lengthens it for every row
/// at once.
pub(super) fn lb_window(profile: &Profile) -> Window {
    (profile.warmup, profile.duration)
}

/// The lb group's note saying which window its rows were measured with.
fn window_note(first: Window, (warmup, measured): Window) -> String {
    let mut note = format!(
        "Every row of this group (each system and policy, at every connection count, in every \
         round) was measured for {measured:?} after a {warmup:?} warm-up"
    );
    if (warmup, measured) != first {
        note.push_str(&format!(
            ": the run's {:?} after {:?} was shorter than 3x the latency a row saw, so the whole \
             group was measured again with the longer window",
            first.1, first.0
        ));
    }
    note.push('.');
    note
}

/// The lb group's blocks: per connection count, a row for each of
/// `systems` (`(system, component, listen)`), and `policies` at the first
/// point only (each row costs a round's time), all with [`lb_window`];
/// each row waits for its target to drain. `backends` are the components
/// every row needs alive.
pub(super) fn lb_blocks(
    bench: &Bench<'_>,
    systems: &[(String, usize, SocketAddr)],
    policies: &[(String, usize, SocketAddr)],
    points: &[usize],
    backends: &[usize],
) -> anyhow::Result<Vec<Vec<Trial>>> {
    let mut blocks = Vec::new();
    for (i, &connections) in points.iter().enumerate() {
        let here = if i == 0 { policies } else { &[] };
        let mut block = Vec::new();
        for (system, index, listen) in systems.iter().chain(here) {
            let (warmup, duration) = lb_window(&bench.profile);
            let mut config = load_config(
                &format!("http://{listen}/static"),
                connections,
                duration,
                warmup,
            )?;
            config.timeout = SWEEP_TIMEOUT;
            let spec = RowSpec::new(format!("{system} @ {connections}"), system, config)
                .sweep("connections", connections as f64);
            block.push(
                Trial::new(spec, &super::sweeps::stage(*index, backends))
                    .drained()
                    .adaptive(),
            );
        }
        blocks.push(block);
    }
    Ok(blocks)
}

/// Five backends, one slower by `--slow-delay`: sluice round robin,
/// least_request and least_time against HAProxy `balance leastconn` and
/// nginx and Caddy `least_conn`, Envoy `LEAST_REQUEST` and Traefik `p2c`,
/// on p99 and throughput.
pub(super) fn lb_slow(bench: &mut Bench<'_>) -> anyhow::Result<()> {
    let delay = bench.options.slow_delay;
    let mut group = begin(
        bench,
        GroupName::LbSlow.as_str(),
        "One slow host among five",
        &format!(
            "When one of five backends answers {delay:?} later, which policy keeps p99 low at {SLOW_CONNECTIONS} connections?"
        ),
    );
    let (mut components, addrs) = backends(bench, Some(delay))?;
    let mut systems = sluice_policies(
        bench,
        &mut components,
        "lb-slow",
        &addrs,
        SLOW_CONNECTIONS,
        SLOW_POLICIES,
    )?;
    for peer in bench.peers.clone() {
        let listen = bench.port()?;
        let site = fewest_connections(listen, &addrs);
        let system = format!("{} {}", peer.kind.name(), fewest_policy(peer.kind));
        let name = format!("{system} lb-slow");
        if let Some(server) = peer_component(bench, &mut group.notes, &peer, &name, &site, listen)?
        {
            components.push(server);
            systems.push((system, components.len() - 1, listen));
        }
    }
    let mut block = Vec::new();
    for (system, index, listen) in &systems {
        let mut config = load_config(
            &format!("http://{listen}/static"),
            SLOW_CONNECTIONS,
            bench.profile.duration,
            bench.profile.warmup,
        )?;
        config.timeout = SWEEP_TIMEOUT;
        let spec = RowSpec::new(system.clone(), system, config);
        block.push(Trial::new(spec, &[*index, 0, 1, 2, 3, 4]));
    }
    group.rows = bench.run_blocks("lb-slow", &mut components, vec![block], &mut || {})?;
    bench.publish(group);
    Ok(())
}

/// A peer balancing to the host with the fewest connections (HAProxy
/// `balance leastconn`, nginx `least_conn`), the lb-slow group's peer rows.
fn fewest_connections(listen: SocketAddr, upstreams: &[SocketAddr]) -> Site<'_> {
    Site::Proxy(ProxySite {
        least_conn: true,
        ..ProxySite::plain(listen, upstreams, SLOW_CONNECTIONS)
    })
}

/// The name of the policy a peer plays lb-slow with, in its rows'
/// system: `least_conn` (HAProxy's `leastconn`, nginx's and Caddy's
/// `least_conn`), Envoy's `least_request`, Traefik's `p2c`.
fn fewest_policy(kind: PeerKind) -> &'static str {
    match kind {
        PeerKind::Envoy => "least_request",
        PeerKind::Traefik => "p2c",
        PeerKind::Haproxy | PeerKind::Nginx | PeerKind::Caddy | PeerKind::Nghttpx => "least_conn",
    }
}

/// The lb group's rows at `points` (as capped): each proxy at every
/// point, and sluice's other policies at the first.
pub(super) fn lb_rows(points: usize, peers: &[PeerKind]) -> usize {
    let policies = if points == 0 { 0 } else { POLICIES.len() };
    points * super::plain_proxies(peers) + policies
}

/// The lb-slow group's rows: sluice's policies and each peer's fewest
/// connections.
pub(super) fn lb_slow_rows(peers: &[PeerKind]) -> usize {
    let addr = SocketAddr::from(([127, 0, 0, 1], 1));
    SLOW_POLICIES.len() + super::players(peers, &fewest_connections(addr, &[addr]))
}

/// Five `static` 1 KB backends; the last answers `slow` later.
fn backends(
    bench: &mut Bench<'_>,
    slow: Option<std::time::Duration>,
) -> anyhow::Result<(Vec<Component>, Vec<SocketAddr>)> {
    let mut components = Vec::new();
    let mut addrs = Vec::new();
    for i in 0..5 {
        let mut args = vec!["--size".to_string(), "1024".to_string()];
        if let (4, Some(delay)) = (i, slow) {
            args.extend(["--delay".to_string(), format!("{}ms", delay.as_millis())]);
        }
        let (backend, addr) = bench.serve("static", &args, false)?;
        components.push(backend);
        addrs.push(addr);
    }
    Ok((components, addrs))
}

/// A sluice proxy per policy in front of `upstreams`, pushed onto
/// `components`: `(system, index in components, address)`, the system
/// named `sluice POLICY`.
fn sluice_policies(
    bench: &mut Bench<'_>,
    components: &mut Vec<Component>,
    group: &str,
    upstreams: &[SocketAddr],
    max_conns: usize,
    policies: &[(&str, &str)],
) -> anyhow::Result<Vec<(String, usize, SocketAddr)>> {
    let mut systems = Vec::new();
    for (policy, keys) in policies {
        let listen = bench.port()?;
        let yaml = sluice_yaml(
            max_conns,
            &format!(
                "listeners: [{{ address: {listen} }}]\nupstreams:\n{}routes:\n  - {{ path: /, upstream: backend }}\n",
                upstream_yaml("backend", upstreams, keys)
            ),
        );
        let system = format!("sluice {policy}");
        components.push(bench.sluice_proxy(&format!("{system} ({group})"), &yaml, &[listen])?);
        systems.push((system, components.len() - 1, listen));
    }
    Ok(systems)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        options::BenchOptions,
        rounds::{in_one_window, windowed, Ran},
        stage::Observer,
    };

    struct Quiet;
    impl Observer for Quiet {}

    const SECOND: Duration = Duration::from_secs(1);

    /// The lb group's rows as `lb` builds them (three proxies at three
    /// points, four policies at the first), measured the way
    /// `run_blocks_in_one_window` measures them, with HAProxy's window at
    /// 9,936 found too short in the first round (issue 52's run): every
    /// row, every round, ends with one window, in the default mode, with
    /// `--quick`, and with `--duration` and `--warmup` (which fix it).
    #[test]
    fn every_row_of_the_lb_group_has_the_same_window_in_every_mode() {
        let out = std::env::temp_dir().join(format!("bench-lb-window-{}", std::process::id()));
        let mut default = BenchOptions::new("sluice".into(), out.clone());
        default.only = vec![GroupName::Lb];
        let mut quick = default.clone();
        quick.quick = true;
        let mut given = default.clone();
        given.duration = Some(7 * SECOND);
        given.warmup = Some(3 * SECOND);
        let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let systems: Vec<_> = ["sluice", "haproxy", "nginx"]
            .iter()
            .enumerate()
            .map(|(i, s)| (s.to_string(), i, addr(1 + i as u16)))
            .collect();
        let policies: Vec<_> = POLICIES
            .iter()
            .enumerate()
            .map(|(i, (p, _))| (format!("sluice {p}"), 3 + i, addr(10 + i as u16)))
            .collect();
        for options in [default, quick, given] {
            let mut quiet = Quiet;
            let bench = Bench::new(&options, &mut quiet).expect("bench");
            let first = lb_window(&bench.profile);
            assert_eq!(first, (bench.profile.warmup, bench.profile.duration));
            let points = [500, 2_000, 9_936];
            let blocks = lb_blocks(&bench, &systems, &policies, &points, &[]).expect("blocks");
            for trial in blocks.iter().flatten() {
                let own = (trial.spec.load.warmup, trial.spec.load.duration);
                assert_eq!(own, first, "{}", trial.spec.label);
            }
            let shape: Vec<Vec<usize>> = blocks.iter().map(|b| vec![0; b.len()]).collect();
            let fixed = options.duration.is_some();
            let longer = (2 * SECOND, 4 * SECOND);
            let rounds = options.rounds();
            let (samples, used) = in_one_window(&shape, rounds, Some(first), |run| {
                let spec = windowed(&blocks[run.block][run.row].spec, run.window);
                let window = (spec.load.warmup, spec.load.duration);
                let short = spec.label == "haproxy @ 9936" && window.1 < longer.1;
                if short && !fixed {
                    return Ok(Ran::Longer(longer));
                }
                Ok(Ran::Sample((spec.label, run.round.index, window)))
            })
            .expect("the rounds");
            let expected = if fixed { first } else { longer };
            assert_eq!(used, Some(expected));
            let samples: Vec<_> = samples.into_iter().flatten().flatten().collect();
            assert_eq!(samples.len(), 13 * rounds);
            for (label, round, window) in samples {
                assert_eq!(window, expected, "{label}, round {round}");
            }
        }
        let _ = std::fs::remove_dir_all(&out);
    }

    #[test]
    fn the_note_says_which_window_the_rows_had() {
        let first = (SECOND / 2, 2 * SECOND);
        assert_eq!(
            window_note(first, first),
            "Every row of this group (each system and policy, at every connection count, in \
             every round) was measured for 2s after a 500ms warm-up."
        );
        let note = window_note(first, (2 * SECOND, 4 * SECOND));
        assert!(
            note.contains("measured for 4s after a 2s warm-up: the run's 2s after 500ms"),
            "{note}"
        );
    }
}
