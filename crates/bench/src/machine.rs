//! The facts about this machine that a report needs to be compared
//! honestly, and the peers on PATH.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::{
    process::status_kib,
    results::{Machine, PeerVersion},
};

/// The peers a run compares with, as found on PATH.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub(crate) kind: PeerKind,
    pub(crate) path: PathBuf,
    pub(crate) version: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerKind {
    Nginx,
    Haproxy,
}

impl PeerKind {
    pub const ALL: [PeerKind; 2] = [Self::Haproxy, Self::Nginx];

    pub fn name(self) -> &'static str {
        match self {
            Self::Nginx => "nginx",
            Self::Haproxy => "haproxy",
        }
    }

    /// What to install when it is missing (Debian).
    pub fn package(self) -> &'static str {
        match self {
            Self::Nginx => "nginx-light",
            Self::Haproxy => "haproxy",
        }
    }
}

/// The peers on PATH (also /usr/sbin, where Debian puts both), with
/// their versions.
pub(crate) fn find_peers() -> Vec<Peer> {
    PeerKind::ALL
        .into_iter()
        .filter_map(|kind| {
            let path = find_program(kind.name())?;
            let version = version_of(kind, &path)?;
            Some(Peer {
                kind,
                path,
                version,
            })
        })
        .collect()
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

/// `nginx -v` prints `nginx version: nginx/1.22.1` on stderr;
/// `haproxy -v` prints `HAProxy version 2.6.12-1 2023/...` on stdout.
fn version_of(kind: PeerKind, path: &Path) -> Option<String> {
    let output = Command::new(path).arg("-v").output().ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    parse_version(kind, &text)
}

fn parse_version(kind: PeerKind, text: &str) -> Option<String> {
    let line = text.lines().find(|l| !l.trim().is_empty())?;
    let version = match kind {
        PeerKind::Nginx => line.split("nginx/").nth(1)?.split_whitespace().next()?,
        PeerKind::Haproxy => line.split("version ").nth(1)?.split_whitespace().next()?,
    };
    Some(version.to_string())
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
    }

    #[test]
    fn this_machine_is_described() {
        let machine = describe(1024, &[]);
        assert!(machine.cores >= 1);
        assert_ne!(machine.kernel, "unknown");
        assert!(machine.memory_kib > 0);
    }
}
