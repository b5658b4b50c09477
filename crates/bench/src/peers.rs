//! Configurations for the peers, written so that each is measured at its
//! best on the same job: one worker, keep-alive on both sides without a
//! request limit, no access log, and each peer's own advice for many
//! concurrent connections followed (docs/BENCH.md, "How the peers are
//! configured", says why each setting is there).

use std::{fmt::Write as _, net::SocketAddr, path::Path};

use crate::machine::PeerKind;

/// What a peer is asked to be.
#[derive(Debug, Clone)]
pub(crate) enum Site<'a> {
    /// Answer every request with these bytes (the baseline's backend).
    Static {
        listen: SocketAddr,
        body: &'a str,
        content_type: &'a str,
    },
    Proxy(ProxySite<'a>),
}

/// A reverse proxy (round robin over several upstreams).
#[derive(Debug, Clone)]
pub(crate) struct ProxySite<'a> {
    pub(crate) listen: SocketAddr,
    /// TLS on the listener (HTTP/1.1 over TLS).
    pub(crate) tls: Option<&'a TlsFiles>,
    /// Clients speak h2c with prior knowledge (plaintext listener only).
    pub(crate) h2c_clients: bool,
    pub(crate) upstreams: &'a [SocketAddr],
    pub(crate) upstream_protocol: UpstreamProtocol<'a>,
    /// Client connections to allow (the upstream side may need as many).
    pub(crate) max_conns: usize,
    /// Fewest connections (HAProxy `balance leastconn`, nginx
    /// `least_conn`) instead of round robin.
    pub(crate) least_conn: bool,
}

impl<'a> ProxySite<'a> {
    /// Plain HTTP/1.1 on both sides, round robin over `upstreams`; the
    /// other kinds of site are this with a field changed.
    pub(crate) fn plain(listen: SocketAddr, upstreams: &'a [SocketAddr], max_conns: usize) -> Self {
        Self {
            listen,
            tls: None,
            h2c_clients: false,
            upstreams,
            upstream_protocol: UpstreamProtocol::Http1,
            max_conns,
            least_conn: false,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum UpstreamProtocol<'a> {
    Http1,
    /// h2c with prior knowledge.
    H2c,
    /// h2 over TLS, trusting this CA file.
    H2Tls {
        ca: &'a Path,
    },
}

/// A server certificate and key, and both in one file (HAProxy's `crt`).
#[derive(Debug, Clone)]
pub(crate) struct TlsFiles {
    pub(crate) cert: std::path::PathBuf,
    pub(crate) key: std::path::PathBuf,
    pub(crate) combined: std::path::PathBuf,
    pub(crate) ca: std::path::PathBuf,
}

/// Why a peer cannot play a row.
pub(crate) type Unsupported = &'static str;

/// Whether a peer of `kind` can play `site`: its configuration can be
/// written (a group skips it with a note otherwise, and the run's estimate
/// leaves its row out).
pub(crate) fn plays(kind: PeerKind, site: &Site<'_>) -> bool {
    match kind {
        PeerKind::Nginx => nginx_conf(site, Path::new("/")).is_ok(),
        PeerKind::Haproxy => haproxy_cfg(site).is_ok(),
    }
}

/// nginx.conf for `nginx -c FILE -p DIR`: one process (`master_process
/// off`, so stopping it stops everything), everything under `dir`.
pub(crate) fn nginx_conf(site: &Site<'_>, dir: &Path) -> Result<String, Unsupported> {
    let dir = dir.display();
    let (connections, idle_upstream) = match site {
        Site::Static { .. } => (4096, 0),
        // Client and upstream side each take a connection slot; every
        // client may leave an idle upstream connection behind.
        Site::Proxy(proxy) => (
            (proxy.max_conns * 2 + 64).max(4096),
            proxy.max_conns.max(1024),
        ),
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
            conf.push_str(
                "    location / { proxy_pass http://backend; proxy_http_version 1.1; \
                 proxy_set_header Connection \"\"; }\n  }\n",
            );
        }
    }
    conf.push_str("}\n");
    Ok(conf)
}

/// haproxy.cfg for `haproxy -f FILE -db`: one thread, connection reuse
/// to the upstreams.
///
/// HAProxy keeps a server connection for reuse only while idle server
/// connections hold less than `tune.pool-low-fd-ratio` (20 %) of its file
/// descriptors, and kills idle ones above `tune.pool-high-fd-ratio` (25 %).
/// Its maxconn (hence its descriptor budget) cannot grow past the
/// open-file limit, so from about 2,000 client connections on it would
/// stop reusing and fall to a third of its throughput: as its manual
/// advises for setups with many idle server connections ("http-reuse"),
/// the ratios are raised.
pub(crate) fn haproxy_cfg(site: &Site<'_>) -> Result<String, Unsupported> {
    let maxconn = match site {
        Site::Static { .. } => 8000,
        Site::Proxy(proxy) => proxy.max_conns.max(8000),
    };
    let mut cfg = format!(
        "global\n  nbthread 1\n  maxconn {maxconn}\n\
         \x20 tune.pool-low-fd-ratio 90\n  tune.pool-high-fd-ratio 95\n\
         defaults\n  mode http\n  option http-keep-alive\n  timeout connect 2s\n  \
         timeout client 60s\n  timeout server 30s\n  timeout http-keep-alive 60s\n  \
         http-reuse always\n"
    );
    match site {
        Site::Static {
            listen,
            body,
            content_type,
        } => {
            if body.contains('\'') {
                return Err("the body holds a single quote");
            }
            let _ = write!(
                cfg,
                "frontend front\n  bind {listen}\n  \
                 http-request return status 200 content-type {content_type} string '{body}'\n"
            );
        }
        Site::Proxy(proxy) => {
            let _ = write!(cfg, "frontend front\n  bind {}", proxy.listen);
            if let Some(tls) = proxy.tls {
                let _ = write!(cfg, " ssl crt {} alpn http/1.1", tls.combined.display());
            } else if proxy.h2c_clients {
                cfg.push_str(" proto h2");
            }
            let balance = if proxy.least_conn {
                "leastconn"
            } else {
                "roundrobin"
            };
            let _ = write!(
                cfg,
                "\n  default_backend back\nbackend back\n  balance {balance}\n"
            );
            let options = match proxy.upstream_protocol {
                UpstreamProtocol::Http1 => String::new(),
                UpstreamProtocol::H2c => " proto h2".into(),
                UpstreamProtocol::H2Tls { ca } => {
                    format!(" ssl verify required ca-file {} alpn h2", ca.display())
                }
            };
            for (i, upstream) in proxy.upstreams.iter().enumerate() {
                let _ = writeln!(cfg, "  server b{i} {upstream}{options}");
            }
        }
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn nginx_round_robin_with_keepalive() {
        let upstreams = [addr(2), addr(3)];
        let site = Site::Proxy(ProxySite {
            listen: addr(1),
            tls: None,
            h2c_clients: false,
            upstreams: &upstreams,
            upstream_protocol: UpstreamProtocol::Http1,
            max_conns: 10_000,
            least_conn: false,
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
            upstreams: &upstreams,
            upstream_protocol: UpstreamProtocol::Http1,
            max_conns: 100,
            least_conn: false,
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
    fn least_connections_for_both_peers() {
        let upstreams = [addr(2), addr(3)];
        let site = Site::Proxy(ProxySite {
            listen: addr(1),
            tls: None,
            h2c_clients: false,
            upstreams: &upstreams,
            upstream_protocol: UpstreamProtocol::Http1,
            max_conns: 100,
            least_conn: true,
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
    fn haproxy_tls_and_h2_upstreams() {
        let upstreams = [addr(2)];
        let tls = TlsFiles {
            cert: "/c.pem".into(),
            key: "/k.pem".into(),
            combined: "/ck.pem".into(),
            ca: "/ca.pem".into(),
        };
        let cfg = haproxy_cfg(&Site::Proxy(ProxySite {
            listen: addr(1),
            tls: Some(&tls),
            h2c_clients: false,
            upstreams: &upstreams,
            upstream_protocol: UpstreamProtocol::H2Tls {
                ca: Path::new("/ca.pem"),
            },
            max_conns: 100,
            least_conn: false,
        }))
        .expect("supported");
        assert!(
            cfg.contains("bind 127.0.0.1:1 ssl crt /ck.pem alpn http/1.1"),
            "{cfg}"
        );
        assert!(
            cfg.contains("server b0 127.0.0.1:2 ssl verify required ca-file /ca.pem alpn h2"),
            "{cfg}"
        );
        // Server connections stay reusable with many clients.
        assert!(cfg.contains("tune.pool-low-fd-ratio 90"), "{cfg}");
        assert!(cfg.contains("http-reuse always"), "{cfg}");
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
