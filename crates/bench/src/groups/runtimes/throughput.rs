//! The pipelined sections: seeds/001's hello world and seeds/000's
//! question 5 (each runtime's petstore alone, then behind each proxy),
//! both under the seeds' `wrk -t4 -c128 -s pipeline.lua ... 16`.

use std::net::SocketAddr;

use load::LoadConfig;

use super::{peer_info, section, start, Section, Server, Skipped};
use crate::{
    groups::{peer_component, proxies, sweeps::DRAINED_NOTE, throughput},
    measure::RowSpec,
    peers::Site,
    rounds::Trial,
    runtimes::Service,
    stage::Bench,
};

/// Requests in flight per connection: seeds/000 and seeds/001 loaded with
/// wrk's pipeline.lua at depth 16.
pub(super) const SEED_PIPELINE: usize = 16;

/// What `sluice serve static --size 12` and every runtime answer on `GET /`.
const HELLO_BODY: &str = "abcdefghijkl";

/// The throughput rows' load on `url` (the run's connections, the seeds'
/// 128 by default, duration and warm-up; wrk's 2 s timeout), 16 deep.
fn pipelined(bench: &Bench<'_>, url: &str) -> anyhow::Result<LoadConfig> {
    let mut config = throughput(bench, url)?;
    config.pipeline = SEED_PIPELINE;
    Ok(config)
}

pub(super) const HELLO: Section = Section {
    name: "runtimes-hello",
    title: "Hello world in each runtime (seeds/001)",
    question: "How many pipelined hello-world requests (16 deep on each connection) does each \
               runtime answer, against sluice serve?",
    service: Service::Hello,
    among: None,
};

pub(super) const PETSTORE: Section = Section {
    name: "runtimes-petstore",
    title: "Each runtime's petstore, alone and behind a proxy (seeds/000 Q5)",
    question: "What does each runtime's petstore serve alone, and behind sluice and each peer \
               (behind ÷ alone)?",
    service: Service::Petstore,
    among: None,
};

/// A peer answering the hello bytes itself.
pub(super) fn hello_site(listen: SocketAddr) -> Site<'static> {
    Site::Static {
        listen,
        body: HELLO_BODY,
        content_type: "text/plain",
    }
}

/// seeds/001: the hello world of each runtime and of `sluice serve`, and
/// of the peers answering the same 12 bytes, in one rotated block.
pub(super) fn hello(
    bench: &mut Bench<'_>,
    servers: &[Server],
    skipped: &Skipped,
) -> anyhow::Result<()> {
    let Some(mut group) = section(bench, &HELLO, servers, skipped) else {
        return Ok(());
    };
    let mut components = Vec::new();
    let mut trials = Vec::new();
    for server in servers.iter().filter(|s| HELLO.measures(s)) {
        let (component, addr) = start(bench, server, Service::Hello, None, true)?;
        components.push(component);
        let spec = RowSpec::new(
            format!("{} hello", server.name()),
            "backend",
            pipelined(bench, &format!("http://{addr}/"))?,
        )
        .on(server.info(), server.warmup_rounds());
        trials.push(
            Trial::new(spec, &[components.len() - 1])
                .drained()
                .adaptive(),
        );
    }
    for peer in bench.peers.clone() {
        let listen = bench.port()?;
        let site = hello_site(listen);
        let system = peer.kind.name();
        let name = format!("{system} static hello");
        let Some(server) = peer_component(bench, &mut group.notes, &peer, &name, &site, listen)?
        else {
            continue;
        };
        components.push(server);
        let spec = RowSpec::new(
            format!("{system} hello bytes"),
            system,
            pipelined(bench, &format!("http://{listen}/"))?,
        )
        .on(peer_info(&peer), 0);
        trials.push(
            Trial::new(spec, &[components.len() - 1])
                .drained()
                .adaptive(),
        );
    }
    group.rows = bench.run_blocks(&group.name, &mut components, vec![trials], &mut || {})?;
    group.notes.push(DRAINED_NOTE.to_string());
    bench.publish(group);
    Ok(())
}

/// seeds/000 question 5: each runtime's petstore alone, then behind
/// sluice and each peer; a block per backend, so that "behind ÷
/// alone" compares rows measured back to back.
pub(super) fn petstore(
    bench: &mut Bench<'_>,
    servers: &[Server],
    skipped: &Skipped,
) -> anyhow::Result<()> {
    let Some(mut group) = section(bench, &PETSTORE, servers, skipped) else {
        return Ok(());
    };
    if !bench.options.runs(crate::options::GroupName::Peers) {
        group
            .notes
            .push("only sluice stands in front: add `peers` to --only for the peers".into());
    }
    let mut components = Vec::new();
    let mut blocks = Vec::new();
    let connections = bench.options.connections;
    for server in servers.iter().filter(|s| PETSTORE.measures(s)) {
        let (backend, addr) = start(bench, server, Service::Petstore, None, false)?;
        components.push(backend);
        let backend_index = components.len() - 1;
        let name = server.name();
        let spec = |bench: &Bench<'_>, label: String, system: &str, url: String| {
            anyhow::Ok(
                RowSpec::new(label, system, pipelined(bench, &url)?)
                    .on(server.info(), server.warmup_rounds()),
            )
        };
        let mut block = vec![Trial::new(
            spec(
                bench,
                format!("{name} petstore"),
                "backend",
                format!("http://{addr}/v1/pets"),
            )?,
            &[backend_index],
        )
        .drained()
        .adaptive()];
        let systems = proxies(
            bench,
            &mut group,
            &mut components,
            &format!("petstore {name}"),
            &[addr],
            connections,
        )?;
        for (system, index, listen) in systems {
            let label = format!("{system} -> {name} petstore");
            let url = format!("http://{listen}/v1/pets");
            block.push(
                Trial::new(spec(bench, label, &system, url)?, &[index, backend_index])
                    .drained()
                    .adaptive(),
            );
        }
        blocks.push(block);
    }
    group.rows = bench.run_blocks(&group.name, &mut components, blocks, &mut || {})?;
    group.notes.push(DRAINED_NOTE.to_string());
    bench.publish(group);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::HELLO_SIZE;

    #[test]
    fn the_peers_hello_is_sluice_serves_body() {
        assert_eq!(HELLO_BODY.len(), HELLO_SIZE);
        assert!("abcdefghijklmnopqrstuvwxyz".starts_with(HELLO_BODY));
    }
}
