//! `sluice bench --baseline results.json --max-regression 5%`: a run
//! against a recorded results.json (tests/fixtures/bench-baseline.json)
//! whose `petstore (sluice serve)` row claims a billion req/s in every
//! round, so that this run's row is deliberately slower: the run exits 99
//! naming it, writes the comparison, and reports the baseline's row this
//! run does not have as missing, not as a failure. The same row against
//! a baseline it beats passes.

use std::path::Path;

use serde_json::Value;

use crate::common::{bench, scratch, text};

const ARGS: [&str; 10] = [
    "--only",
    "baseline",
    "--rounds",
    "2",
    "--duration",
    "500ms",
    "--warmup",
    "100ms",
    "-c",
    "4",
];

fn recorded() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-baseline.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_slower_row_fails_the_gate_and_is_named() {
    let out = scratch("baseline-slower");
    let baseline = out.with_extension("json");
    std::fs::write(&baseline, recorded().to_string()).unwrap();
    let mut args = ARGS.to_vec();
    args.extend([
        "--baseline",
        baseline.to_str().unwrap(),
        "--max-regression",
        "5%",
    ]);
    let output = bench(&args, &out, "baseline-slower", None);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(99), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(
            "sluice bench: 1 row(s) regressed past 5.0%: baseline: petstore (sluice serve)"
        ),
        "{stderr}"
    );
    assert!(
        stdout.contains("1 regressed, 0 too noisy to judge"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "  REGRESSED baseline: petstore (sluice serve) (backend): req/s 1000000000 -> "
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("  missing   baseline: petstore bytes (nginx) (nginx)"),
        "{stdout}"
    );
    let comparison: Value =
        serde_json::from_slice(&std::fs::read(out.join("baseline.json")).unwrap()).unwrap();
    let verdicts: Vec<&str> = comparison["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["regressed", "missing"], "{comparison}");
    // The report is written whatever the verdict.
    assert!(out.join("results.json").is_file());
}

#[test]
fn a_row_that_kept_up_passes_the_gate() {
    let out = scratch("baseline-kept-up");
    let baseline = out.with_extension("json");
    let mut earlier = recorded();
    let row = &mut earlier["groups"][0]["rows"][0];
    row["requests_per_sec"] = 1.0.into();
    for round in row["rounds"].as_array_mut().unwrap() {
        round["requests_per_sec"] = 1.0.into();
    }
    std::fs::write(&baseline, earlier.to_string()).unwrap();
    let mut args = ARGS.to_vec();
    args.extend(["--baseline", baseline.to_str().unwrap()]);
    let output = bench(&args, &out, "baseline-kept-up", None);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("0 regressed, 0 too noisy to judge, 1 improved"),
        "{stdout}"
    );
}

#[test]
fn a_baseline_that_is_not_a_results_file_is_bad_input() {
    let out = scratch("baseline-bad");
    let baseline = out.with_extension("json");
    std::fs::write(&baseline, "{\"schema\": \"something else\"}").unwrap();
    let output = bench(
        &[
            "--only",
            "baseline",
            "--baseline",
            baseline.to_str().unwrap(),
        ],
        &out,
        "baseline-bad",
        None,
    );
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("not a sluice bench results.json"),
        "{}",
        text(&output.stderr)
    );
    let output = bench(
        &["--only", "baseline", "--max-regression", "5%"],
        &out,
        "baseline-bad",
        None,
    );
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
}
