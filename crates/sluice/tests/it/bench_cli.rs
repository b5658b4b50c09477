//! `sluice bench` end to end: a small run of several groups whose report
//! files are checked (results.json against its schema, report.html well
//! formed with its charts), and orchestration failures that must end
//! with a clear message and no process left behind. Nothing here asserts
//! on speed.

use crate::common;

use std::{process::Command, time::Duration};

use common::{
    assert_no_estimate_note, bench, leftovers, open_sockets, schema_errors, scratch, sluice, text,
};

#[test]
fn a_small_run_writes_a_valid_report() {
    let out = scratch("e2e");
    let output = bench(
        &[
            "--only",
            "baseline,proxy,lb,lb-slow,io",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--connections",
            "8",
            "--conns",
            "10,20",
            "--users",
            "10,20",
            "--think",
            "100ms..200ms",
            "--downstream-delay",
            "50ms",
            "--slow-delay",
            "20ms",
        ],
        &out,
        "e2e",
        None,
    );
    let stdout = text(&output.stdout);
    let stderr = text(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("Baseline Summary"), "{stdout}");
    assert!(stdout.contains("Proxy Summary"), "{stdout}");
    assert!(stdout.contains("Times"), "{stdout}");
    assert!(
        stderr.contains("sluice bench: expected to take about "),
        "{stderr}"
    );

    // results.json: valid against the documented schema, and what was asked.
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("results.json")).expect("results.json"),
    )
    .expect("results.json is JSON");
    let errors = schema_errors(&json);
    assert!(
        errors.is_empty(),
        "results.json breaks its schema: {errors:#?}"
    );
    let groups = json["groups"].as_array().expect("groups");
    let names: Vec<&str> = groups.iter().filter_map(|g| g["name"].as_str()).collect();
    assert_eq!(names, ["baseline", "proxy", "lb", "lb-slow", "io"]);
    // The estimate counted the rows each group measured.
    assert_no_estimate_note(&json);
    for group in groups {
        let rows = group["rows"].as_array().expect("rows");
        assert!(!rows.is_empty(), "{group}");
        for row in rows {
            assert!(row["requests"].as_u64().expect("requests") > 0, "{row}");
            assert!(
                row["process"]["peak_rss_kib"].as_u64().expect("rss") > 0,
                "{row}"
            );
        }
    }
    let lb = &groups[2]["rows"];
    let points: Vec<f64> = lb
        .as_array()
        .expect("lb rows")
        .iter()
        .filter_map(|r| r["sweep"]["value"].as_f64())
        .collect();
    // Round robin at both points, the four other policies at the first.
    assert_eq!(points, [10.0, 10.0, 10.0, 10.0, 10.0, 20.0]);
    let systems: Vec<&str> = groups[3]["rows"]
        .as_array()
        .expect("lb-slow rows")
        .iter()
        .filter_map(|r| r["system"].as_str())
        .collect();
    assert_eq!(
        systems,
        [
            "sluice round_robin",
            "sluice least_request",
            "sluice least_time"
        ]
    );
    let io = groups[4]["rows"].as_array().expect("io rows");
    assert_eq!(io.len(), 4, "passthrough alone and sluice, 2 points each");
    assert_eq!(io[0]["load"]["think_ms"], serde_json::json!([100, 200]));
    // Every round accounts for its requests; the saturating groups' rounds
    // waited for their target to drain, and their groups say so.
    for group in groups {
        let saturating = matches!(group["name"].as_str(), Some("lb" | "io"));
        for row in group["rows"].as_array().expect("rows") {
            for round in row["rounds"].as_array().expect("rounds") {
                let n = |key: &str| {
                    round[key]
                        .as_u64()
                        .unwrap_or_else(|| panic!("{key}: {round}"))
                };
                assert_eq!(
                    n("carried_in") + n("sent"),
                    n("requests") + n("lost") + n("unanswered"),
                    "{round}"
                );
                assert_eq!(
                    round["drain"]["drained"].as_bool(),
                    saturating.then_some(true),
                    "{row}"
                );
            }
        }
        if saturating {
            let notes = group["notes"].to_string();
            assert!(notes.contains("no row inherits the backlog"), "{notes}");
        }
    }
    assert!(json["machine"]["cores"].as_u64().expect("cores") >= 1);

    // report.md: the tables.
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    for heading in [
        "Backend alone",
        "Proxy in front of the backend",
        "Load balancing",
        "IO-heavy",
    ] {
        assert!(md.contains(heading), "report.md lacks {heading}");
    }
    assert!(md.contains("| sluice -> petstore"), "{md}");

    // report.html: well formed, self-contained, with its charts.
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(&html, options)
        .expect("report.html is well formed");
    let charts = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "svg" && n.attribute("class") == Some("chart"))
        .count();
    assert!(charts >= 4, "{charts} charts");
    assert!(
        !html.contains("<script src") && !html.contains("<link "),
        "not self-contained"
    );

    assert!(leftovers("e2e").is_empty(), "{:?}", leftovers("e2e"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_port_in_use_is_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let out = scratch("port");
    let output = bench(
        &[
            "--only",
            "baseline",
            "--duration",
            "1s",
            "--port-base",
            &port,
        ],
        &out,
        "port",
        None,
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("port 127.0.0.1:{port} is in use")),
        "{stderr}"
    );
    assert!(stderr.contains("--port-base"), "{stderr}");
    assert!(leftovers("port").is_empty(), "{:?}", leftovers("port"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_flags_exit_2() {
    let out = scratch("flags");
    for args in [
        &["--only", "bogus"][..],
        &["--only", "peers"][..],
        &["--think", "2s..1s"][..],
        &["--rates", "0"][..],
        &["--runtimes", "tomcat"][..],
        &["--peers", "squid"][..],
    ] {
        let output = bench(args, &out, "flags", None);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// Run as a new user would: from a working directory with a relative
/// `--out`, with the real nginx and HAProxy when they are installed (nginx
/// resolves its -c against its -p prefix: every path it gets must be
/// absolute), in two rounds. Its output is not a terminal: no progress
/// line, so no carriage return and no escape sequence.
#[test]
fn a_relative_out_folder_works_with_the_real_peers_in_rounds() {
    let cwd = scratch("relative");
    let output = Command::new(sluice())
        .current_dir(&cwd)
        .args(["bench", "--only", "baseline,proxy,peers", "--rounds", "2"])
        .args([
            "--duration",
            "1s",
            "--warmup",
            "100ms",
            "--connections",
            "4",
        ])
        .args(["--out", "results/rel"])
        .env("SLUICE_BENCH_TEST_MARK", "relative")
        .output()
        .expect("run sluice bench");
    let stderr = text(&output.stderr);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("expected to take about "), "{stderr}");
    // A line per measured round instead of a progress line.
    assert!(stderr.contains(" [2/2]"), "{stderr}");
    for (name, out) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(
            !out.contains('\r') && !out.contains('\u{1b}'),
            "{name} holds terminal control characters: {out:?}"
        );
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cwd.join("results/rel/results.json")).expect("results.json"),
    )
    .expect("JSON");
    assert_eq!(json["settings"]["rounds"], 2);
    assert_no_estimate_note(&json);
    let mut systems = Vec::new();
    for group in json["groups"].as_array().expect("groups") {
        for row in group["rows"].as_array().expect("rows") {
            assert_eq!(row["rounds"].as_array().map(Vec::len), Some(2), "{row}");
            systems.push(row["system"].as_str().unwrap_or_default().to_string());
        }
    }
    for kind in bench::PeerKind::ALL {
        let peer = kind.name();
        let installed = bench::find_peer(kind).is_some();
        let rows = systems.iter().filter(|s| *s == peer).count();
        // Traefik and nghttpx cannot answer the baseline's bytes themselves.
        let expected = if matches!(peer, "traefik" | "nghttpx") {
            1
        } else {
            2
        };
        if installed {
            assert_eq!(rows, expected, "{peer}: baseline and proxy rows; {stderr}");
        } else {
            assert_eq!(rows, 0, "{peer} is not installed, yet has rows");
            testkit::skip(
                "a_relative_out_folder_works_with_the_real_peers_in_rounds",
                testkit::Need::Peer,
                &format!("{peer} is not installed, its rows are not checked (bash bench/install-peers.sh)"),
            );
        }
    }
    assert!(
        leftovers("relative").is_empty(),
        "{:?}",
        leftovers("relative")
    );
    let _ = std::fs::remove_dir_all(&cwd);
}

/// SIGTERM (a `kill`, a CI job's timeout) ends a run as Ctrl-C does: the
/// row in progress stops, the partial report is written and every
/// component is stopped, none left behind.
#[test]
fn sigterm_ends_the_run_and_leaves_no_process() {
    let out = scratch("sigterm");
    let mark = "sigterm";
    let mut child = Command::new(sluice())
        .args([
            "bench",
            "--only",
            "baseline",
            "--duration",
            "30s",
            "--warmup",
            "0s",
            "-q",
        ])
        .args(["--out", &out.display().to_string()])
        .env("SLUICE_BENCH_TEST_MARK", mark)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run sluice bench");
    // Its components are up (a process other than the bench carries the mark).
    let started = std::time::Instant::now();
    while leftovers(mark).len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no component started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The row is running once the load generator (in the bench process)
    // holds its connections: 128 by default, at least 64 counted here.
    while open_sockets(child.id()) < 64 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the row never started: {} sockets",
            open_sockets(child.id())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = child.wait().expect("wait for the bench");
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut stderr)
        .expect("read stderr");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the row was not cut short"
    );
    assert!(leftovers(mark).is_empty(), "{:?}", leftovers(mark));
    assert!(out.join("results.json").exists(), "no partial report");
    let _ = std::fs::remove_dir_all(&out);
}
