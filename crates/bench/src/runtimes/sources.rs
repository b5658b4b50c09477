//! The runtimes' sources as compiled into this crate (build.rs), which of
//! them each build reads, and the hash that names its cache folder.

use std::{fmt::Write as _, path::Path};

use anyhow::Context;
use ring::digest::{Context as Digest, SHA256};

use super::{Runtime, Toolchain};

include!(concat!(env!("OUT_DIR"), "/runtime_sources.rs"));

/// Modules of the Maven reactor (bench/runtimes/pom.xml) that a JVM runtime
/// builds besides its own.
fn shared_modules(runtime: Runtime) -> &'static [&'static str] {
    match runtime {
        Runtime::SpringMvc | Runtime::Webflux => &["jvm-common", "spring-common"],
        Runtime::Grizzly | Runtime::Payara => &["jvm-common", "jaxrs-common"],
        Runtime::GoHttp | Runtime::Node => &[],
    }
}

/// The files a runtime's build reads, sorted by path. A JVM build also
/// reads every module's pom.xml: Maven parses the whole reactor.
pub(super) fn files_for(runtime: Runtime) -> Vec<(&'static str, &'static [u8])> {
    let own = format!("{}/", runtime.name());
    let shared: Vec<String> = shared_modules(runtime)
        .iter()
        .map(|module| format!("{module}/"))
        .collect();
    let jvm = runtime.toolchain() == Toolchain::Jvm;
    FILES
        .iter()
        .copied()
        .filter(|(path, _)| {
            path.starts_with(&own)
                || shared
                    .iter()
                    .any(|prefix| path.starts_with(prefix.as_str()))
                || (jvm && (*path == "pom.xml" || is_module_pom(path)))
        })
        .collect()
}

fn is_module_pom(path: &str) -> bool {
    path.split_once('/')
        .is_some_and(|(_, rest)| rest == "pom.xml")
}

/// One file's text, for what a build file says (versions); empty if absent.
pub(super) fn text(path: &str) -> &'static str {
    FILES
        .iter()
        .find(|(p, _)| *p == path)
        .and_then(|(_, bytes)| std::str::from_utf8(bytes).ok())
        .unwrap_or("")
}

/// 16 hex digits of SHA-256 over the files (paths and bytes) and `recipe`
/// (the build command and toolchain versions): a change to either builds anew.
pub(super) fn hash(files: &[(&str, &[u8])], recipe: &str) -> String {
    let mut digest = Digest::new(&SHA256);
    for (path, bytes) in files {
        digest.update(path.as_bytes());
        digest.update(&[0]);
        digest.update(&(bytes.len() as u64).to_le_bytes());
        digest.update(bytes);
    }
    digest.update(recipe.as_bytes());
    let mut hex = String::with_capacity(16);
    for byte in &digest.finish().as_ref()[..8] {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// Writes the files below `dir`, folders included.
pub(super) fn write_into(dir: &Path, files: &[(&str, &[u8])]) -> anyhow::Result<()> {
    for (path, bytes) in files {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&target, bytes)
            .with_context(|| format!("cannot write {}", target.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(runtime: Runtime) -> Vec<&'static str> {
        files_for(runtime).into_iter().map(|(p, _)| p).collect()
    }

    #[test]
    fn each_build_reads_its_own_files_and_the_shared_ones() {
        let go = paths(Runtime::GoHttp);
        assert!(go.contains(&"go-http/main.go"), "{go:?}");
        assert!(go.iter().all(|p| p.starts_with("go-http/")), "{go:?}");
        assert!(paths(Runtime::Node).contains(&"node/server.js"));

        let mvc = paths(Runtime::SpringMvc);
        for needed in [
            "pom.xml",
            "spring-mvc/pom.xml",
            "spring-common/pom.xml",
            "jvm-common/src/main/java/sluice/runtimes/common/Customers.java",
            "payara/pom.xml",
        ] {
            assert!(mvc.contains(&needed), "{needed} missing from {mvc:?}");
        }
        assert!(
            !mvc.iter().any(|p| p.starts_with("webflux/src/")),
            "{mvc:?}"
        );
        assert!(!mvc.iter().any(|p| p.starts_with("go-http/")), "{mvc:?}");
        let payara = paths(Runtime::Payara);
        assert!(payara.contains(&"payara/preboot.asadmin"), "{payara:?}");
        assert!(payara.iter().any(|p| p.starts_with("jaxrs-common/src/")));
    }

    #[test]
    fn the_hash_follows_content_and_recipe() {
        let files: &[(&str, &[u8])] = &[("a/x", b"1"), ("a/y", b"2")];
        let base = hash(files, "go 1");
        assert_eq!(base.len(), 16);
        assert_eq!(base, hash(files, "go 1"));
        assert_ne!(base, hash(files, "go 2"));
        assert_ne!(base, hash(&[("a/x", b"1"), ("a/y", b"3")], "go 1"));
        // Moving a byte from one file to the next is a different tree.
        assert_ne!(
            hash(&[("a", b"xy"), ("b", b"")], ""),
            hash(&[("a", b"x"), ("b", b"y")], "")
        );
    }

    #[test]
    fn build_files_are_readable() {
        assert!(text("pom.xml").contains("<payara.version>"));
        assert_eq!(text("no/such/file"), "");
    }
}
