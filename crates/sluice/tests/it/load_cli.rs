//! `sluice load` as a user runs it: output, JSON report and exit codes.

use std::process::{Command, Output};

use testkit::{Behaviour, FakeServer, H2Server};

fn sluice_load(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("load")
        .args(args)
        .output()
        .expect("run sluice load")
}

#[test]
fn a_run_prints_wrk_style_text_and_writes_json() {
    let server = FakeServer::start(Behaviour::Normal);
    let json = std::env::temp_dir().join(format!("sluice-load-{}.json", std::process::id()));
    let url = server.url("/v1/pets");
    let output = sluice_load(&[
        "-n",
        "300",
        "-c",
        "3",
        "-H",
        "J-Tenant-Id: 1007",
        "--json",
        json.to_str().unwrap(),
        &url,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("300 requests in"), "{text}");
    assert!(text.contains("Requests/sec:"), "{text}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).ok();
    assert_eq!(report["requests"], 300);
    assert_eq!(report["config"]["connections"], 3);
    assert_eq!(server.requests(), 300);
}

#[test]
fn h2_runs_streams_over_h2c() {
    let server = H2Server::start();
    let json = std::env::temp_dir().join(format!("sluice-load-h2-{}.json", std::process::id()));
    let url = server.url("/delay/10");
    let output = sluice_load(&[
        "--h2",
        "-c",
        "2",
        "-m",
        "8",
        "-n",
        "160",
        "--json",
        json.to_str().unwrap(),
        &url,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("1 threads and 2 connections, HTTP/2 with 8 streams each"),
        "{text}"
    );
    assert!(text.contains("160 requests in"), "{text}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).ok();
    assert_eq!(report["config"]["protocol"], "HTTP/2");
    assert_eq!(report["status"]["200"], 160);
    assert_eq!(server.requests(), 160);
    assert_eq!(server.max_streams(), 8);
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let cases: [(&[&str], &str); 15] = [
        (
            &["-d", "18446744073709551615", "http://127.0.0.1:1/"],
            "at most a year",
        ),
        (&["--rate", "1e-300", "http://127.0.0.1:1/"], "out of range"),
        (&["not-a-url"], "invalid URL"),
        (&["ftp://127.0.0.1/"], "is not http or https"),
        (&["-H", "no colon", "http://127.0.0.1:1/"], "invalid header"),
        (&["--rate", "0", "http://127.0.0.1:1/"], "invalid rate"),
        (&["-d", "soon", "http://127.0.0.1:1/"], "invalid duration"),
        (
            &["-t", "4", "-c", "2", "http://127.0.0.1:1/"],
            "must be at least --threads",
        ),
        (
            &["-c", "10000000", "http://127.0.0.1:1/"],
            "open-file limit",
        ),
        (
            &["-m", "8", "http://127.0.0.1:1/"],
            "--streams goes with --h2",
        ),
        (
            &["--h2", "-H", "Connection: close", "http://127.0.0.1:1/"],
            "not allowed in HTTP/2",
        ),
        (
            &["--think", "soon", "http://127.0.0.1:1/"],
            "invalid think time `soon`",
        ),
        (
            &["--think", "2s..1s", "http://127.0.0.1:1/"],
            "invalid think time `2s..1s`",
        ),
        (
            &["--think", "1s..2s", "--rate", "10", "http://127.0.0.1:1/"],
            "--think goes with the closed model",
        ),
        (
            &["-u", "4", "-c", "4", "http://127.0.0.1:1/"],
            "cannot be used with",
        ),
    ];
    for (args, message) in cases {
        let output = sluice_load(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(message),
            "{args:?}: expected {message:?} in {stderr}"
        );
        assert!(output.stdout.is_empty(), "{args:?} printed a report");
    }
}

#[test]
fn an_unreachable_target_is_reported_not_fatal() {
    let url = format!("http://{}/", testkit::closed_port());
    let output = sluice_load(&["-d", "300ms", "-c", "2", &url]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("Errors: connect "), "{text}");
    assert!(text.contains("0 requests in"), "{text}");
}

#[test]
fn ctrl_c_prints_the_results_so_far() {
    let server = FakeServer::start(Behaviour::Normal);
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["load", "-d", "30s", "-c", "2", &server.url("/")])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn sluice load");
    // Interrupted once it is measuring: the server has seen requests.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.requests() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no request within 10 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let started = std::time::Instant::now();
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    let output = child.wait_with_output().expect("wait for sluice load");
    // Stopped by the signal, not at the end of its 30 s (`-d 30s`): 25 s
    // leaves 5 s for a loaded machine to deliver it and print.
    assert!(started.elapsed() < std::time::Duration::from_secs(25));
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("Interrupted: these are the results so far."),
        "{text}"
    );
    assert!(text.contains("Requests/sec:"), "{text}");
}
