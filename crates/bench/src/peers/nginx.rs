//! nginx: `nginx -c nginx.conf -p DIR`, one process.

use std::{fmt::Write as _, path::Path};

use super::{idle_pool, Handler, Setup, Site, Unsupported, UpstreamProtocol};

/// nginx on `dir/nginx.conf`, its temporary files and error log in `dir`.
pub(super) fn setup(site: &Site<'_>, dir: &Path) -> Result<Setup, Unsupported> {
    let conf = nginx_conf(site, dir)?;
    let error_log = dir.join("error.log").display().to_string();
    let dir_arg = dir.display().to_string();
    Ok(Setup::one_file(
        dir,
        "nginx.conf",
        conf,
        &["-c", "{}", "-p", &dir_arg, "-e", &error_log],
    )
    .checked_by(&["-t", "-c", "{}", "-p", &dir_arg, "-e", &error_log]))
}

/// nginx.conf for `nginx -c FILE -p DIR`: one process (`master_process
/// off`, so stopping it stops everything), everything under `dir`.
pub(crate) fn nginx_conf(site: &Site<'_>, dir: &Path) -> Result<String, Unsupported> {
    let dir = dir.display();
    let (connections, idle_upstream) = match site {
        Site::Static { .. } => (4096, 0),
        // Client and upstream side each take a connection slot; every
        // client may leave an idle upstream connection behind.
        Site::Proxy(proxy) => ((proxy.max_conns * 2 + 64).max(4096), idle_pool(proxy)),
    };
    let mut conf = format!(
        "worker_processes 1;\nmaster_process off;\ndaemon off;\n\
         worker_rlimit_nofile {};\n\
         error_log {dir}/error.log warn;\npid {dir}/nginx.pid;\n\
         events {{ worker_connections {connections}; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 1000000;\n\
         \x20 client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n",
        connections + 64
    );
    match site {
        Site::Static {
            listen,
            body,
            content_type,
        } => {
            let _ = write!(
                conf,
                "  server {{\n    listen {listen} backlog=8192;\n    \
                 location / {{ default_type {content_type}; return 200 '{body}'; }}\n  }}\n"
            );
        }
        Site::Proxy(proxy) => {
            if !matches!(proxy.upstream_protocol, UpstreamProtocol::Http1) {
                return Err("nginx proxies HTTP/1.x only (no HTTP/2 to upstreams)");
            }
            // limit_req per client address, its burst answered at once.
            let limit = match proxy.handler {
                None => String::new(),
                Some(Handler::RateLimit { per_second }) => {
                    let _ = writeln!(
                        conf,
                        "  limit_req_zone $binary_remote_addr zone=bench:10m rate={per_second}r/s;\n  \
                         limit_req_status 429;"
                    );
                    format!(" limit_req zone=bench burst={per_second} nodelay;")
                }
                Some(Handler::Jwt { .. }) => {
                    return Err("nginx has no JWT validation (nginx Plus only)")
                }
                Some(Handler::Gateway(_)) => return Err(super::NO_GATEWAY),
            };
            conf.push_str("  upstream backend {\n");
            if proxy.least_conn {
                conf.push_str("    least_conn;\n");
            }
            for upstream in proxy.upstreams {
                let _ = writeln!(conf, "    server {upstream};");
            }
            let _ = write!(
                conf,
                "    keepalive {idle_upstream};\n    keepalive_requests 1000000;\n  }}\n"
            );
            let _ = write!(conf, "  server {{\n    listen {} ", proxy.listen);
            if let Some(tls) = proxy.tls {
                let _ = write!(
                    conf,
                    "ssl backlog=8192;\n    ssl_certificate {};\n    ssl_certificate_key {};\n",
                    tls.cert.display(),
                    tls.key.display()
                );
            } else if proxy.h2c_clients {
                conf.push_str("http2 backlog=8192;\n");
            } else {
                conf.push_str("backlog=8192;\n");
            }
            let _ = write!(
                conf,
                "    location / {{{limit} proxy_pass http://backend; proxy_http_version 1.1; \
                 proxy_set_header Connection \"\"; }}\n  }}\n",
            );
        }
    }
    conf.push_str("}\n");
    Ok(conf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::{addr, haproxy_cfg, ProxySite};

    #[test]
    fn nginx_round_robin_with_keepalive() {
        let upstreams = [addr(2), addr(3)];
        let site = Site::Proxy(ProxySite {
            listen: addr(1),
            tls: None,
            h2c_clients: false,
            h3_clients: false,
            upstreams: &upstreams,
            upstream_protocol: UpstreamProtocol::Http1,
            max_conns: 10_000,
            least_conn: false,
            handler: None,
        });
        let conf = nginx_conf(&site, Path::new("/w")).expect("supported");
        assert!(
            conf.contains("server 127.0.0.1:2;\n    server 127.0.0.1:3;"),
            "{conf}"
        );
        assert!(conf.contains("worker_connections 20064;"), "{conf}");
        // Every client may leave an idle upstream connection to reuse.
        assert!(conf.contains("keepalive 10000;"), "{conf}");
        assert!(conf.contains("worker_rlimit_nofile 20128;"), "{conf}");
        assert!(conf.contains("master_process off;"), "{conf}");
        let h2 = Site::Proxy(ProxySite {
            upstream_protocol: UpstreamProtocol::H2c,
            ..match site {
                Site::Proxy(p) => p,
                Site::Static { .. } => unreachable!(),
            }
        });
        assert!(nginx_conf(&h2, Path::new("/w")).is_err());
        let h2_clients = Site::Proxy(ProxySite {
            listen: addr(1),
            tls: None,
            h2c_clients: true,
            h3_clients: false,
            upstreams: &upstreams,
            upstream_protocol: UpstreamProtocol::Http1,
            max_conns: 100,
            least_conn: false,
            handler: None,
        });
        let conf = nginx_conf(&h2_clients, Path::new("/w")).expect("supported");
        assert!(
            conf.contains("listen 127.0.0.1:1 http2 backlog=8192;"),
            "{conf}"
        );
        let cfg = haproxy_cfg(&h2_clients).expect("supported");
        assert!(cfg.contains("bind 127.0.0.1:1 proto h2\n"), "{cfg}");
    }

    #[test]
    fn rate_limits_per_client_address() {
        let upstreams = [addr(2)];
        let site = Site::Proxy(ProxySite {
            handler: Some(crate::peers::Handler::RateLimit { per_second: 1000 }),
            ..ProxySite::plain(addr(1), &upstreams, 100)
        });
        let conf = nginx_conf(&site, Path::new("/w")).expect("supported");
        assert!(
            conf.contains("limit_req_zone $binary_remote_addr zone=bench:10m rate=1000r/s;"),
            "{conf}"
        );
        assert!(
            conf.contains("location / { limit_req zone=bench burst=1000 nodelay; proxy_pass"),
            "{conf}"
        );
        let cfg = haproxy_cfg(&site).expect("supported");
        assert!(cfg.contains("http-request track-sc0 src\n"), "{cfg}");
        assert!(cfg.contains("if { sc_http_req_rate(0) gt 1000 }"), "{cfg}");
    }

    #[test]
    fn least_connections_for_both_peers() {
        let upstreams = [addr(2), addr(3)];
        let site = Site::Proxy(ProxySite {
            listen: addr(1),
            tls: None,
            h2c_clients: false,
            h3_clients: false,
            upstreams: &upstreams,
            upstream_protocol: UpstreamProtocol::Http1,
            max_conns: 100,
            least_conn: true,
            handler: None,
        });
        let conf = nginx_conf(&site, Path::new("/w")).expect("supported");
        assert!(
            conf.contains("upstream backend {\n    least_conn;\n"),
            "{conf}"
        );
        let cfg = haproxy_cfg(&site).expect("supported");
        assert!(cfg.contains("balance leastconn\n"), "{cfg}");
    }

    #[test]
    fn static_sites_answer_the_body() {
        let site = Site::Static {
            listen: addr(1),
            body: "[1]",
            content_type: "application/json",
        };
        assert!(haproxy_cfg(&site).expect("ok").contains("string '[1]'"));
        assert!(nginx_conf(&site, Path::new("/w"))
            .expect("ok")
            .contains("return 200 '[1]'"));
    }
}
