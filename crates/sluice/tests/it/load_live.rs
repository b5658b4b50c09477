//! `sluice load`'s live outputs while a run goes: `/metrics` scraped twice
//! during the run (the counts move; promtool accepts the text), OTLP
//! metrics received by a real OpenTelemetry Collector (the one
//! bench/otelcol/build.sh builds), and the JSON-lines stream, whose
//! intervals add up to the report.
//!
//! Without promtool or the collector, those parts print a SKIP line
//! (`SLUICE_REQUIRE_PROMTOOL=1`, `SLUICE_REQUIRE_OTELCOL=1` make it a failure).

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;
use testkit::{Backend, Collector};

use crate::common::{load, scratch, sluice};

/// `sluice load ARGS` in the background, stderr piped (it says where
/// `/metrics` is).
fn spawn(args: &[&str]) -> Child {
    Command::new(sluice())
        .arg("load")
        .arg("-q")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice load")
}

/// `sluice load` on `url` for 3 s over 2 connections at `rate`, with
/// `more` and `--json` into `dir`; it must succeed. The JSON report.
fn three_seconds_at(rate: &str, dir: &Path, url: &str, more: &[&str]) -> Value {
    let json = dir.join("report.json");
    let mut args = vec!["-d", "3s", "-c", "2", "--rate", rate, url];
    args.extend_from_slice(more);
    args.extend(["--json", json.to_str().unwrap()]);
    let output = load(&args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

/// The `/metrics` address the run printed on its first stderr line.
fn metrics_addr(child: &mut Child) -> SocketAddr {
    let mut line = String::new();
    BufReader::new(child.stderr.as_mut().expect("stderr piped"))
        .read_line(&mut line)
        .expect("a line");
    line.split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
}

fn scrape(addr: SocketAddr) -> String {
    let mut conn = TcpStream::connect(addr).expect("connect to /metrics");
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(
        answer.contains("Content-Type: text/plain; version=0.0.4"),
        "{answer}"
    );
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap()
}

/// The value of the series whose line starts with `series ` in `text`.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{series} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

#[test]
fn metrics_are_served_while_the_run_goes_and_promtool_accepts_them() {
    let petstore = testkit::serve(Backend::Petstore);
    let dir = scratch("load-live-metrics");
    let plan = dir.join("plan.yaml");
    std::fs::write(
        &plan,
        format!(
            "scenarios:\n  - name: pets\n    model: open\n    url: {}\n    connections: 4\n    stages: [{{ duration: 4s, target: 200 }}]\n    checks: [{{ status: 200 }}]\n    thresholds: [\"p99 < 10s\"]\n",
            petstore.url("/v1/pets")
        ),
    )
    .unwrap();
    let mut child = spawn(&[
        "-f",
        plan.to_str().unwrap(),
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let addr = metrics_addr(&mut child);
    let requests = "sluice_load_requests_total{scenario=\"pets\"}";
    // Two scrapes a second or more apart, both while the run goes on.
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        let text = scrape(addr);
        if text.contains(requests) && value(&text, requests) > 0.0 {
            break text;
        }
        assert!(Instant::now() < deadline, "no requests counted: {text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(1200));
    let second = scrape(addr);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended before the second scrape"
    );
    assert!(
        value(&second, requests) > value(&first, requests),
        "{first}\n{second}"
    );
    for series in [
        "sluice_load_responses_total{scenario=\"pets\",status=\"200\"}",
        "sluice_load_checks_total{scenario=\"pets\",check=\"status 200\",result=\"passed\"}",
        "sluice_load_latency_seconds_count{scenario=\"pets\"}",
        "sluice_load_phase_seconds_count{scenario=\"pets\",phase=\"waiting\"}",
        "sluice_load_target{scenario=\"pets\",kind=\"rate\"}",
        "sluice_load_threshold_passed{scenario=\"pets\",threshold=\"p99 < 10s\"}",
    ] {
        assert!(second.contains(series), "no {series} in\n{second}");
    }
    // The rate's target rises with the stage.
    let target = "sluice_load_target{scenario=\"pets\",kind=\"rate\"}";
    assert!(
        value(&second, target) > value(&first, target),
        "{first}\n{second}"
    );
    assert_eq!(
        value(
            &second,
            "sluice_load_threshold_passed{scenario=\"pets\",threshold=\"p99 < 10s\"}"
        ),
        1.0
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    // Once the run is over, nothing listens.
    assert!(TcpStream::connect(addr).is_err());

    let test = "metrics_are_served_while_the_run_goes_and_promtool_accepts_them";
    if Command::new("promtool").arg("--version").output().is_err() {
        testkit::skip(
            test,
            testkit::Need::Promtool,
            "promtool is not installed (apt-get install prometheus)",
        );
        return;
    }
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(second.as_bytes())
        .unwrap();
    let output = promtool.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics: {}{}\n--- the text:\n{second}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_metrics_endpoint_answers_only_metrics() {
    let petstore = testkit::serve(Backend::Petstore);
    let url = petstore.url("/v1/pets");
    let mut child = spawn(&[
        "-d",
        "3s",
        "-c",
        "1",
        "--metrics-listen",
        "127.0.0.1:0",
        &url,
    ]);
    let addr = metrics_addr(&mut child);
    for (request, status) in [
        ("GET / HTTP/1.1\r\n\r\n", "404"),
        ("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "405"),
        ("HEAD /metrics HTTP/1.1\r\n\r\n", "200"),
    ] {
        let mut conn = TcpStream::connect(addr).unwrap();
        conn.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{request:?}: {answer}"
        );
    }
    // A head that never ends is cut off, and the endpoint still answers.
    let mut hostile = TcpStream::connect(addr).unwrap();
    let junk = vec![b'a'; 16 * 1024];
    let _ = hostile.write_all(&junk);
    let mut answer = String::new();
    let _ = hostile.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    assert!(scrape(addr).contains("sluice_load_requests_total"));
    assert!(child.wait().unwrap().success());
}

#[test]
fn otlp_metrics_reach_the_collector_and_match_the_report() {
    let test = "otlp_metrics_reach_the_collector_and_match_the_report";
    let Some(collector) = Collector::start(test) else {
        return;
    };
    let petstore = testkit::serve(Backend::Petstore);
    let dir = scratch("load-live-otlp");
    let otlp = format!("http://{}", collector.http);
    let url = petstore.url("/v1/pets");
    let more = ["--otlp", &otlp, "--otlp-interval", "500ms"];
    let report = three_seconds_at("100", &dir, &url, &more);
    let requests = report["requests"].as_u64().unwrap();
    assert_eq!(report["live"]["otlp_failed"], 0, "{report}");
    assert!(
        report["live"]["otlp_pushed"].as_u64().unwrap() >= 3,
        "{report}"
    );
    // The last export holds the final figures.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let exports = collector.metric_exports();
        let counts: Vec<u64> = exports.iter().filter_map(requests_in).collect();
        if counts.last() == Some(&requests) {
            // Counts only grow: pushed as the run went, not only at its end.
            assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
            assert!(counts.iter().any(|&c| c > 0 && c < requests), "{counts:?}");
            let last = exports.last().unwrap();
            let names = metric_names(last);
            for name in [
                "sluice.load.latency",
                "sluice.load.phase",
                "sluice.load.errors",
                "sluice.load.target",
            ] {
                assert!(names.iter().any(|n| n == name), "no {name} in {names:?}");
            }
            let service = &last["resourceMetrics"][0]["resource"]["attributes"][0];
            assert_eq!(service["value"]["stringValue"], "sluice-load", "{last}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the collector never got {requests} requests: {counts:?}\n{}",
            collector.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `sluice.load.requests` of the `default` scenario in one export.
fn requests_in(export: &Value) -> Option<u64> {
    let metrics = export["resourceMetrics"][0]["scopeMetrics"][0]["metrics"].as_array()?;
    let requests = metrics
        .iter()
        .find(|m| m["name"] == "sluice.load.requests")?;
    let point = requests["sum"]["dataPoints"].get(0)?;
    assert_eq!(
        point["attributes"][0]["value"]["stringValue"], "default",
        "{point}"
    );
    point["asInt"]
        .as_str()
        .and_then(|n| n.parse().ok())
        .or_else(|| point["asInt"].as_u64())
}

fn metric_names(export: &Value) -> Vec<String> {
    export["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["name"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn json_lines_stream_each_interval_and_add_up_to_the_report() {
    let petstore = testkit::serve(Backend::Petstore);
    let dir = scratch("load-live-lines");
    let lines = dir.join("live.jsonl");
    let url = petstore.url("/v1/pets");
    let more = ["--threshold", "errors < 1%", "--json-lines"];
    let more = [&more[..], &[lines.to_str().unwrap()]].concat();
    let report = three_seconds_at("200", &dir, &url, &more);
    let text = std::fs::read_to_string(&lines).unwrap();
    let parsed: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (last, intervals) = parsed.split_last().unwrap();
    assert!(intervals.len() >= 3, "{text}");
    let mut sum = 0;
    for (i, interval) in intervals.iter().enumerate() {
        assert_eq!(interval["type"], "interval", "{interval}");
        assert_eq!(interval["scenario"], "default", "{interval}");
        assert_eq!(interval["start_s"].as_f64(), Some(i as f64), "{interval}");
        assert_eq!(interval["target_rate"].as_f64(), Some(200.0), "{interval}");
        sum += interval["requests"].as_u64().unwrap();
    }
    assert_eq!(Some(sum), report["requests"].as_u64(), "{text}");
    assert_eq!(last["type"], "summary", "{last}");
    assert_eq!(last["summary"]["passed"], true, "{last}");
    assert_eq!(
        last["summary"]["thresholds"][0]["threshold"], "errors < 1%",
        "{last}"
    );
}
