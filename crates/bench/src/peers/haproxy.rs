//! HAProxy: `haproxy -f haproxy.cfg -db`, one thread.

use std::{fmt::Write as _, path::Path};

use super::{room, Handler, Setup, Site, Unsupported, UpstreamProtocol};

/// HAProxy on `dir/haproxy.cfg`, in the foreground (`-db`).
pub(super) fn setup(site: &Site<'_>, dir: &Path) -> Result<Setup, Unsupported> {
    let cfg = haproxy_cfg(site)?;
    Ok(
        Setup::one_file(dir, "haproxy.cfg", cfg, &["-f", "{}", "-db"])
            .checked_by(&["-c", "-f", "{}"]),
    )
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
    let maxconn = room(site);
    if !fits_fd_limit(maxconn, open_file_limit()) {
        // HAProxy would refuse to start ("Cannot raise FD limit").
        return Err(
            "HAProxy needs two descriptors per connection of its maxconn and the open-file \
             limit is lower than that (raise `ulimit -n`, or run as root)",
        );
    }
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
            match proxy.handler {
                None => {}
                // The request rate per client address in a stick table,
                // as HAProxy's manual does it.
                Some(Handler::RateLimit { per_second }) => {
                    let _ = write!(
                        cfg,
                        "\n  stick-table type ip size 100k expire 10s store http_req_rate(1s)\n  \
                         http-request track-sc0 src\n  \
                         http-request deny deny_status 429 if {{ sc_http_req_rate(0) gt {per_second} }}"
                    );
                }
                Some(Handler::Jwt { .. }) => {
                    return Err(
                        "HAProxy's jwt_verify takes a PEM key, not the run's JWKS: not configured",
                    );
                }
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

/// Whether HAProxy can hold `maxconn` under `limit` open files: it asks
/// for two descriptors per connection and a few of its own (measured with
/// 2.6: maxconn 10,000 needs 20,014), and refuses to start without them.
fn fits_fd_limit(maxconn: usize, limit: u64) -> bool {
    limit == 0 || (maxconn as u64) * 2 + 64 <= limit
}

/// This process's open-file limit, which HAProxy inherits (0: unknown).
fn open_file_limit() -> u64 {
    rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(0, |(soft, _)| soft)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::{addr, test_tls, ProxySite};

    /// 9,936 idle connections (a 20,000 limit less the bench's spare,
    /// halved) and the first one: maxconn 9,952 needs 19,968 descriptors.
    #[test]
    fn maxconn_holds_the_group_and_its_first_connection_within_the_limit() {
        let upstreams = [addr(2)];
        let site = Site::Proxy(ProxySite::plain(addr(1), &upstreams, 9_936));
        assert_eq!(room(&site), 9_952);
        assert!(fits_fd_limit(9_952, 20_000));
        assert!(!fits_fd_limit(10_016, 20_000));
        assert!(fits_fd_limit(10_016, 65_536));
        assert!(fits_fd_limit(10_016, 0));
    }

    #[test]
    fn haproxy_tls_and_h2_upstreams() {
        let upstreams = [addr(2)];
        let tls = test_tls();
        let cfg = haproxy_cfg(&Site::Proxy(ProxySite {
            listen: addr(1),
            tls: Some(&tls),
            h2c_clients: false,
            h3_clients: false,
            upstreams: &upstreams,
            upstream_protocol: UpstreamProtocol::H2Tls {
                ca: Path::new("/ca.pem"),
            },
            max_conns: 100,
            least_conn: false,
            handler: None,
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
        // Room for the idle group's first connection beyond its count.
        assert!(cfg.contains("maxconn 8000"), "{cfg}");
        // Server connections stay reusable with many clients.
        assert!(cfg.contains("tune.pool-low-fd-ratio 90"), "{cfg}");
        assert!(cfg.contains("http-reuse always"), "{cfg}");
    }
}
