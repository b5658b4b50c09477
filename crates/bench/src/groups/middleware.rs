//! The middleware group (question 3): one sluice process with a route per
//! handler, told apart by Host, so that every handler is measured on the
//! same process; the peers' own counterparts of `jwt` and `rate_limit`;
//! `rate_limit` on Redis when `redis-server` is installed; and `oidc`
//! with a session from a real login where node and the OpenID provider
//! of bench/oidc are installed ([`super::oidc`]).

use std::net::SocketAddr;

use anyhow::Context;

use super::{
    begin, gateway_yaml_start, header,
    oidc::{self, OIDC_ROW},
    peer_row, sluice_yaml, throughput,
};
use crate::{
    machine::find_program,
    measure::RowSpec,
    options::GroupName,
    peers::{Handler, ProxySite, Site},
    process::{Component, Launch},
    rounds::Trial,
    stage::Bench,
};

/// The OpenAPI description the validate handler checks requests against.
const PETSTORE_SPEC: &str = include_str!("../../../../specs/petstore.yaml");

/// The test token's issuer and audience, which the jwt handlers require.
pub(super) const ISSUER: &str = "https://issuer.example";
pub(super) const AUDIENCE: &str = "petstore";
/// The `api_key` row's key and the `basic_auth` row's password.
const API_KEY: &str = "bench-api-key-0123456789abcdef";
const BASIC_PASSWORD: &str = "bench password";
/// The rate_limit handlers' rate per client, and their burst: more than
/// any row sends, so that a row is the handler's cost.
pub(super) const RATE: u64 = 1_000_000;

/// A peer in front of `upstreams` running its own counterpart of sluice's
/// handler `scenario` (`jwt`, `rate_limit`), `None` for the others.
pub(super) fn handler_site<'a>(
    scenario: &str,
    listen: SocketAddr,
    upstreams: &'a [SocketAddr],
    jwks: &'a std::path::Path,
    max_conns: usize,
) -> Option<Site<'a>> {
    let handler = match scenario {
        "jwt" => Handler::Jwt {
            jwks,
            issuer: ISSUER,
            audience: AUDIENCE,
        },
        "rate_limit" => Handler::RateLimit { per_second: RATE },
        _ => return None,
    };
    Some(Site::Proxy(ProxySite {
        handler: Some(handler),
        ..ProxySite::plain(listen, upstreams, max_conns)
    }))
}

/// Question 3: one sluice process with a route per handler, told apart by
/// Host, so that every handler is measured on the same process; then each
/// peer's own counterpart of `jwt` and `rate_limit`, where it has one.
pub(super) fn middleware(bench: &mut Bench<'_>) -> anyhow::Result<()> {
    let mut group = begin(
        bench,
        GroupName::Middleware.as_str(),
        "Middleware handlers",
        "What does each middleware handler cost, alone and as the full default chain?",
    );
    if bench.options.runs(GroupName::Peers) {
        group.notes.push(
            "Peer rows where a peer has the handler built in: jwt (Envoy jwt_authn; sluice's \
             also requires the token's scope), rate_limit (Envoy local_ratelimit, Traefik \
             rateLimit, nginx limit_req, HAProxy a stick table); the peers run no other handler."
                .into(),
        );
    }
    let (backend, backend_addr) = bench.serve("petstore", &[], false)?;
    let (jwks, token) = test_token(bench)?;
    // bcrypt at cost 10, as `htpasswd -B` writes it: the row measures the
    // remembered path (the first request pays the hash once).
    let htpasswd = bench.work.join("htpasswd");
    let hash = bcrypt::hash(BASIC_PASSWORD, 10).context("cannot hash the bench password")?;
    std::fs::write(&htpasswd, format!("bench:{hash}\n"))
        .with_context(|| format!("cannot write {}", htpasswd.display()))?;
    let spec_file = bench.work.join("petstore.yaml");
    std::fs::write(&spec_file, PETSTORE_SPEC)
        .with_context(|| format!("cannot write {}", spec_file.display()))?;
    let access_log = log_file(bench, "access");
    let handlers = bench.options.handlers();
    let scenarios = scenarios(&handlers);
    let redis = if redis_row(&handlers) {
        Some(start_redis(bench)?)
    } else {
        if handlers.contains(&"rate_limit") {
            group.notes.push(format!(
                "No `{REDIS_ROW}` row: redis-server is not installed (apt-get install redis-server)."
            ));
        }
        None
    };
    let listen = bench.port()?;
    // The provider sends the browser back to the oidc route's host.
    let oidc_host = host_of(OIDC_ROW);
    let oidc_redirect = format!("http://{oidc_host}/oauth2/callback");
    let provider = if handlers.contains(&OIDC_ROW) {
        let started = oidc::provider()
            .map_err(anyhow::Error::msg)
            .and_then(|found| oidc::start(bench, found, &oidc_redirect));
        match started {
            Ok(provider) => Some(provider),
            Err(err) => {
                group.notes.push(format!("No `{OIDC_ROW}` row: {err:#}."));
                None
            }
        }
    } else {
        None
    };
    let mut routes = String::new();
    for (name, chain) in &scenarios {
        routes.push_str(&format!(
            "  - {{ path: /, host: {}, chain: {chain}, upstream: backend }}\n",
            host_of(name)
        ));
    }
    let mut extra_handlers = String::new();
    if let Some((_, redis_addr)) = &redis {
        // A budget far above Redis's latency under load, so that every
        // request of the row is decided by Redis (none by on_failure).
        extra_handlers = format!(
            "  rate_limit_redis: {{ rate_limit: {{ rate: {RATE}/s, store: redis, redis: {{ url: \"redis://{redis_addr}\", timeout: 1s }} }} }}\n"
        );
        routes.push_str(&format!(
            "  - {{ path: /, host: {}, chain: [rate_limit_redis], upstream: backend }}\n",
            host_of(REDIS_ROW)
        ));
    }
    if let Some(provider) = &provider {
        extra_handlers.push_str(&oidc::handler_yaml(&provider.issuer, &oidc_redirect)?);
        routes.push_str(&format!(
            "  - {{ path: /, host: {oidc_host}, chain: [{OIDC_ROW}], upstream: backend }}\n"
        ));
    }
    let yaml = sluice_yaml(
        bench.options.connections,
        &format!(
            "{}  ip_filter: {{ allow: [127.0.0.0/8] }}
  body_limit: {{ max: 1MiB }}
  jwt: {{ jwks: \"{}\", algorithms: [RS256], issuer: \"{ISSUER}\", audience: [{AUDIENCE}], scopes: [pets:read] }}
  validate: {{ openapi: \"{}\" }}
  rate_limit: {{ rate: {RATE}/s }}
  api_key: {{ keys: {{ bench: \"{API_KEY}\" }} }}
  basic_auth: {{ htpasswd: \"{}\" }}
  ext_authz: {{ http: \"http://{backend_addr}/v1/pets\", upstream_headers: [x-auth-user] }}
  ext_authz_cached: {{ ext_authz: {{ http: \"http://{backend_addr}/v1/pets\", upstream_headers: [x-auth-user], cache: {{ ttl: 1m, key: [authorization] }} }} }}
{extra_handlers}chains:
  default: [correlation, metrics, access_log, jwt, validate, rate_limit, headers]
routes:
{routes}",
            gateway_yaml_start(listen, backend_addr, &access_log),
            jwks.display(),
            spec_file.display(),
            htpasswd.display(),
        ),
    );
    let sluice = bench.sluice_proxy("sluice proxy (middleware)", &yaml, &[listen])?;
    let mut components = vec![sluice, backend];
    let url = format!("http://{listen}/v1/pets");
    let mut trials = Vec::new();
    for (name, _) in &scenarios {
        let mut config = throughput(bench, &url)?;
        config.headers = vec![header("host", &host_of(name))?];
        let authorization = match *name {
            "basic_auth" => {
                use base64::Engine as _;
                let pair = format!("bench:{BASIC_PASSWORD}");
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                )
            }
            _ => format!("Bearer {token}"),
        };
        config
            .headers
            .push(header("authorization", &authorization)?);
        if *name == "api_key" {
            config.headers.push(header("x-api-key", API_KEY)?);
        }
        trials.push(Trial::new(RowSpec::new(*name, "sluice", config), &[0, 1]));
    }
    if let Some((redis, _)) = redis {
        components.push(redis);
        let mut config = throughput(bench, &url)?;
        config.headers = vec![header("host", &host_of(REDIS_ROW))?];
        let spec = RowSpec::new(REDIS_ROW, "sluice", config);
        trials.push(Trial::new(spec, &[0, 1, components.len() - 1]));
    }
    if let Some(provider) = provider {
        // A login refused, or a session that does not get the upstream's
        // 200, would make the row measure redirects to the login.
        match oidc::login(listen, &oidc_host, "/v1/pets") {
            Ok(cookie) => {
                components.push(provider.component);
                let mut config = throughput(bench, &url)?;
                config.headers = vec![header("host", &oidc_host)?, header("cookie", &cookie)?];
                let spec = RowSpec::new(OIDC_ROW, "sluice", config).expect_status(200);
                trials.push(Trial::new(spec, &[0, 1, components.len() - 1]));
            }
            Err(err) => group.notes.push(format!(
                "No `{OIDC_ROW}` row: the scripted login through sluice failed: {err:#}"
            )),
        }
    }
    let upstream = [backend_addr];
    for peer in bench.peers.clone() {
        for scenario in &handlers {
            let listen = bench.port()?;
            let connections = bench.options.connections;
            let Some(site) = handler_site(scenario, listen, &upstream, &jwks, connections) else {
                continue;
            };
            let name = format!("{} {scenario}", peer.kind.name());
            let authorization = header("authorization", &format!("Bearer {token}"))?;
            let place = (name, &site, listen);
            let (notes, parts) = (&mut group.notes, &mut components);
            peer_row(
                bench,
                notes,
                parts,
                &mut trials,
                &peer,
                place,
                vec![authorization],
                1,
            )?;
        }
    }
    // Each sample starts with an empty log, as the first did.
    let mut empty_log = || {
        let _ = std::fs::write(&access_log, b"");
    };
    let rows = bench.run_blocks("middleware", &mut components, vec![trials], &mut empty_log);
    let _ = std::fs::remove_file(&access_log);
    group.rows = rows?;
    bench.publish(group);
    Ok(())
}

/// A JWKS file with one RS256 key, and a token it signed for the jwt
/// handlers (issuer, audience, scope `pets:read`, valid for a day).
pub(super) fn test_token(bench: &Bench<'_>) -> anyhow::Result<(std::path::PathBuf, String)> {
    let keys = bench.work.join("jwt");
    std::fs::create_dir_all(&keys).with_context(|| format!("cannot create {}", keys.display()))?;
    let key = jwt::generate_key(jwt::Algorithm::RS256, "bench")
        .map_err(|err| anyhow::anyhow!("cannot make a test key: {err}"))?;
    let jwks = keys.join("jwks.json");
    std::fs::write(&jwks, key.jwks_json())
        .with_context(|| format!("cannot write {}", jwks.display()))?;
    let token = key
        .sign(&serde_json::json!({
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "bench",
            "scope": "pets:read",
            "iat": jwt::unix_now(),
            "exp": jwt::unix_now() + 86_400,
        }))
        .map_err(|err| anyhow::anyhow!("cannot sign a test token: {err}"))?;
    Ok((jwks, token))
}

/// Where an access log goes: memory where there is /dev/shm (disk
/// writeback would land on whichever row runs next), else the work folder.
pub(super) fn log_file(bench: &Bench<'_>, name: &str) -> std::path::PathBuf {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        bench.work.clone()
    };
    dir.join(format!("sluice-bench-{}-{name}.log", std::process::id()))
}

/// The middleware group's rows, `(name, chain)`: the empty chain, each
/// handler alone, and the full default chain; not `oidc`, whose row needs
/// a provider and a login ([`oidc_row`]).
pub(super) fn scenarios(handlers: &[&'static str]) -> Vec<(&'static str, String)> {
    let mut scenarios = vec![("empty chain", "[]".to_string())];
    for handler in handlers.iter().filter(|h| **h != OIDC_ROW) {
        // `ext_authz cached` is the instance `ext_authz_cached`.
        scenarios.push((handler, format!("[{}]", handler.replace(' ', "_"))));
    }
    scenarios.push(("default chain", "default".into()));
    scenarios
}

/// The row of `rate_limit` with `store: redis` (a Redis on this machine,
/// a rate no row reaches: the cost of asking Redis for each request).
pub(super) const REDIS_ROW: &str = "rate_limit redis";

/// Whether the run has the [`REDIS_ROW`]: it measures `rate_limit`, and
/// `redis-server` is installed.
pub(super) fn redis_row(handlers: &[&str]) -> bool {
    handlers.contains(&"rate_limit") && find_program("redis-server").is_some()
}

/// A `redis-server` for the [`REDIS_ROW`] (nothing saved, loopback only),
/// placed with the backend, not with the system under test.
fn start_redis(bench: &mut Bench<'_>) -> anyhow::Result<(Component, SocketAddr)> {
    let addr = bench.port()?;
    let program = find_program("redis-server").context("redis-server is not installed")?;
    let component = Component::start(Launch {
        name: "redis-server".into(),
        program: &program,
        args: [
            "--port",
            &addr.port().to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .iter()
        .map(ToString::to_string)
        .collect(),
        env: Vec::new(),
        cpus: bench.cpus(false),
        log: bench.log("redis-server"),
        listens: vec![addr],
        probe: None,
    })?;
    Ok((component, addr))
}

/// Whether the run has the `oidc` row: it measures `oidc`, and node and
/// the OIDC provider are installed.
pub(super) fn oidc_row(handlers: &[&str]) -> bool {
    handlers.contains(&OIDC_ROW) && oidc::provider().is_ok()
}

/// `default chain` becomes the host `default-chain`.
fn host_of(scenario: &str) -> String {
    scenario.replace([' ', '_'], "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_for_scenarios() {
        assert_eq!(host_of("default chain"), "default-chain");
        assert_eq!(host_of("ip_filter"), "ip-filter");
        assert_eq!(host_of(REDIS_ROW), "rate-limit-redis");
    }
}
