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
    /// Python with aioquic, niquests, brotli and zstandard (the venv
    /// ~/.cache/sluice/venv-h3).
    H3py,
    /// Python's cryptography package, version 42 or later (its X.509
    /// verifier).
    Pyca,
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
            Need::H3py => "h3py",
            Need::Pyca => "pyca",
        }
    }

    /// Whether a missing `self` fails the test instead of skipping it.
    pub fn required(self) -> bool {
        let require_var = format!("SLUICE_REQUIRE_{}", self.name().to_uppercase());
        let var = |name: &str| std::env::var(name).ok();
        Switches {
            require: var(&require_var).as_deref(),
            strict: var("SLUICE_STRICT").as_deref(),
            allow: var("SLUICE_ALLOW_SKIP").as_deref(),
        }
        .require(self.name())
    }
}

/// The environment's say on a skip: `SLUICE_REQUIRE_<GROUP>`,
/// `SLUICE_STRICT` and `SLUICE_ALLOW_SKIP`, as set (`None`: unset).
struct Switches<'a> {
    require: Option<&'a str>,
    strict: Option<&'a str>,
    allow: Option<&'a str>,
}

impl Switches<'_> {
    /// Whether a missing need of `group` fails: its own switch is `1`,
    /// or strict mode is on (`1`) and the group is not in the allow list.
    fn require(&self, group: &str) -> bool {
        if self.require == Some("1") {
            return true;
        }
        let allowed = self
            .allow
            .is_some_and(|list| list.split(',').any(|name| name.trim() == group));
        self.strict == Some("1") && !allowed
    }
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
            Need::H3py,
            Need::Pyca,
        ];
        let mut names: Vec<_> = all.iter().map(|need| need.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }

    #[test]
    fn strict_mode_fails_a_skip_unless_its_group_is_allowed() {
        let switches = |require, strict, allow| Switches {
            require,
            strict,
            allow,
        };
        // Nothing set, or anything but `1`: a skip is a skip.
        assert!(!switches(None, None, None).require("redis"));
        assert!(!switches(Some("0"), Some("0"), None).require("redis"));
        assert!(!switches(None, Some("true"), None).require("redis"));
        // Strict: every group, unless listed (names trimmed, whole).
        assert!(switches(None, Some("1"), None).require("redis"));
        assert!(switches(None, Some("1"), Some("")).require("redis"));
        assert!(!switches(None, Some("1"), Some("peer, redis")).require("redis"));
        assert!(switches(None, Some("1"), Some("peer,redis2")).require("redis"));
        assert!(switches(None, Some("1"), Some("peer")).require("redis"));
        // A group's own switch wins over the allow list and needs no strict mode.
        assert!(switches(Some("1"), None, None).require("redis"));
        assert!(switches(Some("1"), Some("1"), Some("redis")).require("redis"));
    }

    #[test]
    fn a_required_skip_panics_naming_the_test_and_the_switches() {
        // SLUICE_REQUIRE_<GROUP> of a group no test uses: set here only,
        // so that no other test in this binary sees it.
        let group = Need::Pyca;
        let var = format!("SLUICE_REQUIRE_{}", group.name().to_uppercase());
        std::env::set_var(&var, "1");
        let skipped = std::panic::catch_unwind(|| skip("some_test", group, "no cryptography"));
        std::env::remove_var(&var);
        let message = skipped.expect_err("a required skip panics");
        let message = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(
            message.starts_with("some_test: no cryptography (a skip of group pyca fails"),
            "{message}"
        );
    }
}
