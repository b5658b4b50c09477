//! Caddy: `caddy run --config Caddyfile --adapter caddyfile`, on one Go
//! thread, with no admin endpoint and no automatic HTTPS.

use std::{fmt::Write as _, path::Path};

use super::{idle_pool, Setup, Site, Unsupported, UpstreamProtocol};

/// Why Caddy sits out the middleware rows.
const NO_HANDLERS: &str =
    "Caddy's standard build has no rate limit or JWT handler (only as plugins)";

/// Caddy on `dir/Caddyfile`; its config and data folders (where it would
/// keep an autosaved config and certificates) are `dir`, not the user's.
/// `caddy validate` checks the file.
pub(super) fn setup(site: &Site<'_>, dir: &Path) -> Result<Setup, Unsupported> {
    let caddyfile = caddyfile(site)?;
    let mut setup = Setup::one_file(
        dir,
        "Caddyfile",
        caddyfile,
        &["run", "--config", "{}", "--adapter", "caddyfile"],
    )
    .checked_by(&["validate", "--config", "{}", "--adapter", "caddyfile"])
    .one_go_thread();
    let dir = dir.display().to_string();
    setup.env.push(("XDG_CONFIG_HOME".into(), dir.clone()));
    setup.env.push(("XDG_DATA_HOME".into(), dir));
    Ok(setup)
}

/// The global options: no admin endpoint, no certificates fetched, a 1 s
/// graceful shutdown (the default waits for every connection to close),
/// warnings only, and the protocols the listener speaks.
fn global(protocols: &str) -> String {
    format!(
        "{{\n\tadmin off\n\tauto_https off\n\tpersist_config off\n\tgrace_period 1s\n\t\
         log {{\n\t\tlevel WARN\n\t}}\n\tservers {{\n\t\tprotocols {protocols}\n\t}}\n}}\n"
    )
}

/// The Caddyfile for `site`.
pub(crate) fn caddyfile(site: &Site<'_>) -> Result<String, Unsupported> {
    match site {
        Site::Static {
            listen,
            body,
            content_type,
        } => {
            if body.contains('`') {
                return Err("the body holds a backquote");
            }
            Ok(format!(
                "{}http://:{} {{\n\tbind {}\n\theader Content-Type {content_type}\n\t\
                 respond `{body}` 200\n}}\n",
                global("h1 h2c"),
                listen.port(),
                listen.ip()
            ))
        }
        Site::Proxy(proxy) => {
            if proxy.handler.is_some() {
                return Err(NO_HANDLERS);
            }
            let (scheme, protocols) = match (proxy.tls, proxy.h2c_clients) {
                // HTTP/3 on the https listener's port, over UDP.
                (Some(_), _) if proxy.h3_clients => ("https", "h1 h2 h3"),
                (Some(_), _) => ("https", "h1 h2"),
                (None, _) if proxy.h3_clients => return Err("HTTP/3 needs a TLS listener"),
                (None, true) => ("http", "h1 h2c"),
                (None, false) => ("http", "h1"),
            };
            // Any Host: a site address with a host would answer other
            // Hosts (the protocols group's) with an empty 200.
            let mut file = format!(
                "{}{scheme}://:{} {{\n\tbind {}\n",
                global(protocols),
                proxy.listen.port(),
                proxy.listen.ip()
            );
            if let Some(tls) = proxy.tls {
                let _ = writeln!(file, "\ttls {} {}", tls.cert.display(), tls.key.display());
            }
            let upstream_scheme = match proxy.upstream_protocol {
                UpstreamProtocol::Http1 | UpstreamProtocol::H2c => "http",
                UpstreamProtocol::H2Tls { .. } => "https",
            };
            let upstreams: Vec<String> = proxy
                .upstreams
                .iter()
                .map(|u| format!("{upstream_scheme}://{u}"))
                .collect();
            let policy = if proxy.least_conn {
                "least_conn"
            } else {
                "round_robin"
            };
            let pool = idle_pool(proxy);
            let _ = write!(
                file,
                "\treverse_proxy {} {{\n\t\tlb_policy {policy}\n\t\ttransport http {{\n\t\t\t\
                 keepalive_idle_conns {pool}\n\t\t\tkeepalive_idle_conns_per_host {pool}\n",
                upstreams.join(" ")
            );
            match proxy.upstream_protocol {
                UpstreamProtocol::Http1 => file.push_str("\t\t\tversions 1.1\n"),
                UpstreamProtocol::H2c => file.push_str("\t\t\tversions h2c 2\n"),
                UpstreamProtocol::H2Tls { ca } => {
                    let _ = write!(
                        file,
                        "\t\t\ttls\n\t\t\ttls_trust_pool file {}\n\t\t\tversions 2\n",
                        ca.display()
                    );
                }
            }
            file.push_str("\t\t}\n\t}\n}\n");
            Ok(file)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::{addr, test_tls, test_tls_site, ProxySite};

    #[test]
    fn reverse_proxy_with_a_pool_per_client() {
        let upstreams = [addr(2), addr(3)];
        let tls = test_tls();
        let site = test_tls_site(&tls, &upstreams);
        let file = caddyfile(&site).expect("supported");
        for needle in [
            "admin off",
            "auto_https off",
            "protocols h1 h2\n",
            "https://:1 {\n\tbind 127.0.0.1\n\ttls /c.pem /k.pem\n",
            "reverse_proxy https://127.0.0.1:2 https://127.0.0.1:3 {",
            "lb_policy least_conn",
            "keepalive_idle_conns_per_host 12000",
            "tls_trust_pool file /ca.pem\n\t\t\tversions 2\n",
        ] {
            assert!(file.contains(needle), "{needle:?} missing in:\n{file}");
        }
        let h2c = Site::Proxy(ProxySite {
            h2c_clients: true,
            upstream_protocol: UpstreamProtocol::H2c,
            ..ProxySite::plain(addr(1), &upstreams, 100)
        });
        let file = caddyfile(&h2c).expect("supported");
        assert!(file.contains("protocols h1 h2c\n"), "{file}");
        assert!(file.contains("versions h2c 2"), "{file}");
        assert!(file.contains("lb_policy round_robin"), "{file}");
        // HTTP/3 clients: h3 beside h1 and h2 on the https listener.
        let Site::Proxy(tls_site) = test_tls_site(&tls, &upstreams) else {
            unreachable!("a proxy site")
        };
        let h3 = Site::Proxy(ProxySite {
            h3_clients: true,
            ..tls_site
        });
        let file = caddyfile(&h3).expect("supported");
        assert!(file.contains("protocols h1 h2 h3\n"), "{file}");
        assert!(
            file.contains("https://:1 {\n\tbind 127.0.0.1\n\ttls /c.pem"),
            "{file}"
        );
    }

    #[test]
    fn static_site_responds_with_the_body() {
        let site = Site::Static {
            listen: addr(1),
            body: r#"[{"id":1}]"#,
            content_type: "application/json",
        };
        let file = caddyfile(&site).expect("supported");
        assert!(file.contains("respond `[{\"id\":1}]` 200"), "{file}");
        assert!(
            file.contains("header Content-Type application/json"),
            "{file}"
        );
    }
}
