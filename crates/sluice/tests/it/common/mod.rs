//! What the end-to-end tests share: the binary, the address a started
//! `sluice proxy` prints, scratch folders, a `sluice bench` run with a
//! mark in every child's environment (so that leftover processes can be
//! found) and the results schema.
// Each test file uses its own share of these.
#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

pub(crate) fn sluice() -> &'static str {
    env!("CARGO_BIN_EXE_sluice")
}

/// The first address a started `sluice proxy` (stdout piped) prints on
/// its first line, after `scheme` (`http://`, `https://`).
pub(crate) fn first_address(child: &mut std::process::Child, scheme: &str) -> std::net::SocketAddr {
    use std::io::BufRead as _;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout piped"))
        .read_line(&mut line)
        .expect("the proxy's first line");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(scheme))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
}

/// `sluice load -q ARGS`, run to its end.
pub(crate) fn load(args: &[&str]) -> Output {
    Command::new(sluice())
        .arg("load")
        .arg("-q")
        .args(args)
        .output()
        .expect("run sluice load")
}

/// A folder under the target dir, empty.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-bench-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Runs `sluice bench ARGS --out OUT -q` with `mark` in its environment
/// (inherited by every child, so that leftovers can be found).
pub(crate) fn bench(args: &[&str], out: &Path, mark: &str, path: Option<&str>) -> Output {
    let mut command = Command::new(sluice());
    command
        .arg("bench")
        .args(args)
        .args(["--out", &out.display().to_string(), "-q"])
        .env("SLUICE_BENCH_TEST_MARK", mark)
        .env("RUST_LOG", "warn");
    if let Some(path) = path {
        command.env("PATH", path);
    }
    command.output().expect("run sluice bench")
}

/// Processes whose environment holds `mark`.
pub(crate) fn leftovers(mark: &str) -> Vec<String> {
    let needle = format!("SLUICE_BENCH_TEST_MARK={mark}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let pid = entry.file_name().to_string_lossy().to_string();
        if !pid.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|&b| b == 0)
            .any(|var| var == needle.as_bytes())
        {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push(format!(
                "{pid}: {}",
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            ));
        }
    }
    found
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Why results.json breaks docs/results.schema.json (nothing when it does not).
pub(crate) fn schema_errors(json: &serde_json::Value) -> Vec<String> {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).expect("schema"))
            .expect("schema JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    validator
        .iter_errors(json)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// A debug build notes a group whose rows the run's estimate miscounted.
pub(crate) fn assert_no_estimate_note(json: &serde_json::Value) {
    let notes = json["notes"].as_array().expect("notes");
    assert!(
        !notes
            .iter()
            .any(|n| n.as_str().is_some_and(|n| n.starts_with("estimate:"))),
        "{notes:#?}"
    );
}

/// Sockets the process `pid` holds (its `/proc/PID/fd` links to `socket:`).
pub(crate) fn open_sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.flatten()
                .filter(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
                })
                .count()
        })
        .unwrap_or(0)
}
