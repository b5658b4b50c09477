//! Traefik: `traefik --configFile=traefik.yml` (the static configuration:
//! the entry point, the file provider) with the routers and services in
//! dynamic.yml, on one Go thread.

use std::{fmt::Write as _, path::Path};

use super::{idle_pool, Handler, Setup, Site, Unsupported, UpstreamProtocol};

/// Where Traefik answers 200 once its routes are loaded: a router of the
/// same dynamic file, to its ping service.
pub(crate) const READY: &str = "/sluice-bench-ready";

/// Traefik on `dir/traefik.yml` and `dir/dynamic.yml`. It has no check
/// command: starting it is the check (a file provider error leaves the
/// entry point answering 404, and [`READY`] never answering).
pub(super) fn setup(site: &Site<'_>, dir: &Path) -> Result<Setup, Unsupported> {
    let dynamic = dir.join("dynamic.yml");
    let (static_yaml, dynamic_yaml) = traefik_yaml(site, &dynamic)?;
    let mut setup = Setup::one_file(dir, "traefik.yml", static_yaml, &["--configFile={}"]);
    setup.files.push((dynamic, dynamic_yaml));
    setup.ready = Some(READY.into());
    Ok(setup.one_go_thread())
}

fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// traefik.yml and dynamic.yml (the file `dynamic` names) for a proxy.
///
/// The entry point gets a 1 s graceful shutdown (the default, 10 s, would
/// hold every stop between rows); the servers transport keeps an idle
/// connection per client (`maxIdleConnsPerHost`, default 200).
pub(crate) fn traefik_yaml(
    site: &Site<'_>,
    dynamic: &Path,
) -> Result<(String, String), Unsupported> {
    let Site::Proxy(proxy) = site else {
        return Err("Traefik has no handler that answers a fixed body");
    };
    let static_yaml = format!(
        "entryPoints:\n  web:\n    address: \"{}\"\n    transport:\n      lifeCycle:\n        \
         graceTimeOut: 1s\nproviders:\n  file:\n    filename: {}\n    watch: false\n\
         ping:\n  manualRouting: true\nlog:\n  level: ERROR\nglobal:\n  checkNewVersion: false\n  sendAnonymousUsage: false\n",
        proxy.listen,
        quoted(&dynamic.display().to_string())
    );
    let middlewares = match proxy.handler {
        None => "",
        Some(Handler::RateLimit { .. }) => "      middlewares: [limit]\n",
        Some(Handler::Jwt { .. }) => {
            return Err("Traefik has no JWT middleware (Traefik Hub only)");
        }
        Some(Handler::Gateway(_)) => return Err(super::NO_GATEWAY),
    };
    let strategy = if proxy.least_conn { "p2c" } else { "wrr" };
    let scheme = match proxy.upstream_protocol {
        UpstreamProtocol::Http1 => "http",
        UpstreamProtocol::H2c => "h2c",
        UpstreamProtocol::H2Tls { .. } => "https",
    };
    let mut dynamic_yaml = format!(
        "http:\n  routers:\n    ready:\n      entryPoints: [web]\n      rule: \"Path(`{READY}`)\"\n      \
         priority: 1000\n      service: ping@internal\n    all:\n      entryPoints: [web]\n      \
         rule: \"PathPrefix(`/`)\"\n      service: backend\n{middlewares}{}  services:\n    backend:\n      loadBalancer:\n        strategy: {strategy}\n        \
         serversTransport: pool\n        servers:\n",
        if proxy.tls.is_some() {
            "      tls: {}\n"
        } else {
            ""
        }
    );
    for upstream in proxy.upstreams {
        let _ = writeln!(dynamic_yaml, "          - url: \"{scheme}://{upstream}\"");
    }
    let _ = write!(
        dynamic_yaml,
        "  serversTransports:\n    pool:\n      maxIdleConnsPerHost: {}\n",
        idle_pool(proxy)
    );
    if let UpstreamProtocol::H2Tls { ca } = proxy.upstream_protocol {
        let _ = writeln!(
            dynamic_yaml,
            "      rootCAs: [{}]",
            quoted(&ca.display().to_string())
        );
    }
    // Per client address (the source IP), as sluice's and the others'.
    if let Some(Handler::RateLimit { per_second }) = proxy.handler {
        let _ = write!(
            dynamic_yaml,
            "  middlewares:\n    limit:\n      rateLimit:\n        average: {per_second}\n        \
             period: 1s\n        burst: {per_second}\n"
        );
    }
    if let Some(tls) = proxy.tls {
        let _ = write!(
            dynamic_yaml,
            "tls:\n  certificates:\n    - certFile: {}\n      keyFile: {}\n",
            quoted(&tls.cert.display().to_string()),
            quoted(&tls.key.display().to_string())
        );
    }
    Ok((static_yaml, dynamic_yaml))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::{addr, test_tls, test_tls_site, ProxySite};

    #[test]
    fn entry_point_router_and_service() {
        let upstreams = [addr(2), addr(3)];
        let tls = test_tls();
        let site = test_tls_site(&tls, &upstreams);
        let (main, dynamic) = traefik_yaml(&site, Path::new("/w/dynamic.yml")).expect("supported");
        assert!(main.contains("address: \"127.0.0.1:1\""), "{main}");
        assert!(main.contains("filename: \"/w/dynamic.yml\""), "{main}");
        assert!(main.contains("graceTimeOut: 1s"), "{main}");
        for needle in [
            "strategy: p2c",
            "- url: \"https://127.0.0.1:2\"\n          - url: \"https://127.0.0.1:3\"",
            "maxIdleConnsPerHost: 12000",
            "rootCAs: [\"/ca.pem\"]",
            "      tls: {}\n",
            "certFile: \"/c.pem\"",
        ] {
            assert!(
                dynamic.contains(needle),
                "{needle:?} missing in:\n{dynamic}"
            );
        }
        let h2c = Site::Proxy(ProxySite {
            upstream_protocol: UpstreamProtocol::H2c,
            ..ProxySite::plain(addr(1), &upstreams, 100)
        });
        let (_, dynamic) = traefik_yaml(&h2c, Path::new("/d.yml")).expect("supported");
        assert!(dynamic.contains("url: \"h2c://127.0.0.1:2\""), "{dynamic}");
        assert!(dynamic.contains("strategy: wrr"), "{dynamic}");
        assert!(dynamic.contains("maxIdleConnsPerHost: 1024"), "{dynamic}");
        assert!(!dynamic.contains("tls"), "{dynamic}");
    }

    #[test]
    fn no_static_site() {
        let site = Site::Static {
            listen: addr(1),
            body: "[]",
            content_type: "application/json",
        };
        assert!(traefik_yaml(&site, Path::new("/d.yml")).is_err());
    }
}
