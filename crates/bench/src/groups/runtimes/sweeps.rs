//! The sweep sections: seeds/003's users with think time in front of a
//! slow downstream, and seeds/004's open arrival rate, cold and warm.

use super::{section, start, Section, Server, Skipped, OPEN_RUNTIMES};
use crate::{
    groups::{
        one_route_yaml,
        sweeps::{cold_and_warm, message, open_load, users_config, Standing, DRAINED_NOTE},
    },
    measure::RowSpec,
    rounds::Trial,
    runtimes::Service,
    stage::Bench,
};

pub(super) const IO: Section = Section {
    name: "runtimes-io",
    title: "Blocking vs non-blocking passthrough (seeds/003)",
    question: "With users who think between requests in front of a slow downstream, what p95 \
               and how many failures do Spring MVC (blocking) and WebFlux (non-blocking) show, \
               alone and behind sluice?",
    service: Service::Passthrough,
    among: None,
};

pub(super) const OPEN: Section = Section {
    name: "runtimes-open",
    title: "Customers at an open arrival rate, cold and warm (seeds/004)",
    question: "At a fixed arrival rate, what latency do Grizzly, Spring MVC and Payara Micro \
               show on a fresh JVM (cold: its first run) and on the next run (warm)?",
    service: Service::Customers,
    among: Some(&OPEN_RUNTIMES),
};

/// seeds/003: users posting to each passthrough (Spring MVC blocking on
/// its RestClient, WebFlux on WebClient, and `sluice serve passthrough` as
/// the reference), alone and, for the runtimes, behind sluice; every one
/// forwards to one `sluice serve downstream` that waits
/// `--downstream-delay`. A block per user count.
pub(super) fn io(
    bench: &mut Bench<'_>,
    servers: &[Server],
    skipped: &Skipped,
) -> anyhow::Result<()> {
    let Some(mut group) = section(bench, &IO, servers, skipped) else {
        return Ok(());
    };
    let points = bench.capped("runtimes-io", bench.options.io_points());
    let top = points.iter().copied().max().unwrap_or(1);
    let (downstream, downstream_addr) = bench.serve("downstream", &[], false)?;
    let mut components = vec![downstream];
    // (server, system, where the load goes, the stage's components)
    let mut systems = Vec::new();
    for server in servers.iter().filter(|s| IO.measures(s)) {
        let (backend, addr) = start(
            bench,
            server,
            Service::Passthrough,
            Some(downstream_addr),
            false,
        )?;
        components.push(backend);
        let backend_index = components.len() - 1;
        systems.push((server, "backend", addr, vec![backend_index, 0]));
        if server.runtime().is_none() {
            continue;
        }
        let listen = bench.port()?;
        let yaml = one_route_yaml(listen, &[addr], top);
        let name = format!("sluice proxy (passthrough {})", server.name());
        components.push(bench.sluice_proxy(&name, &yaml, &[listen])?);
        let stage = vec![components.len() - 1, backend_index, 0];
        systems.push((server, "sluice", listen, stage));
    }
    let body = message(bench);
    let mut blocks = Vec::new();
    for &users in &points {
        let mut block = Vec::new();
        for (server, system, listen, stage) in &systems {
            let label = match *system {
                "backend" => format!("{} passthrough @ {users}", server.name()),
                _ => format!("{system} -> {} passthrough @ {users}", server.name()),
            };
            let spec = RowSpec::new(label, system, users_config(bench, *listen, users, &body)?)
                .sweep("users", users as f64)
                .on(server.info(), server.warmup_rounds());
            block.push(Trial::new(spec, stage).drained().adaptive());
        }
        blocks.push(block);
    }
    group.rows = bench.run_blocks(&group.name, &mut components, blocks, &mut || {})?;
    group.notes.push(DRAINED_NOTE.to_string());
    bench.publish(group);
    Ok(())
}

impl Standing for Server {
    /// Every backend of seeds/004 is loaded directly.
    fn stands_alone(&self) -> bool {
        true
    }
}

/// seeds/004: `GET /customers` at each rate against Grizzly, Spring MVC,
/// Payara Micro and `sluice serve customers`, each started afresh per
/// rate and round: its first run measured (cold), then the next (warm).
/// No round is discarded: the first run after a start is the point.
pub(super) fn open(
    bench: &mut Bench<'_>,
    servers: &[Server],
    skipped: &Skipped,
) -> anyhow::Result<()> {
    let Some(mut group) = section(bench, &OPEN, servers, skipped) else {
        return Ok(());
    };
    let servers: Vec<Server> = servers
        .iter()
        .filter(|s| OPEN.measures(s))
        .cloned()
        .collect();
    let rates = bench.options.open_rates();
    let rows = cold_and_warm(
        bench,
        &mut group,
        &servers,
        &rates,
        None,
        |bench, _notes, server, _rate| {
            start(bench, server, Service::Customers, None, true).map(Some)
        },
        |bench, server, addr, rate, phase| {
            Ok(RowSpec::new(
                format!("{} customers @ {rate} req/s, {phase}", server.name()),
                "backend",
                open_load(bench, addr, rate)?,
            )
            .on(server.info(), 0))
        },
    )?;
    group.rows = rows;
    bench.publish(group);
    Ok(())
}
