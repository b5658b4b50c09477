//! What `sluice load merge` refuses (exit 2, naming the files): the same
//! log twice, a whole run's as well as a shard's; shards of different
//! tests at the same URL; two runs of one shard; and shards of one
//! configuration that were started for another `--start-at` or
//! `--test-id`. Each log names its test and its run (`#sluice-test`).

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use testkit::{serve, Backend};

use super::{json, merge, scratch, sluice, succeeded};

/// Runs `sluice load -q ARGS --log DIR/NAME URL`; the log.
fn run(dir: &Path, name: &str, url: &str, args: &[&str]) -> PathBuf {
    let log = dir.join(name);
    succeeded(
        &sluice()
            .args(["load", "-q"])
            .args(args)
            .arg("--log")
            .arg(&log)
            .arg(url)
            .output()
            .expect("a run"),
    );
    log
}

/// `merge` of `logs` exits 2 with a message that says `says` and names
/// each log.
fn refused(logs: &[&Path], says: &str) {
    let args: Vec<&str> = logs.iter().map(|l| l.to_str().unwrap()).collect();
    let output = merge(&args);
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}\n{said}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(said.contains(says), "not `{says}`: {said}");
    for log in logs {
        assert!(said.contains(log.to_str().unwrap()), "{log:?}: {said}");
    }
}

/// Unix seconds a little ahead, as `--start-at` takes them.
fn soon() -> String {
    let at = SystemTime::now() + Duration::from_millis(200);
    format!(
        "{:.3}",
        at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
    )
}

#[test]
fn merge_refuses_the_same_log_twice_and_logs_of_different_tests() {
    let server = serve(Backend::Petstore);
    let url = server.url("/v1/pets");
    let dir = scratch("refusals");

    // A whole run (no --shard), given twice by name and as a copy.
    let whole = run(&dir, "run.hlog", &url, &["-n", "200", "-c", "2"]);
    refused(&[&whole, &whole], "are the same log");
    let copy = dir.join("copy.hlog");
    std::fs::copy(&whole, &copy).expect("copy");
    refused(&[&whole, &copy], "are the same log");
    // Once, it merges.
    let merged = dir.join("merged.json");
    succeeded(&merge(&[
        "--json",
        merged.to_str().unwrap(),
        whole.to_str().unwrap(),
    ]));
    assert_eq!(json(&merged)["requests"], 200);
    // Two runs of the same whole test: the test twice.
    let again = run(&dir, "again.hlog", &url, &["-n", "200", "-c", "2"]);
    refused(&[&whole, &again], "two runs of shard 0/1");

    // Shards of different tests at the same URL (the issue's: shard 0/4
    // of one test, shard 1/2 of another).
    let of_four = run(
        &dir,
        "four-0.hlog",
        &url,
        &["-n", "400", "-c", "4", "--shard", "0/4"],
    );
    let of_two = run(
        &dir,
        "two-1.hlog",
        &url,
        &["-n", "200", "-c", "4", "--shard", "1/2"],
    );
    refused(&[&of_four, &of_two], "are logs of different tests");
    // The same shard count, another -n: the message says which setting.
    let other_n = run(
        &dir,
        "other-n-0.hlog",
        &url,
        &["-n", "100", "-c", "4", "--shard", "0/2"],
    );
    refused(&[&of_two, &other_n], "has -n 100");
    // Two runs of one shard of one test.
    let first = run(
        &dir,
        "first-0.hlog",
        &url,
        &["-n", "200", "-c", "4", "--shard", "0/2"],
    );
    let second = run(
        &dir,
        "second-0.hlog",
        &url,
        &["-n", "200", "-c", "4", "--shard", "0/2"],
    );
    refused(&[&first, &second], "two runs of shard 0/2");
    // The parts of one test merge.
    succeeded(&merge(&[first.to_str().unwrap(), of_two.to_str().unwrap()]));

    // One configuration started for two start times, or named as two tests.
    let shard = |name: &str, index: &str, extra: &[&str]| {
        let mut args = vec!["-n", "200", "-c", "4", "--shard", index];
        args.extend_from_slice(extra);
        run(&dir, name, &url, &args)
    };
    let early = shard("early-0.hlog", "0/2", &["--start-at", &soon()]);
    let late = shard("late-1.hlog", "1/2", &["--start-at", &soon()]);
    refused(&[&early, &late], "--start-at");
    let named = shard("named-0.hlog", "0/2", &["--test-id", "nightly-1"]);
    let renamed = shard("renamed-1.hlog", "1/2", &["--test-id", "nightly-2"]);
    refused(&[&named, &renamed], "has --test-id nightly-2");
    let same_name = shard("same-name-1.hlog", "1/2", &["--test-id", "nightly-1"]);
    succeeded(&merge(&[
        named.to_str().unwrap(),
        same_name.to_str().unwrap(),
    ]));

    // The test's identity is in the log's header, before any interval.
    let text = std::fs::read_to_string(&named).expect("the log");
    let identity = text
        .lines()
        .find_map(|l| l.strip_prefix("#sluice-test "))
        .expect("a #sluice-test line");
    let identity: serde_json::Value = serde_json::from_str(identity).expect("JSON");
    assert_eq!(identity["test_id"], "nightly-1");
    assert_eq!(identity["shard"]["index"], 0);
    assert_eq!(identity["settings"]["total_requests"], 200);
    assert!(text.find("#sluice-test").unwrap() < text.find("#sluice-window").unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}
