//! Configurations for the peers, written so that each is measured at its
//! best on the same job: one worker, keep-alive on both sides without a
//! request limit, no access log, and each peer's own advice for many
//! concurrent connections followed (docs/BENCH.md, "How the peers are
//! configured", says why each setting is there). A module per peer writes
//! its files; [`setup`] says how to start it on them.

mod caddy;
mod envoy;
mod haproxy;
mod nghttpx;
mod nginx;
mod traefik;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

use crate::machine::PeerKind;

#[cfg(test)]
pub(crate) use haproxy::haproxy_cfg;

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
    /// Clients speak HTTP/3, over QUIC on the TLS listener's port (UDP).
    pub(crate) h3_clients: bool,
    pub(crate) upstreams: &'a [SocketAddr],
    pub(crate) upstream_protocol: UpstreamProtocol<'a>,
    /// Client connections to allow (the upstream side may need as many).
    pub(crate) max_conns: usize,
    /// Fewest connections or requests in flight (HAProxy `balance
    /// leastconn`, nginx and Caddy `least_conn`, Envoy `LEAST_REQUEST`,
    /// Traefik `p2c`) instead of round robin.
    pub(crate) least_conn: bool,
    /// A handler on every request (the middleware group's peer rows).
    pub(crate) handler: Option<Handler<'a>>,
}

/// A handler a peer runs on every request, as sluice's middleware does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Handler<'a> {
    /// At most this many requests a second per client address (and as
    /// many at once), 429 past it: sluice's `rate_limit` as the bench
    /// configures it, a limit no row reaches, so that the row is the
    /// handler's cost.
    RateLimit { per_second: u64 },
    /// A bearer JWT (RS256) checked against this JWKS file, issuer and
    /// audience; 401 without a valid one.
    Jwt {
        jwks: &'a Path,
        issuer: &'a str,
        audience: &'a str,
    },
}

impl<'a> ProxySite<'a> {
    /// Plain HTTP/1.1 on both sides, round robin over `upstreams`; the
    /// other kinds of site are this with a field changed.
    pub(crate) fn plain(listen: SocketAddr, upstreams: &'a [SocketAddr], max_conns: usize) -> Self {
        Self {
            listen,
            tls: None,
            h2c_clients: false,
            h3_clients: false,
            upstreams,
            upstream_protocol: UpstreamProtocol::Http1,
            max_conns,
            least_conn: false,
            handler: None,
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
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) combined: PathBuf,
    pub(crate) ca: PathBuf,
}

impl TlsFiles {
    /// A local CA and a certificate for 127.0.0.1 and localhost, written
    /// into `dir` (created).
    pub(crate) fn write(dir: &Path) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let ca = tls::LocalCa::generate(
            "sluice bench CA",
            std::time::Duration::from_secs(7 * 86_400),
        )
        .context("cannot make a test CA")?;
        let server = ca
            .server(&["127.0.0.1".into(), "localhost".into()])
            .context("cannot make a test certificate")?;
        let files = Self {
            cert: dir.join("server.pem"),
            key: dir.join("server.key.pem"),
            combined: dir.join("server+key.pem"),
            ca: dir.join("ca.pem"),
        };
        for (path, text) in [
            (&files.cert, server.cert_pem.clone()),
            (&files.key, server.key_pem.clone()),
            (
                &files.combined,
                format!("{}{}", server.cert_pem, server.key_pem),
            ),
            (&files.ca, ca.ca.cert_pem.clone()),
        ] {
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(files)
    }
}

/// Why a peer cannot play a row.
pub(crate) type Unsupported = &'static str;

/// How to start a peer on a site: the files to write into its folder, its
/// arguments and what to add to its environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Setup {
    pub(crate) files: Vec<(PathBuf, String)>,
    pub(crate) args: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    /// The peer's own check of these files, without serving (`envoy --mode
    /// validate`, `caddy validate`, `nginx -t`, `haproxy -c`); `None` for
    /// a peer that has none (Traefik, nghttpx): starting it is the check.
    pub(crate) check: Option<Vec<String>>,
    /// A path that answers 200 once the peer serves its whole
    /// configuration, for a peer that listens before it does (Traefik
    /// loads its routes after it opens its entry point, and answers 404
    /// until then); `None`: listening is ready.
    pub(crate) ready: Option<String>,
}

impl Setup {
    /// One configuration file, `dir/name`, and the arguments that start the
    /// peer on it (`{}` in an argument stands for the file's path).
    fn one_file(dir: &Path, name: &str, text: String, args: &[&str]) -> Self {
        let file = dir.join(name);
        let path = file.display().to_string();
        Self {
            args: args.iter().map(|a| a.replace("{}", &path)).collect(),
            files: vec![(file, text)],
            ..Self::default()
        }
    }

    /// The check command, `{}` standing for the first file's path.
    fn checked_by(mut self, args: &[&str]) -> Self {
        let path = self
            .files
            .first()
            .map(|(file, _)| file.display().to_string())
            .unwrap_or_default();
        self.check = Some(args.iter().map(|a| a.replace("{}", &path)).collect());
        self
    }

    /// The Go runtime on one thread (`GOMAXPROCS=1`): one worker, as the
    /// others get.
    fn one_go_thread(mut self) -> Self {
        self.env.push(("GOMAXPROCS".into(), "1".into()));
        self
    }
}

/// How to start a peer of `kind` playing `site` with its files in `dir`,
/// or why it cannot play it.
pub(crate) fn setup(kind: PeerKind, site: &Site<'_>, dir: &Path) -> Result<Setup, Unsupported> {
    if let (Site::Proxy(proxy), Some(why)) = (site, no_h3(kind)) {
        if proxy.h3_clients {
            return Err(why);
        }
    }
    match kind {
        PeerKind::Nginx => nginx::setup(site, dir),
        PeerKind::Haproxy => haproxy::setup(site, dir),
        PeerKind::Envoy => envoy::setup(site, dir),
        PeerKind::Traefik => traefik::setup(site, dir),
        PeerKind::Caddy => caddy::setup(site, dir),
        PeerKind::Nghttpx => nghttpx::setup(site, dir),
    }
}

/// Why a peer of `kind` has no HTTP/3 listener here (issue 31); `None`
/// for Caddy, which serves HTTP/3 on its https listeners by default.
fn no_h3(kind: PeerKind) -> Option<Unsupported> {
    match kind {
        PeerKind::Caddy => None,
        PeerKind::Nginx => {
            Some("Debian's nginx is built without its QUIC module (`listen ... quic`)")
        }
        PeerKind::Haproxy => {
            Some("Debian's HAProxy is built without QUIC (it needs a QUIC-capable TLS library)")
        }
        PeerKind::Nghttpx => Some("Debian's nghttpx is built without HTTP/3 (ngtcp2)"),
        PeerKind::Envoy | PeerKind::Traefik => {
            Some("its HTTP/3 listener is not configured by the bench (Caddy is the HTTP/3 peer)")
        }
    }
}

/// Whether a peer of `kind` can play `site`: its configuration can be
/// written (a group skips it with a note otherwise, and the run's estimate
/// leaves its row out).
pub(crate) fn plays(kind: PeerKind, site: &Site<'_>) -> bool {
    setup(kind, site, Path::new("/")).is_ok()
}

/// Client connections a peer makes room for: the group's and a few more
/// (the idle group's first connection, the drain probes; few enough that
/// HAProxy's two descriptors per connection still fit the open-file limit
/// the sweeps were scaled to), at least 8,000 (HAProxy's maxconn, Envoy's
/// circuit breakers), so that no row of the throughput groups is near a
/// limit.
pub(crate) fn room(site: &Site<'_>) -> usize {
    match site {
        Site::Static { .. } => 8000,
        Site::Proxy(proxy) => (proxy.max_conns + ROOM_SPARE).max(8000),
    }
}

/// Client connections beyond the group's that a peer makes room for.
const ROOM_SPARE: usize = 16;

/// Idle upstream connections a peer keeps for reuse: one per client, at
/// least 1,024, so that no response past the cache closes its connection.
pub(crate) fn idle_pool(proxy: &ProxySite<'_>) -> usize {
    proxy.max_conns.max(1024)
}

#[cfg(test)]
pub(crate) fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

#[cfg(test)]
pub(crate) fn test_tls() -> TlsFiles {
    TlsFiles {
        cert: "/c.pem".into(),
        key: "/k.pem".into(),
        combined: "/ck.pem".into(),
        ca: "/ca.pem".into(),
    }
}

/// The site the peers' configuration tests write: a TLS listener on port
/// 1, least connections over `upstreams`, an HTTP/2 TLS upstream.
#[cfg(test)]
pub(crate) fn test_tls_site<'a>(tls: &'a TlsFiles, upstreams: &'a [SocketAddr]) -> Site<'a> {
    Site::Proxy(ProxySite {
        tls: Some(tls),
        least_conn: true,
        upstream_protocol: UpstreamProtocol::H2Tls { ca: &tls.ca },
        ..ProxySite::plain(addr(1), upstreams, 12_000)
    })
}

#[cfg(test)]
mod accepted;
