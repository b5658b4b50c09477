//! The runtimes group: each seed's table measured against the seeds' own
//! backends (bench/runtimes: Spring MVC, WebFlux, Go, Node, Grizzly,
//! Payara Micro, built on first use), side by side with `sluice serve`,
//! sluice and the peers. It publishes one group per seed:
//! `runtimes-hello` (seeds/001), `runtimes-petstore` (seeds/000 Q5),
//! `runtimes-io` (seeds/003) and `runtimes-open` (seeds/004).
//!
//! JVM warm-up: a row whose backend runs on a JVM first runs one whole
//! round (warm-up and measured time) that is discarded, as the seeds
//! discarded their first run; the cold and warm rows of seeds/004 are
//! the exception, since there the first run after a start is the point.

mod sweeps;
mod throughput;

use std::{net::SocketAddr, time::Duration, time::Instant};

use crate::{
    machine::Peer,
    process::{Component, Launch, Probe},
    results::{Group, RuntimeInfo},
    runtimes::{default_cache_dir, prepare, Built, Outcome, Runtime, Service, Toolchains},
    stage::Bench,
};

use super::ROW_OVERHEAD;

/// seeds/004 compared Grizzly, Spring Boot and Payara Micro (WebFlux
/// serves the customers too, but no seed measured it there).
const OPEN_RUNTIMES: [Runtime; 3] = [Runtime::Grizzly, Runtime::SpringMvc, Runtime::Payara];

/// A backend of the runtimes groups.
#[derive(Debug, Clone)]
enum Server {
    /// `sluice serve`: the reference every seed table is read against.
    Sluice,
    Runtime(Built),
}

impl Server {
    fn name(&self) -> &str {
        match self {
            Server::Sluice => "sluice serve",
            Server::Runtime(built) => built.runtime.name(),
        }
    }

    fn runtime(&self) -> Option<Runtime> {
        match self {
            Server::Sluice => None,
            Server::Runtime(built) => Some(built.runtime),
        }
    }

    /// Rounds to run and discard before the measured ones: one on a JVM.
    fn warmup_rounds(&self) -> usize {
        usize::from(self.runtime().is_some_and(Runtime::is_jvm))
    }

    fn info(&self) -> RuntimeInfo {
        match self {
            Server::Sluice => RuntimeInfo {
                name: self.name().to_string(),
                version: format!("sluice {}", env!("CARGO_PKG_VERSION")),
                framework: "crates/backends (tokio, hand-written HTTP/1.1)".into(),
            },
            Server::Runtime(built) => RuntimeInfo {
                name: self.name().to_string(),
                version: built.runtime_version.clone(),
                framework: built.framework.clone(),
            },
        }
    }
}

/// A peer answering the same bytes itself, as a row's backend.
fn peer_info(peer: &Peer) -> RuntimeInfo {
    RuntimeInfo {
        name: peer.kind.name().to_string(),
        version: format!("{} {}", peer.kind.name(), peer.version),
        framework: "a static response in its config".into(),
    }
}

/// The seed backends that could not be measured here, with the one-line
/// note that says why.
#[derive(Debug, Default)]
struct Skipped(Vec<(Runtime, String)>);

impl Skipped {
    /// The notes of the skipped runtimes among `wanted`.
    fn notes(&self, wanted: &[Runtime]) -> Vec<String> {
        self.0
            .iter()
            .filter(|(runtime, _)| wanted.contains(runtime))
            .map(|(_, note)| note.clone())
            .collect()
    }
}

/// The group: builds (or finds) each runtime asked for, then measures the
/// four seeds' sections in turn, each with its own components.
pub(super) fn runtimes(bench: &mut Bench<'_>) -> anyhow::Result<()> {
    let (servers, skipped) = servers(bench);
    throughput::hello(bench, &servers, &skipped)?;
    throughput::petstore(bench, &servers, &skipped)?;
    sweeps::io(bench, &servers, &skipped)?;
    sweeps::open(bench, &servers, &skipped)
}

/// `sluice serve`, then each runtime asked for that is ready: built now
/// or before, its build's progress shown. A missing toolchain or a build
/// that fails skips the runtime with a note.
fn servers(bench: &mut Bench<'_>) -> (Vec<Server>, Skipped) {
    let toolchains = Toolchains::detect();
    let cache = default_cache_dir();
    let mut servers = vec![Server::Sluice];
    let mut skipped = Skipped::default();
    let asked = bench.options.runtimes.clone();
    for runtime in Runtime::ALL.into_iter().filter(|r| asked.contains(r)) {
        let observer = &mut *bench.observer;
        match prepare(runtime, &toolchains, &cache, &mut |event| {
            observer.build(event)
        }) {
            Ok(Outcome::Ready(built)) => servers.push(Server::Runtime(built)),
            Ok(Outcome::Skipped(note)) => skipped.0.push((runtime, note)),
            // The context names the build and where its log is kept.
            Err(err) => skipped
                .0
                .push((runtime, format!("{runtime} skipped: {err}"))),
        }
    }
    for (_, note) in &skipped.0 {
        bench.note(note.clone());
    }
    (servers, skipped)
}

/// A seed's section: its results group and what it measures.
#[derive(Debug)]
struct Section {
    name: &'static str,
    title: &'static str,
    question: &'static str,
    /// The endpoint it loads: it measures the runtimes that serve it...
    service: Service,
    /// ...among these when the seed named its own.
    among: Option<&'static [Runtime]>,
}

impl Section {
    /// The runtimes of this seed, whether or not they are here.
    fn wanted(&self) -> Vec<Runtime> {
        Runtime::ALL
            .into_iter()
            .filter(|r| r.serves(self.service))
            .filter(|r| self.among.is_none_or(|among| among.contains(r)))
            .collect()
    }

    /// Whether the section measures `server` (`sluice serve` always).
    fn measures(&self, server: &Server) -> bool {
        server.runtime().is_none_or(|r| self.wanted().contains(&r))
    }
}

/// Starts a section: its group, with the notes of the runtimes it misses;
/// `None` (the group published with a note) when none of them is here.
fn section(
    bench: &mut Bench<'_>,
    section: &Section,
    servers: &[Server],
    skipped: &Skipped,
) -> Option<Group> {
    let wanted = section.wanted();
    let mut group = super::begin(bench, section.name, section.title, section.question);
    group.notes.extend(skipped.notes(&wanted));
    let here = servers
        .iter()
        .any(|s| s.runtime().is_some_and(|r| wanted.contains(&r)));
    if here {
        return Some(group);
    }
    let names: Vec<&str> = wanted.iter().map(|r| r.name()).collect();
    group.notes.push(format!(
        "none of this seed's runtimes ({}) was asked for (--runtimes) or could be built",
        names.join(", ")
    ));
    bench.publish(group);
    None
}

/// Starts `server` answering `service` (a passthrough forwards to
/// `downstream`), placed as the system under test when `sut`. A runtime
/// is ready once its ready path answers 200.
fn start(
    bench: &mut Bench<'_>,
    server: &Server,
    service: Service,
    downstream: Option<SocketAddr>,
    sut: bool,
) -> anyhow::Result<(Component, SocketAddr)> {
    let downstream = downstream.map(|addr| format!("http://{addr}"));
    let built = match server {
        Server::Sluice => {
            let args = service.serve_args();
            let mut extra = args[1..].to_vec();
            if let Some(url) = downstream {
                extra.extend(["--downstream".to_string(), url]);
            }
            return bench.serve(&args[0], &extra, sut);
        }
        Server::Runtime(built) => built,
    };
    let runtime = built.runtime;
    let addr = bench.port()?;
    let command = built.command(addr.port(), downstream.as_deref());
    let name = format!("{runtime} ({addr})");
    let started = Instant::now();
    let component = Component::start(Launch {
        log: bench.log(&name),
        name: name.clone(),
        program: &command.program,
        args: command.args,
        env: Vec::new(),
        cpus: bench.cpus(sut),
        listens: vec![addr],
        probe: Some(Probe {
            path: runtime.ready_path().to_string(),
            timeout: runtime.start_timeout(),
        }),
    })?;
    bench.observer.runtime_ready(&name, started.elapsed());
    Ok((component, addr))
}

/// How long a runtime usually takes to answer after its start on a busy
/// 2-core machine (measured in phase 1: Spring Boot about 7 s, Payara
/// Micro about 25 s), for the run's estimate only.
fn usual_start(runtime: Runtime) -> Duration {
    Duration::from_millis(match runtime {
        Runtime::GoHttp | Runtime::Node => 300,
        Runtime::Grizzly => 3_000,
        Runtime::SpringMvc | Runtime::Webflux => 8_000,
        Runtime::Payara => 25_000,
    })
}

/// How long the group should take once every runtime is built: each
/// section's rows for every round, the JVM rows' discarded round, and
/// each start (one per section, one per rate and round for seeds/004).
/// First builds (minutes for the JVM apps) are not counted.
pub(super) fn expected(outline: &super::Outline<'_>) -> Duration {
    let options = outline.options;
    let profile = outline.profile;
    let asked = |section: &Section| -> Vec<Runtime> {
        section
            .wanted()
            .into_iter()
            .filter(|r| options.runtimes.contains(r))
            .collect()
    };
    let jvms = |runtimes: &[Runtime]| runtimes.iter().filter(|r| r.is_jvm()).count();
    let starts = |runtimes: &[Runtime]| runtimes.iter().map(|&r| usual_start(r)).sum::<Duration>();
    let rounds = options.rounds() as u32;
    // Peers that answer the hello bytes themselves, and peers in front.
    let addr = SocketAddr::from(([127, 0, 0, 1], 1));
    let peers = super::players(&outline.peers, &throughput::hello_site(addr));
    let proxies = super::plain_proxies(&outline.peers) - 1;
    let throughput = profile.warmup + profile.duration + ROW_OVERHEAD;
    let io = profile.io_warmup + profile.io_duration + ROW_OVERHEAD;
    let open = profile.duration + ROW_OVERHEAD;

    let hello = asked(&throughput::HELLO);
    let mut total = throughput * ((1 + hello.len() + peers) as u32 * rounds + jvms(&hello) as u32)
        + starts(&hello);
    let petstore = asked(&throughput::PETSTORE);
    let per_backend = 2 + proxies;
    total += throughput
        * (((1 + petstore.len()) * per_backend) as u32 * rounds
            + (jvms(&petstore) * per_backend) as u32)
        + starts(&petstore);
    let passthrough = asked(&sweeps::IO);
    let points = outline.capped(options.io_points()).len() as u32;
    if !passthrough.is_empty() {
        let rows = (1 + 2 * passthrough.len()) as u32;
        let discarded = (2 * jvms(&passthrough)) as u32;
        total += io * points * (rows * rounds + discarded) + starts(&passthrough);
    }
    let cold = asked(&sweeps::OPEN);
    if !cold.is_empty() {
        let rates = options.open_rates().len() as u32;
        let rows = (2 * (1 + cold.len())) as u32;
        total += (open * rows + starts(&cold)) * rates * rounds;
    }
    total
}
