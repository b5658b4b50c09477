//! Shards that did not start together: their intervals line up on the
//! wall clock (interval `k` of a log that started `d` seconds after the
//! first goes into merged interval `k + round(d)`), and the requests an
//! open model left unsent add up over the shards.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;
use testkit::{serve, serve_with, test_options, Backend, ServeOptions};

use super::{json, merge, scratch, sluice, succeeded};

/// Shard `index` of 2 of an open-model run against `url`, writing
/// `shard-INDEX.hlog` and `shard-INDEX.json` into `dir`.
fn shard(dir: &Path, index: u32, url: &str, load: &[&str]) -> (PathBuf, PathBuf, Child) {
    let log = dir.join(format!("shard-{index}.hlog"));
    let report = dir.join(format!("shard-{index}.json"));
    let child = sluice()
        .args(["load", "-q", "--shard", &format!("{index}/2")])
        .args(load)
        .arg("--log")
        .arg(&log)
        .arg("--json")
        .arg(&report)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a shard");
    (log, report, child)
}

fn finished(child: Child) {
    succeeded(&child.wait_with_output().expect("a shard's output"));
}

/// Requests per interval index (its start in seconds) of a report.
fn intervals(report: &Value) -> BTreeMap<u64, u64> {
    report["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .map(|i| {
            (
                i["start_s"].as_f64().unwrap().round() as u64,
                i["requests"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A log's `#[StartTime: ...]`, in unix seconds.
fn start_time(log: &Path) -> f64 {
    let text = std::fs::read_to_string(log).expect("the log");
    text.lines()
        .find_map(|l| l.strip_prefix("#[StartTime: "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|seconds| seconds.parse().ok())
        .expect("a StartTime line")
}

/// Waits (up to 30 s) until `log` holds `count` whole intervals.
fn until_intervals(log: &Path, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.matches("#sluice-window ").count() >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{log:?}: not {count} intervals yet"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn shards_started_seconds_apart_merge_with_aligned_intervals() {
    let server = serve(Backend::Petstore);
    let url = server.url("/v1/pets");
    let dir = scratch("apart");
    // 40 requests/s over 2 connections, one per shard, 3 s each.
    let load = ["-R", "40", "-c", "2", "-d", "3s"];
    let (log_0, report_0, first) = shard(&dir, 0, &url, &load);
    // The second shard starts once the first has measured two seconds.
    until_intervals(&log_0, 2);
    let (log_1, report_1, second) = shard(&dir, 1, &url, &load);
    finished(first);
    finished(second);

    let offset = (start_time(&log_1) - start_time(&log_0)).round() as u64;
    assert!(offset >= 2, "the shards started {offset} s apart");
    let merged_json = dir.join("merged.json");
    succeeded(&merge(&[
        "--json",
        merged_json.to_str().unwrap(),
        log_0.to_str().unwrap(),
        log_1.to_str().unwrap(),
    ]));
    let (ours, theirs) = (intervals(&json(&report_0)), intervals(&json(&report_1)));
    let mut expected = ours.clone();
    for (index, requests) in &theirs {
        *expected.entry(index + offset).or_default() += requests;
    }
    assert_eq!(intervals(&json(&merged_json)), expected);
    // Both shards sent in their first second: an offset of 0 would add
    // the second one's first second to the first one's.
    assert!(theirs[&0] > 0 && ours[&0] > 0, "{ours:?} {theirs:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn requests_left_unsent_by_each_shard_add_up() {
    // Each answer takes 100 ms: one connection per shard sends at most
    // about 10 requests a second of the 50 its timetable asks for.
    let server = serve_with(
        Backend::Static,
        ServeOptions {
            static_delay: Duration::from_millis(100),
            ..test_options()
        },
    );
    let url = server.url("/");
    let dir = scratch("unsent");
    let load = ["-R", "100", "-c", "2", "-d", "1s"];
    let shards: Vec<_> = (0..2)
        .map(|index| shard(&dir, index, &url, &load))
        .collect();
    let mut logs = Vec::new();
    let mut unsent = 0;
    for (log, report, child) in shards {
        finished(child);
        let own = json(&report)["schedule"]["unsent"]
            .as_u64()
            .expect("a shard's unsent count");
        assert!(own > 0, "shard {log:?} sent everything");
        unsent += own;
        logs.push(log);
    }
    let merged_json = dir.join("merged.json");
    let mut args = vec!["--json", merged_json.to_str().unwrap()];
    args.extend(logs.iter().map(|l| l.to_str().unwrap()));
    let text = succeeded(&merge(&args));
    assert_eq!(json(&merged_json)["schedule"]["unsent"], unsent, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
