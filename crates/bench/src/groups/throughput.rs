//! The throughput groups (questions 1 to 4): a fixed number of
//! connections, as many requests as each system answers.

use std::net::SocketAddr;

use load::Protocol;

use super::{begin, header, peer_component, sluice_yaml, throughput, upstream_yaml};
use crate::{
    machine::PeerKind,
    measure::RowSpec,
    options::GroupName,
    peers::{ProxySite, Site, TlsFiles, UpstreamProtocol},
    process::Component,
    rounds::Trial,
    stage::Bench,
};

/// Question 1.
pub(super) fn baseline(bench: &mut Bench<'_>) -> anyhow::Result<()> {
    let mut group = begin(
        bench,
        GroupName::Baseline.as_str(),
        "Backend alone",
        "What is the baseline throughput and latency of the backend alone?",
    );
    let (backend, addr) = bench.serve("petstore", &[], true)?;
    let mut components = vec![backend];
    let mut trials = vec![Trial::new(
        RowSpec::new(
            "petstore (sluice serve)",
            "backend",
            throughput(bench, &format!("http://{addr}/v1/pets"))?,
        ),
        &[0],
    )];
    for peer in bench.peers.clone() {
        let listen = bench.port()?;
        let site = petstore_bytes(listen);
        let name = format!("{} static petstore", peer.kind.name());
        let Some(server) = peer_component(bench, &mut group.notes, &peer, &name, &site, listen)?
        else {
            continue;
        };
        components.push(server);
        trials.push(Trial::new(
            RowSpec::new(
                format!("petstore bytes ({})", peer.kind.name()),
                peer.kind.name(),
                throughput(bench, &format!("http://{listen}/v1/pets"))?,
            ),
            &[components.len() - 1],
        ));
    }
    group.rows = bench.run_blocks("baseline", &mut components, vec![trials], &mut || {})?;
    bench.publish(group);
    Ok(())
}

/// A peer answering the petstore's bytes itself (the baseline's peer rows).
pub(super) fn petstore_bytes(listen: SocketAddr) -> Site<'static> {
    Site::Static {
        listen,
        body: backends::PETS,
        content_type: "application/json",
    }
}

/// Question 2: the same backend behind each proxy, nothing else on the path.
pub(super) fn proxy(bench: &mut Bench<'_>) -> anyhow::Result<()> {
    let mut group = begin(
        bench,
        GroupName::Proxy.as_str(),
        "Proxy in front of the backend",
        "What does adding the proxy in front of the backend cost?",
    );
    let (backend, backend_addr) = bench.serve("petstore", &[], false)?;
    let mut components = vec![backend];
    let connections = bench.options.connections;
    let systems = super::proxies(
        bench,
        &mut group,
        &mut components,
        "proxy",
        &[backend_addr],
        connections,
    )?;
    let mut trials = Vec::new();
    for (system, index, listen) in systems {
        let spec = RowSpec::new(
            format!("{system} -> petstore"),
            &system,
            throughput(bench, &format!("http://{listen}/v1/pets"))?,
        );
        trials.push(Trial::new(spec, &[index, 0]));
    }
    group.rows = bench.run_blocks("proxy", &mut components, vec![trials], &mut || {})?;
    bench.publish(group);
    Ok(())
}

/// Connections and streams per connection of the HTTP/2- and HTTP/3-client rows.
const H2_CONNECTIONS: usize = 16;
const H2_STREAMS: usize = 32;

/// What the proxy speaks to the backend in a protocols case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upstream {
    Http1,
    H2c,
    /// h2 over TLS, to the TLS backend.
    H2Tls,
}

/// One case of the protocols group: a row for sluice and one for each
/// peer that can play it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Case {
    name: &'static str,
    /// The Host that sluice's route for the case matches.
    host: &'static str,
    tls_listener: bool,
    /// Clients speak h2c with prior knowledge (issue 16's scenario:
    /// h2load -c16 -m32).
    h2_clients: bool,
    /// Clients speak HTTP/3 (QUIC on the TLS listener's port), in the same
    /// shape as the h2c clients (issue 31).
    h3_clients: bool,
    upstream: Upstream,
}

/// The protocols group's cases, in the order it measures them.
pub(super) const CASES: [Case; 8] = [
    Case {
        name: "HTTP/1.1 -> HTTP/1.1",
        host: "h1",
        tls_listener: false,
        h2_clients: false,
        h3_clients: false,
        upstream: Upstream::Http1,
    },
    Case {
        name: "TLS listener -> HTTP/1.1",
        host: "tls",
        tls_listener: true,
        h2_clients: false,
        h3_clients: false,
        upstream: Upstream::Http1,
    },
    Case {
        name: "HTTP/1.1 -> h2c",
        host: "h2c",
        tls_listener: false,
        h2_clients: false,
        h3_clients: false,
        upstream: Upstream::H2c,
    },
    Case {
        name: "HTTP/1.1 -> h2 (TLS)",
        host: "h2",
        tls_listener: false,
        h2_clients: false,
        h3_clients: false,
        upstream: Upstream::H2Tls,
    },
    Case {
        name: "h2c clients -> HTTP/1.1",
        host: "h1",
        tls_listener: false,
        h2_clients: true,
        h3_clients: false,
        upstream: Upstream::Http1,
    },
    Case {
        name: "h2c clients -> h2c",
        host: "h2c",
        tls_listener: false,
        h2_clients: true,
        h3_clients: false,
        upstream: Upstream::H2c,
    },
    Case {
        name: "h3 clients -> HTTP/1.1",
        host: "h1",
        tls_listener: true,
        h2_clients: false,
        h3_clients: true,
        upstream: Upstream::Http1,
    },
    Case {
        name: "h3 clients -> h2c",
        host: "h2c",
        tls_listener: true,
        h2_clients: false,
        h3_clients: true,
        upstream: Upstream::H2c,
    },
];

impl Case {
    /// What a peer is asked to be for this case, in front of `upstream`
    /// (the TLS backend for h2 over TLS).
    fn site<'a>(
        &self,
        listen: SocketAddr,
        upstream: &'a [SocketAddr],
        tls: &'a TlsFiles,
        max_conns: usize,
    ) -> Site<'a> {
        Site::Proxy(ProxySite {
            tls: self.tls_listener.then_some(tls),
            h2c_clients: self.h2_clients,
            h3_clients: self.h3_clients,
            upstream_protocol: match self.upstream {
                Upstream::Http1 => UpstreamProtocol::Http1,
                Upstream::H2c => UpstreamProtocol::H2c,
                Upstream::H2Tls => UpstreamProtocol::H2Tls { ca: &tls.ca },
            },
            ..ProxySite::plain(listen, upstream, max_conns)
        })
    }
}

/// The protocols group's rows: every case for sluice, and for each peer
/// the cases it can play (nginx has no HTTP/2 to upstreams).
pub(super) fn protocols_rows(peers: &[PeerKind]) -> usize {
    let addr = SocketAddr::from(([127, 0, 0, 1], 1));
    let tls = TlsFiles {
        cert: "cert.pem".into(),
        key: "key.pem".into(),
        combined: "both.pem".into(),
        ca: "ca.pem".into(),
    };
    CASES
        .iter()
        .map(|case| 1 + super::players(peers, &case.site(addr, &[addr], &tls, 1)))
        .sum()
}

/// Question 4: HTTP/1.1, h2c and h2 over TLS to the backend, a TLS
/// listener, and HTTP/2 clients (h2c) and HTTP/3 clients to HTTP/1.1 and
/// h2c upstreams.
pub(super) fn protocols(bench: &mut Bench<'_>) -> anyhow::Result<()> {
    let mut group = begin(
        bench,
        GroupName::Protocols.as_str(),
        "Protocols",
        "HTTP/1.1 vs HTTP/2 (h2c and h2 over TLS) between proxy and backend; TLS on the listener; HTTP/2 and HTTP/3 clients.",
    );
    let tls = bench.tls()?;
    let (plain, plain_addr) = bench.serve("petstore", &[], false)?;
    let tls_args = [
        "--tls-cert".to_string(),
        tls.cert.display().to_string(),
        "--tls-key".to_string(),
        tls.key.display().to_string(),
    ];
    let (secure, secure_addr) = bench.serve("petstore", &tls_args, false)?;
    let plain_listen = bench.port()?;
    let tls_listen = bench.port()?;
    let h3_listen = bench.port()?;
    let tls_key = format!(
        "tls: {{ cert: \"{}\", key: \"{}\" }}",
        tls.cert.display(),
        tls.key.display()
    );
    let routes = format!(
        "upstreams:\n{}{}  h2:\n    hosts: [\"https://{secure_addr}\"]\n    protocol: h2\n    tls: {{ ca: \"{}\" }}\n\
routes:\n  - {{ path: /, host: h1, upstream: h1 }}\n  - {{ path: /, host: tls, upstream: h1 }}\n  \
- {{ path: /, host: h2c, upstream: h2c }}\n  - {{ path: /, host: h2, upstream: h2 }}\n",
        upstream_yaml("h1", &[plain_addr], ""),
        upstream_yaml("h2c", &[plain_addr], "    protocol: h2c\n"),
        tls.ca.display(),
    );
    let yaml = sluice_yaml(
        bench.options.connections,
        &format!(
            "listeners:\n  - {{ address: {plain_listen} }}\n  - {{ address: {tls_listen}, {tls_key} }}\n{routes}"
        ),
    );
    let sluice = bench.sluice_proxy(
        "sluice proxy (protocols)",
        &yaml,
        &[plain_listen, tls_listen],
    )?;
    let mut components: Vec<Component> = vec![plain, secure, sluice];
    // HTTP/3 clients reach a proxy of their own, whose TLS listener also
    // serves QUIC on its port: a sluice that refuses the key still runs
    // the other cases, and its h3 rows are skipped with a note.
    let h3_yaml = sluice_yaml(
        bench.options.connections,
        &format!(
            "listeners:\n  - {{ address: {h3_listen}, protocols: [h2, http1, h3], {tls_key} }}\n{routes}"
        ),
    );
    let h3_name = "sluice proxy (protocols, h3)";
    let sluice_h3 = match bench.sluice_refuses(h3_name, &h3_yaml)? {
        None => {
            components.push(bench.sluice_proxy(h3_name, &h3_yaml, &[h3_listen])?);
            Some(components.len() - 1)
        }
        Some(why) => {
            group.notes.push(format!(
                "sluice h3 clients rows: not measured: `sluice proxy --check` refused a listener \
                 with `protocols: [h2, http1, h3]`: {why}"
            ));
            None
        }
    };
    let load_for = |bench: &Bench<'_>, listen: SocketAddr, case: &Case| {
        let scheme = if case.tls_listener { "https" } else { "http" };
        let mut config = throughput(bench, &format!("{scheme}://{listen}/v1/pets"))?;
        config.cacert = Some(tls.ca.clone());
        config.headers = vec![header("host", case.host)?];
        if case.h2_clients || case.h3_clients {
            config.protocol = if case.h3_clients {
                Protocol::Http3
            } else {
                Protocol::Http2
            };
            config.connections = H2_CONNECTIONS.min(config.connections);
            config.streams = H2_STREAMS;
        }
        anyhow::Ok(config)
    };
    // A block per case: sluice and each peer, rotated.
    let mut blocks = Vec::new();
    for case in &CASES {
        let (listen, sluice) = match (case.h3_clients, case.tls_listener) {
            (true, _) => (h3_listen, sluice_h3),
            (false, true) => (tls_listen, Some(2)),
            (false, false) => (plain_listen, Some(2)),
        };
        let mut block = Vec::new();
        if let Some(index) = sluice {
            let spec = RowSpec::new(
                format!("sluice {}", case.name),
                "sluice",
                load_for(bench, listen, case)?,
            );
            block.push(Trial::new(spec, &[index, 0, 1]));
        }
        let upstream = [match case.upstream {
            Upstream::H2Tls => secure_addr,
            Upstream::Http1 | Upstream::H2c => plain_addr,
        }];
        for peer in bench.peers.clone() {
            let listen = bench.port()?;
            let site = case.site(listen, &upstream, &tls, bench.options.connections);
            let system = peer.kind.name();
            let name = format!("{system} {}", case.name);
            let Some(server) =
                peer_component(bench, &mut group.notes, &peer, &name, &site, listen)?
            else {
                continue;
            };
            components.push(server);
            let spec = RowSpec::new(name, system, load_for(bench, listen, case)?);
            block.push(Trial::new(spec, &[components.len() - 1, 0, 1]));
        }
        if !block.is_empty() {
            blocks.push(block);
        }
    }
    group.rows = bench.run_blocks("protocols", &mut components, blocks, &mut || {})?;
    bench.publish(group);
    Ok(())
}
