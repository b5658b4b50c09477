//! `sluice load --h3` as a user runs it, against testkit's HTTP/3 server
//! over UDP on loopback: the report, the JSON, the interval log and the
//! exit codes of the mistakes a user makes.

use std::process::{Command, Output};

use testkit::{H3Options, H3Server, TestCerts};

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("sluice-load-h3-{}-{name}", std::process::id()))
}

#[test]
fn h3_runs_streams_and_writes_the_json_report() {
    let certs = TestCerts::generate();
    let server = H3Server::start(&certs);
    let json = temp("report.json");
    let url = server.url("/delay/10");
    let ca = certs.ca_path.display().to_string();
    let output = sluice(&[
        "load",
        "--h3",
        "-c",
        "2",
        "-m",
        "8",
        "-n",
        "160",
        "--cacert",
        &ca,
        "--json",
        json.to_str().expect("a UTF-8 path"),
        &url,
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("1 threads and 2 connections, HTTP/3 with 8 streams each"),
        "{stdout}"
    );
    assert!(stdout.contains("160 requests in"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("the JSON report"))
            .expect("valid JSON");
    std::fs::remove_file(&json).ok();
    assert_eq!(report["config"]["protocol"], "HTTP/3");
    assert_eq!(report["status"]["200"], 160);
    assert_eq!(server.requests(), 160);
    assert_eq!(server.max_streams(), 8);
}

/// The open model with an interval log, merged as a sharded run's would
/// be: the merged report counts what the run answered.
#[test]
fn h3_open_model_writes_a_log_that_merges() {
    let certs = TestCerts::generate();
    let server = H3Server::start(&certs);
    let log = temp("run.hlog");
    let log_path = log.to_str().expect("a UTF-8 path");
    let url = server.url("/");
    let output = sluice(&[
        "load", "--h3", "-k", "-c", "4", "-m", "2", "--rate", "400", "-n", "200", "--log",
        log_path, &url,
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("200 requests in"), "{stdout}");
    assert!(stdout.contains("open model at 400 req/s"), "{stdout}");
    assert_eq!(server.requests(), 200);
    let merged = sluice(&["load", "merge", log_path]);
    std::fs::remove_file(&log).ok();
    assert!(merged.status.success(), "{}", text(&merged));
    let merged = String::from_utf8_lossy(&merged.stdout);
    assert!(merged.contains("200 requests in"), "{merged}");
}

#[test]
fn h3_mistakes_exit_2_with_one_line() {
    let certs = TestCerts::generate();
    let no_h3 = H3Server::start_with(
        &certs,
        H3Options {
            alpn: vec![b"hq-interop".to_vec()],
            ..H3Options::default()
        },
    );
    let ca = certs.ca_path.display().to_string();
    let wrong_alpn = no_h3.url("/");
    let cases: [(&[&str], &str); 5] = [
        (
            &["load", "--h3", "http://127.0.0.1:1/"],
            "--h3 needs an https:// URL",
        ),
        (
            &["load", "--h3", "--h2", "https://127.0.0.1:1/"],
            "cannot be used with",
        ),
        (
            &["load", "--h3", "--pipeline", "4", "https://127.0.0.1:1/"],
            "with --h3 use --streams",
        ),
        (
            &[
                "load",
                "--h3",
                "-H",
                "Upgrade: websocket",
                "https://127.0.0.1:1/",
            ],
            "not allowed in HTTP/3",
        ),
        (
            &["load", "--h3", "--cacert", &ca, "-n", "10", &wrong_alpn],
            "does not speak HTTP/3",
        ),
    ];
    for (args, expected) in cases {
        let output = sluice(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    assert_eq!(no_h3.requests(), 0);
}
