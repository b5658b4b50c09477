//! The gateway group (issue 49): what the cross-cutting concerns of an API
//! gateway cost. The same chain, an RS256 JWT checked against a JWKS, a
//! rate limit that never refuses in the run, a header set on the request
//! and on the response, an access log line per request to a file, and
//! metrics, in sluice (`[metrics, access_log, jwt, rate_limit, headers]`)
//! and in Envoy (`jwt_authn`, `local_ratelimit`, the route's header
//! mutation, a file access log; Envoy keeps its statistics whatever it
//! is told), each against its own bare proxy on the same backend. Runs
//! only when named (`--only gateway`, with `peers` for Envoy's rows).

use super::{begin, gateway_yaml_start, header, peer_row, sluice_yaml, throughput};
use crate::{
    machine::PeerKind,
    measure::RowSpec,
    options::GroupName,
    peers::{GatewayChain, Handler, ProxySite, Site},
    rounds::Trial,
    stage::Bench,
};

use super::middleware::{log_file, test_token, AUDIENCE, ISSUER, RATE};

/// The rows: each system's bare proxy and its gateway chain.
pub(super) const BARE: &str = "bare proxy";
pub(super) const CHAIN: &str = "gateway chain";

/// The sluice chain (docs/BENCH.md, "The gateway group").
const SLUICE_CHAIN: &str = "[metrics, access_log, jwt, rate_limit, headers]";

/// The peers that play the gateway chain.
pub(super) fn peers_of(peers: &[PeerKind]) -> usize {
    peers
        .iter()
        .filter(|&&kind| kind == PeerKind::Envoy)
        .count()
}

pub(super) fn gateway(bench: &mut Bench<'_>) -> anyhow::Result<()> {
    let mut group = begin(
        bench,
        GroupName::Gateway.as_str(),
        "API gateway chain",
        "What do an API gateway's cross-cutting concerns (JWT, rate limit, headers, access log, metrics) cost in sluice and in Envoy, against each one's bare proxy?",
    );
    group.notes.push(format!(
        "The chain: an RS256 JWT checked against a JWKS file (issuer and audience), a rate limit \
         of {RATE}/s that no row reaches, x-env set on the request and x-served-by on the \
         response, an access log line per request to a file in /dev/shm, and metrics; sluice \
         {SLUICE_CHAIN}, Envoy jwt_authn (with its token cache) and local_ratelimit, the route's \
         request_headers_to_add and response_headers_to_add, a file access log (Envoy counts its \
         statistics always). Each is compared with its own bare proxy."
    ));
    let (backend, backend_addr) = bench.serve("petstore", &[], false)?;
    let (jwks, token) = test_token(bench)?;
    let sluice_log = log_file(bench, "gateway-sluice");
    let envoy_log = log_file(bench, "gateway-envoy");
    let listen = bench.port()?;
    let yaml = sluice_yaml(
        bench.options.connections,
        &format!(
            "{}  jwt: {{ jwks: \"{}\", algorithms: [RS256], issuer: \"{ISSUER}\", audience: [{AUDIENCE}] }}
  rate_limit: {{ rate: {RATE}/s }}
routes:
  - {{ path: /, host: bare, chain: [], upstream: backend }}
  - {{ path: /, host: gateway, chain: {SLUICE_CHAIN}, upstream: backend }}
",
            gateway_yaml_start(listen, backend_addr, &sluice_log),
            jwks.display(),
        ),
    );
    let sluice = bench.sluice_proxy("sluice proxy (gateway)", &yaml, &[listen])?;
    let mut components = vec![sluice, backend];
    let url = format!("http://{listen}/v1/pets");
    let bearer = format!("Bearer {token}");
    let mut trials = Vec::new();
    for (row, host) in [(BARE, "bare"), (CHAIN, "gateway")] {
        let mut config = throughput(bench, &url)?;
        // The same request on both rows: the bare proxy passes the token on.
        config.headers = vec![header("host", host)?, header("authorization", &bearer)?];
        let label = format!("sluice {row}");
        trials.push(Trial::new(RowSpec::new(label, "sluice", config), &[0, 1]));
    }
    let upstream = [backend_addr];
    let connections = bench.options.connections;
    for peer in bench.peers.clone() {
        if peer.kind != PeerKind::Envoy {
            continue;
        }
        for row in [BARE, CHAIN] {
            let listen = bench.port()?;
            let handler = (row == CHAIN).then_some(Handler::Gateway(GatewayChain {
                jwks: &jwks,
                issuer: ISSUER,
                audience: AUDIENCE,
                per_second: RATE,
                access_log: &envoy_log,
            }));
            let site = Site::Proxy(ProxySite {
                handler,
                ..ProxySite::plain(listen, &upstream, connections)
            });
            let name = format!("{} {row}", peer.kind.name());
            let place = (name, &site, listen);
            let (notes, parts) = (&mut group.notes, &mut components);
            let headers = vec![header("authorization", &bearer)?];
            peer_row(bench, notes, parts, &mut trials, &peer, place, headers, 1)?;
        }
    }
    // Each sample starts with empty logs, as the first did.
    let mut empty_logs = || {
        let _ = std::fs::write(&sluice_log, b"");
        let _ = std::fs::write(&envoy_log, b"");
    };
    let rows = bench.run_blocks("gateway", &mut components, vec![trials], &mut empty_logs);
    let _ = std::fs::remove_file(&sluice_log);
    let _ = std::fs::remove_file(&envoy_log);
    group.rows = rows?;
    group.notes.extend(verdicts(&group.rows));
    bench.publish(group);
    Ok(())
}

/// The group's two questions as lines: each chain against its own bare
/// proxy, and sluice's chain against Envoy's (req/s, same run).
pub(crate) fn verdicts(rows: &[crate::results::Row]) -> Vec<String> {
    let rate = |label: &str| {
        rows.iter()
            .find(|r| r.label == label)
            .map(|r| r.figures.requests_per_sec)
    };
    let mut lines = Vec::new();
    for system in ["sluice", "envoy"] {
        if let (Some(chain), Some(bare)) = (
            rate(&format!("{system} {CHAIN}")),
            rate(&format!("{system} {BARE}")),
        ) {
            lines.push(format!(
                "{system}: the gateway chain at {:.2}x its bare proxy's req/s ({chain:.0} against {bare:.0})",
                chain / bare.max(f64::MIN_POSITIVE)
            ));
        }
    }
    if let (Some(ours), Some(theirs)) = (
        rate(&format!("sluice {CHAIN}")),
        rate(&format!("envoy {CHAIN}")),
    ) {
        lines.push(format!(
            "sluice's gateway chain at {:.2}x Envoy's ({ours:.0} against {theirs:.0} req/s)",
            ours / theirs.max(f64::MIN_POSITIVE)
        ));
    }
    lines
}
