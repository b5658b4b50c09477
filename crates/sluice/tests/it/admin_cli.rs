//! `sluice proxy` and the admin listener's guards (issue 26): a warning
//! (not an error) for an admin listener beyond loopback without a token,
//! at `--check` and at the start; a bad token file fails like any
//! configuration error, with its file, line and key.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

fn write(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-admin-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn config(admin: &str) -> String {
    format!(
        "listeners: [{{ address: 127.0.0.1:0 }}]\nadmin: {admin}\nupstreams:\n  a: {{ hosts: [\"http://127.0.0.1:1\"] }}\nroutes: [{{ path: /, upstream: a }}]\n"
    )
}

fn check(path: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "-c", path.to_str().unwrap(), "--check"])
        .output()
        .unwrap()
}

#[test]
fn check_warns_about_an_admin_listener_beyond_loopback_without_a_token() {
    let open = write("open.yaml", &config("{ address: 0.0.0.0:9901 }"));
    let output = check(&open);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("sluice: warning: ")
            && stderr.contains(
                "admin.address 0.0.0.0:9901 listens beyond loopback and admin.token is not set"
            ),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("OK"));

    let token = write("token", "0123456789abcdef0123456789abcdef\n");
    let guarded = write(
        "guarded.yaml",
        &config(&format!(
            "{{ address: 0.0.0.0:9901, token_file: {} }}",
            token.display()
        )),
    );
    let loopback = write("loopback.yaml", &config("{ address: 127.0.0.1:9901 }"));
    for quiet in [guarded, loopback] {
        let output = check(&quiet);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        assert!(
            output.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn a_missing_or_empty_token_file_names_file_line_and_key() {
    let missing = write(
        "missing.yaml",
        &config("{ address: 0.0.0.0:9901, token_file: /nonexistent/admin-token }"),
    );
    let output = check(&missing);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("missing.yaml:2:")
            && stderr.contains(": admin.token_file: cannot read `/nonexistent/admin-token`"),
        "{stderr}"
    );

    let empty_file = write("empty-token", "\n");
    let empty = write(
        "empty.yaml",
        &config(&format!(
            "{{ address: 0.0.0.0:9901, token_file: {} }}",
            empty_file.display()
        )),
    );
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "-c", empty.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "the proxy does not start: {output:?}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("empty.yaml:2:")
            && stderr.contains("admin.token_file")
            && stderr.contains("is empty"),
        "{stderr}"
    );
}

#[test]
fn the_start_warns_too() {
    let open = write("start.yaml", &config("{ address: 0.0.0.0:0 }"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "-c", open.to_str().unwrap()])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut listening = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut listening)
        .unwrap();
    assert!(listening.contains("listening on"), "{listening}");
    child.kill().unwrap();
    let log = child.wait_with_output().unwrap().stderr;
    let log = String::from_utf8_lossy(&log);
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("listens beyond loopback")),
        "{log}"
    );
}
