//! `sluice bench`'s middleware `oidc` row end to end: with the OpenID
//! provider of bench/oidc installed, the row's setup (the provider, the
//! scripted login through sluice) gives a session whose every request is
//! answered 200 by the upstream; without it, the row is left out with a
//! note and the rest of the group runs. Nothing here asserts on speed.

use crate::common;

use std::{path::PathBuf, process::Command};

use common::{assert_no_estimate_note, leftovers, schema_errors, scratch, sluice, text};

/// `sluice bench --only middleware --handlers oidc`, short rows, one round.
fn run(out: &std::path::Path, mark: &str, provider: Option<&str>) -> serde_json::Value {
    let mut command = Command::new(sluice());
    command
        .args(["bench", "--only", "middleware", "--handlers", "oidc"])
        .args(["--duration", "500ms", "--warmup", "200ms", "--rounds", "1"])
        .args([
            "--connections",
            "4",
            "--out",
            &out.display().to_string(),
            "-q",
        ])
        .env("SLUICE_BENCH_TEST_MARK", mark)
        .env("RUST_LOG", "warn");
    if let Some(provider) = provider {
        command.env("SLUICE_OIDC_PROVIDER", provider);
    }
    let output = command.output().expect("run sluice bench");
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("results.json")).expect("results.json"),
    )
    .expect("results.json is JSON");
    let errors = schema_errors(&json);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_no_estimate_note(&json);
    assert!(leftovers(mark).is_empty(), "{:?}", leftovers(mark));
    json
}

fn middleware(json: &serde_json::Value) -> &serde_json::Value {
    &json["groups"][0]
}

fn labels(group: &serde_json::Value) -> Vec<&str> {
    group["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|row| row["label"].as_str())
        .collect()
}

#[test]
fn the_oidc_row_loads_a_logged_in_session_answered_by_the_upstream() {
    let test = "the_oidc_row_loads_a_logged_in_session_answered_by_the_upstream";
    let provider = std::env::var_os("SLUICE_OIDC_PROVIDER")
        .map(PathBuf::from)
        .or_else(|| {
            Some(PathBuf::from(std::env::var_os("HOME")?).join(".cache/sluice/oidc/provider.mjs"))
        })
        .filter(|script| script.is_file());
    let Some(provider) = provider.filter(|_| bench::find_program("node").is_some()) else {
        return testkit::skip(
            test,
            testkit::Need::Oidc,
            "no OIDC provider or no node (bash bench/oidc/install.sh; needs node and npm)",
        );
    };
    let out = scratch("oidc-row");
    let json = run(&out, "oidc-row", Some(&provider.display().to_string()));
    let group = middleware(&json);
    assert_eq!(group["name"], "middleware");
    assert_eq!(
        labels(group),
        ["empty chain", "default chain", "oidc"],
        "{:#?}",
        group["notes"]
    );
    let row = &group["rows"][2];
    assert!(row["requests"].as_u64().expect("requests") > 0, "{row}");
    // Every answer a 200: no error of any kind, no 302 to the login (the
    // handler itself never answers 200, so each came from the upstream).
    let errors = &row["errors"];
    for kind in [
        "connect",
        "read",
        "write",
        "timeout",
        "parse",
        "non_2xx_3xx",
        "unexpected_status",
    ] {
        assert_eq!(errors[kind], 0, "{kind}: {row}");
    }
    let reasons = row["not_comparable"].as_array().expect("not_comparable");
    assert!(
        !reasons
            .iter()
            .any(|r| r.as_str().is_some_and(|r| r.contains("status"))),
        "{reasons:?}"
    );
    // The answers are the petstore's, the size of the empty chain's (a
    // 302 to the login, with its URL and cookie, is several times larger).
    let per_answer = |row: &serde_json::Value| {
        row["bytes_per_sec"].as_f64().expect("bytes")
            / row["requests_per_sec"].as_f64().expect("rps")
    };
    let (empty, oidc) = (per_answer(&group["rows"][0]), per_answer(row));
    assert!(
        (empty - oidc).abs() < empty * 0.05,
        "{empty} B against {oidc} B"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn without_the_provider_the_oidc_row_is_left_out_with_a_note() {
    let out = scratch("oidc-missing");
    let json = run(&out, "oidc-missing", Some("/nonexistent/oidc/provider.mjs"));
    let group = middleware(&json);
    assert_eq!(labels(group), ["empty chain", "default chain"]);
    let notes: Vec<&str> = group["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with("No `oidc` row: ")
            && (n.contains("bench/oidc/install.sh") || n.contains("node is not installed"))),
        "{notes:#?}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
