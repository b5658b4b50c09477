//! `sluice load` spread over processes: shards (`--shard i/N`) against one
//! server, each writing an interval log, and `sluice load merge` adding
//! them up. The checks are exact where the data is the same (the merge
//! against the histograms of the logs added here, a run against the merge
//! of its own log) and loose against a separate single run. `refusals`:
//! what merge will not add up; `apart`: shards that did not start
//! together, and the requests an open model left unsent.

mod apart;
mod refusals;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use base64::Engine as _;
use hdrhistogram::{
    serialization::{interval_log, Deserializer},
    Histogram,
};
use serde_json::Value;
use testkit::{serve, Backend};

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("sluice-load-shards-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn succeeded(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("the JSON report")).expect("JSON")
}

fn merge(args: &[&str]) -> Output {
    sluice()
        .args(["load", "merge"])
        .args(args)
        .output()
        .expect("run sluice load merge")
}

/// The committed logs of a two-shard open-model run (600 requests at 400/s),
/// written by the first version of the log format.
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/load-v1")
}

/// The untagged (latency) histograms of `logs`, added up.
fn added_latency(logs: &[PathBuf]) -> Histogram<u64> {
    let mut sum = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
    for log in logs {
        let text = std::fs::read(log).expect("log");
        for entry in interval_log::IntervalLogIterator::new(&text) {
            let Ok(interval_log::LogEntry::Interval(interval)) = entry else {
                continue;
            };
            if interval.tag().is_some() {
                continue;
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(interval.encoded_histogram())
                .expect("base64");
            let histogram: Histogram<u64> = Deserializer::new()
                .deserialize(&mut &bytes[..])
                .expect("a V2 histogram");
            sum.add(&histogram).expect("in range");
        }
    }
    sum
}

fn percentile(report: &Value, p: f64) -> u64 {
    report["latency"]["percentiles"]
        .as_array()
        .expect("percentiles")
        .iter()
        .find(|entry| entry["percentile"].as_f64() == Some(p))
        .and_then(|entry| entry["value_us"].as_u64())
        .expect("the percentile")
}

#[test]
fn shards_merged_count_exactly_and_match_their_histograms_added() {
    let server = serve(Backend::Petstore);
    let url = server.url("/v1/pets");
    let dir = scratch("merge");
    let shards = 3;
    let start_at = SystemTime::now() + Duration::from_millis(500);
    let start_at = start_at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    let children: Vec<(PathBuf, Child)> = (0..shards)
        .map(|index| {
            let log = dir.join(format!("shard-{index}.hlog"));
            let child = sluice()
                .args(["load", "-q", "-n", "3000", "-c", "6", "--shard"])
                .arg(format!("{index}/{shards}"))
                .args(["--start-at", &format!("{start_at:.3}"), "--log"])
                .arg(&log)
                .arg(&url)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a shard");
            (log, child)
        })
        .collect();
    let mut logs = Vec::new();
    for (log, child) in children {
        let text = succeeded(&child.wait_with_output().expect("a shard's output"));
        assert!(text.contains("1000 requests in"), "{text}");
        logs.push(log);
    }

    let merged_json = dir.join("merged.json");
    let text = succeeded(&merge(&[
        "--json",
        merged_json.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]));
    assert!(text.contains("Merged from 3 logs"), "{text}");
    assert!(text.contains("3000 requests in"), "{text}");
    assert!(text.contains("3 threads and 6 connections"), "{text}");
    let merged = json(&merged_json);
    assert_eq!(merged["requests"], 3000);
    assert_eq!(merged["status"]["200"], 3000);
    assert_eq!(merged["config"]["total_requests"], 3000);
    let intervals: u64 = merged["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .map(|i| i["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(intervals, 3000);

    // The same data added here: the same percentiles, exactly.
    let added = added_latency(&logs);
    assert_eq!(added.len(), 3000);
    for p in [50.0, 90.0, 99.0, 99.9] {
        assert_eq!(percentile(&merged, p), added.value_at_percentile(p), "p{p}");
    }
    assert_eq!(merged["latency"]["max_us"], added.max());

    // One process with the whole load: the same kind of figures (loose:
    // another run on a shared machine).
    let single_json = dir.join("single.json");
    succeeded(
        &sluice()
            .args(["load", "-q", "-n", "3000", "-c", "6", "--json"])
            .arg(&single_json)
            .arg(&url)
            .output()
            .expect("a single run"),
    );
    let single = json(&single_json);
    assert_eq!(single["requests"], 3000);
    for p in [50.0, 99.0] {
        let (ours, theirs) = (percentile(&merged, p), percentile(&single, p));
        assert!(
            ours <= theirs * 20 + 5_000 && theirs <= ours * 20 + 5_000,
            "p{p}: merged {ours}us, single {theirs}us"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_and_the_merge_of_its_own_log_report_the_same() {
    let server = serve(Backend::Petstore);
    let dir = scratch("same");
    let (log, run_json, merged_json) = (
        dir.join("run.hlog"),
        dir.join("run.json"),
        dir.join("merged.json"),
    );
    succeeded(
        &sluice()
            .args(["load", "-q", "-n", "500", "-c", "2", "-R", "1000", "--log"])
            .arg(&log)
            .arg("--json")
            .arg(&run_json)
            .arg(server.url("/v1/pets"))
            .output()
            .expect("a run"),
    );
    succeeded(&merge(&[
        "--json",
        merged_json.to_str().unwrap(),
        log.to_str().unwrap(),
    ]));
    let (run, merged) = (json(&run_json), json(&merged_json));
    for field in [
        "requests",
        "bytes_read",
        "latency",
        "uncorrected_latency",
        "errors",
        "status",
        "per_second",
        "intervals",
        "config",
    ] {
        assert_eq!(run[field], merged[field], "{field}");
    }
    let lateness = |report: &Value| report["schedule"]["lateness"].clone();
    assert_eq!(lateness(&run), lateness(&merged));
    assert_eq!(merged["merged_logs"], 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn merge_reads_the_committed_logs_of_the_first_version() {
    let dir = scratch("fixture");
    let merged_json = dir.join("merged.json");
    let text = succeeded(&merge(&[
        "--json",
        merged_json.to_str().unwrap(),
        fixture().to_str().unwrap(),
    ]));
    assert!(text.contains("Merged from 2 logs"), "{text}");
    assert!(text.contains("open model at 400 req/s"), "{text}");
    let merged = json(&merged_json);
    assert_eq!(merged["requests"], 600);
    assert_eq!(merged["config"]["connections"], 4);
    // The figures this version computed from those logs when they were committed.
    assert_eq!(percentile(&merged, 50.0), 388);
    assert_eq!(percentile(&merged, 99.0), 16_415);
    assert_eq!(merged["latency"]["max_us"], 30_991);
    assert_eq!(merged["uncorrected_latency"]["count"], 600);
    assert_eq!(merged["schedule"]["lateness"]["count"], 600);
    let logs: Vec<PathBuf> = (0..2)
        .map(|i| fixture().join(format!("shard-{i}.hlog")))
        .collect();
    assert_eq!(added_latency(&logs).value_at_percentile(50.0), 388);
    let _ = std::fs::remove_dir_all(&dir);
}

/// HdrHistogram's Python package (`pip install hdrhistogram`) reads the
/// logs on its own: the same count and percentiles.
#[test]
fn python_hdrhistogram_reads_the_logs() {
    let name = "python_hdrhistogram_reads_the_logs";
    let found = Command::new("python3")
        .args(["-c", "import hdrh"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !found {
        return testkit::skip(
            name,
            testkit::Need::Hdrh,
            "python3 with the hdrhistogram package (import hdrh) is not available; \
             install it with `pip install hdrhistogram` (.ci/run does)",
        );
    }
    let script = "import sys\n\
        from hdrh.histogram import HdrHistogram\n\
        from hdrh.log import HistogramLogReader\n\
        total = HdrHistogram(1, 60000000, 3)\n\
        for path in sys.argv[1:]:\n\
        \x20   reader = HistogramLogReader(path, HdrHistogram(1, 60000000, 3))\n\
        \x20   while True:\n\
        \x20       h = reader.get_next_interval_histogram()\n\
        \x20       if h is None:\n\
        \x20           break\n\
        \x20       if h.get_tag() is None:\n\
        \x20           total.add(h)\n\
        print(total.get_total_count(), *[total.get_value_at_percentile(p) for p in (50, 90, 99)], total.get_max_value())\n";
    let logs: Vec<PathBuf> = (0..2)
        .map(|i| fixture().join(format!("shard-{i}.hlog")))
        .collect();
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(&logs)
        .output()
        .expect("run python3");
    let said = succeeded(&output);
    let numbers: Vec<u64> = said
        .split_whitespace()
        .map(|n| n.parse().expect("a number"))
        .collect();
    let ours = added_latency(&logs);
    assert_eq!(numbers[0], 600, "{said}");
    // Within the histogram's precision (3 digits): the two libraries round
    // a rank the same way at these percentiles, but need not.
    let close = |theirs: u64, ours: u64| theirs.abs_diff(ours) * 1000 <= ours.max(1);
    for (theirs, p) in numbers[1..4].iter().zip([50.0, 90.0, 99.0]) {
        let ours = ours.value_at_percentile(p);
        assert!(close(*theirs, ours), "p{p}: python {theirs}, sluice {ours}");
    }
    assert!(close(numbers[4], ours.max()), "{said}");
}

#[test]
fn shards_come_from_a_kubernetes_job_index_and_bad_logs_are_refused() {
    let server = serve(Backend::Petstore);
    let dir = scratch("job");
    let log = dir.join("shard-1.hlog");
    let output = sluice()
        .args([
            "load", "-q", "-n", "10", "-c", "3", "--shards", "3", "--log",
        ])
        .arg(&log)
        .arg(server.url("/v1/pets"))
        .env("JOB_COMPLETION_INDEX", "1")
        .output()
        .expect("a shard");
    let text = succeeded(&output);
    // 10 over 3 shards: 4, 3, 3.
    assert!(text.contains("Shard 1/3"), "{text}");
    assert!(text.contains("3 requests in"), "{text}");

    let output = sluice()
        .args(["load", "-n", "10", "--shards", "3", "http://127.0.0.1:1/"])
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .expect("no index");
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("JOB_COMPLETION_INDEX"), "{said}");

    // A copy of a log is the same log: its requests would count twice.
    let twice = dir.join("twice.hlog");
    std::fs::copy(&log, &twice).expect("copy");
    let output = merge(&[log.to_str().unwrap(), twice.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("are the same log"), "{said}");

    // A log cut short (its process killed) has no summary.
    let text = std::fs::read_to_string(&log).expect("log");
    let cut = text
        .lines()
        .filter(|l| !l.starts_with("#sluice-run"))
        .collect::<Vec<_>>();
    std::fs::write(&twice, cut.join("\n") + "\n").expect("write");
    let output = merge(&[twice.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("the run did not finish"), "{said}");

    // Waiting for a log that never comes ends with what is missing.
    let output = merge(&["--expect", "2", "--wait", "300ms", log.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("1 of the 2 expected logs"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}
