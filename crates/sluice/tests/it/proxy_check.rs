//! `sluice proxy --check` reads and builds everything and writes nothing:
//! not the placeholder certificate an ACME listener starts with, not the
//! access log, not a directory for either.

use std::{path::Path, process::Command};

/// Every file and directory under `dir`, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path.clone());
            }
            found.push(path.display().to_string());
        }
    }
    found.sort();
    found
}

#[test]
fn check_writes_no_file() {
    let dir = std::env::temp_dir().join(format!("sluice-proxy-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("sluice.yaml");
    let certs = dir.join("certs");
    // The log's directory is there (start needs it), its file is not.
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let log = dir.join("logs/access.log");
    std::fs::write(
        &config,
        format!(
            "listeners:\n  - address: 127.0.0.1:0\n    tls:\n      cert: {certs}/cert.pem\n      key: {certs}/key.pem\n      \
             acme: {{ directory: \"https://127.0.0.1:1/dir\", domains: [localhost], challenge: tls-alpn-01 }}\n\
             upstreams:\n  a: {{ hosts: [\"http://127.0.0.1:1\"] }}\n\
             middleware:\n  log: {{ access_log: {{ path: \"{log}\" }} }}\n\
             routes: [{{ path: /, chain: [log], upstream: a }}]\n",
            certs = certs.display(),
            log = log.display(),
        ),
    )
    .unwrap();
    let before = tree(&dir);
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "-c", config.to_str().unwrap(), "--check"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("OK"));
    assert_eq!(tree(&dir), before, "--check wrote files");

    // An access log with no directory to be made in fails the check,
    // which still writes nothing (start would fail there too).
    let bad = std::fs::read_to_string(&config)
        .unwrap()
        .replace("logs/access.log", "nologs/access.log");
    std::fs::write(&config, bad).unwrap();
    let before = tree(&dir);
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "-c", config.to_str().unwrap(), "--check"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("nologs"),
        "{output:?}"
    );
    assert_eq!(tree(&dir), before, "a failed --check wrote files");
    let _ = std::fs::remove_dir_all(&dir);
}
