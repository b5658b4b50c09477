//! One way for a test to skip: a `SKIP <test>: <reason>` line, or a
//! failure in strict mode.
//!
//! `cargo test` hides what a passing test prints, so a skip that only
//! prints is invisible in CI's log. Here a skip also appends its line to the
//! file named by `SLUICE_SKIP_LOG` (`.ci/run` prints that file after the
//! tests), and under `SLUICE_STRICT=1` (set by `.ci/run`) a skip is a
//! failure unless its group is listed in `SLUICE_ALLOW_SKIP` (comma
//! separated; `.ci/run` lists a group there only after saying on its own
//! line why it leaves that group out). The older per-tool switches
//! (`SLUICE_REQUIRE_REDIS=1`, …) still make their group strict on their
//! own.

use std::io::Write;

/// What a test needs and may lack; its name is the group `SLUICE_ALLOW_SKIP`
/// lists and the suffix of its `SLUICE_REQUIRE_*` switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Redis,
    Otelcol,
    Promtool,
    Chromium,
    /// Python's hdrhistogram package.
    Hdrh,
    /// Python's jsonschema package (an independent JSON Schema validator).
    PyJsonschema,
    /// A seed runtime's toolchain (go, node, java, mvn).
    Toolchain,
    /// A peer proxy or load tool (nginx, HAProxy, wrk, …).
    Peer,
    /// An open-file limit high enough for the test's connections.
    FileLimit,
    /// Apache's `htpasswd` (Debian's apache2-utils).
    Htpasswd,
    /// The test's Envoy ext_authz gRPC server (bench/authz, Go).
    Authz,
    /// An OpenID Connect provider (node's oidc-provider, bench/oidc).
    Oidc,
    /// Let's Encrypt's ACME test server, Pebble (Go).
    Pebble,
}

impl Need {
    pub fn name(self) -> &'static str {
        match self {
            Need::Redis => "redis",
            Need::Otelcol => "otelcol",
            Need::Promtool => "promtool",
            Need::Chromium => "chromium",
            Need::Hdrh => "hdrh",
            Need::PyJsonschema => "pyjsonschema",
            Need::Toolchain => "toolchain",
            Need::Peer => "peer",
            Need::FileLimit => "filelimit",
            Need::Htpasswd => "htpasswd",
            Need::Authz => "authz",
            Need::Oidc => "oidc",
            Need::Pebble => "pebble",
        }
    }

    /// Whether a missing `self` fails the test instead of skipping it.
    pub fn required(self) -> bool {
        let on = |var: &str| std::env::var_os(var).is_some_and(|v| v == "1");
        let require_var = format!("SLUICE_REQUIRE_{}", self.name().to_uppercase());
        if on(&require_var) {
            return true;
        }
        on("SLUICE_STRICT") && !allowed(self.name())
    }
}

fn allowed(group: &str) -> bool {
    std::env::var("SLUICE_ALLOW_SKIP")
        .is_ok_and(|list| list.split(',').any(|name| name.trim() == group))
}

/// Records that `test` does not run (or runs in part) because `need` is
/// missing, `reason` saying what and how to get it; panics instead when
/// the need is required (strict mode). The caller returns after this.
#[track_caller]
pub fn skip(test: &str, need: Need, reason: &str) {
    assert!(
        !need.required(),
        "{test}: {reason} (a skip of group {} fails under SLUICE_STRICT=1 or SLUICE_REQUIRE_{}=1; \
         SLUICE_ALLOW_SKIP={} allows it)",
        need.name(),
        need.name().to_uppercase(),
        need.name()
    );
    let line = format!("SKIP {test}: {reason}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("SLUICE_SKIP_LOG") {
        // Appends of one short line from parallel tests do not interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(format!("{line}\n").as_bytes()));
        if let Err(err) = written {
            eprintln!(
                "cannot append to SLUICE_SKIP_LOG {}: {err}",
                path.to_string_lossy()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct() {
        let all = [
            Need::Redis,
            Need::Otelcol,
            Need::Promtool,
            Need::Chromium,
            Need::Hdrh,
            Need::PyJsonschema,
            Need::Toolchain,
            Need::Peer,
            Need::FileLimit,
            Need::Htpasswd,
            Need::Authz,
            Need::Oidc,
            Need::Pebble,
        ];
        let mut names: Vec<_> = all.iter().map(|need| need.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }
}
