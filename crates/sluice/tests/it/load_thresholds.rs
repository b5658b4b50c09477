//! `sluice load` in a CI step: each kind of threshold makes the run exit
//! 99 when, and only when, it fails (the same run passes a threshold that
//! holds), checks count without failing the run on their own, a threshold
//! with `abort_on_fail` stops the run after its grace, and a scenario
//! file's mistakes exit 2 naming the file, line and key.

use std::{
    path::PathBuf,
    process::Output,
    time::{Duration, Instant},
};

use testkit::{Backend, Behaviour, FakeServer};

use crate::common::{load, scratch};

fn code(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs `args` with `--threshold threshold` and checks the exit status.
fn exits(args: &[&str], threshold: &str, expected: i32) -> String {
    let mut all = vec!["--threshold", threshold];
    all.extend_from_slice(args);
    let output = load(&all);
    let shown = text(&output);
    assert_eq!(code(&output), expected, "`{threshold}`: {shown}");
    let verdict = if expected == 0 { "ok    " } else { "FAILED" };
    assert!(
        shown.contains(&format!("{verdict} {threshold}")),
        "`{threshold}`: {shown}"
    );
    shown
}

/// A scenario file in a scratch folder.
fn plan_file(name: &str, yaml: &str) -> PathBuf {
    let dir = scratch(&format!("plan-{name}"));
    let path = dir.join("plan.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

#[test]
fn latency_and_phase_thresholds_fail_only_when_the_figure_misses() {
    // Every answer 20 ms late.
    let server = FakeServer::start(Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(20),
    });
    let url = server.url("/");
    let args = ["-n", "24", "-c", "4", &url];
    exits(&args, "p50 >= 15ms", 0);
    exits(&args, "p99 < 5ms", 99);
    exits(&args, "ttfb.p50 >= 15ms", 0);
    exits(&args, "waiting.p(90) < 2ms", 99);
    exits(&args, "connect.max < 1s", 0);
    exits(&args, "max <= 1ms", 99);
}

#[test]
fn error_thresholds_fail_only_when_errors_are_too_many() {
    let broken = FakeServer::start(Behaviour::Malformed);
    let url = broken.url("/");
    let args = ["-n", "10", "-c", "1", &url];
    exits(&args, "errors > 50%", 0);
    exits(&args, "errors < 1%", 99);
    exits(&args, "errors.parse >= 10", 0);
    let healthy = FakeServer::start(Behaviour::Normal);
    let url = healthy.url("/");
    exits(&["-n", "50", "-c", "2", &url], "errors < 1%", 0);
    exits(&["-n", "50", "-c", "2", &url], "errors.timeout > 0", 99);
}

#[test]
fn status_thresholds_count_answers_outside_2xx_and_3xx() {
    let petstore = testkit::serve(Backend::Petstore);
    let missing = petstore.url("/nope");
    let args = ["-n", "20", "-c", "2", &missing];
    exits(&args, "non_2xx > 99%", 0);
    exits(&args, "failed < 1%", 99);
    let found = petstore.url("/v1/pets");
    exits(&["-n", "20", "-c", "2", &found], "non_2xx == 0", 0);
    exits(&["-n", "20", "-c", "2", &found], "requests > 20", 99);
    exits(&["-n", "20", "-c", "2", &found], "requests == 20", 0);
}

#[test]
fn rate_thresholds_compare_with_the_target_rate() {
    let quick = FakeServer::start(Behaviour::Normal);
    let url = quick.url("/");
    let open = ["--rate", "100", "-d", "1s", "-c", "4", &url];
    exits(&open, "rate >= 0.8 * target", 0);
    exits(&open, "rate >= 2 * target", 99);
    // How close a loaded machine keeps to the timetable is not asserted
    // (bench/open-pacing.sh measures it); far behind it is not.
    exits(&open, "unsent < 50", 0);
    // One connection, 100 ms an answer: at most 10/s of the 100 asked.
    let slow = FakeServer::start(Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(100),
    });
    let url = slow.url("/");
    let behind = ["--rate", "100", "-d", "1s", "-c", "1", &url];
    exits(&behind, "rate >= 0.8 * target", 99);
    exits(&behind, "unsent > 50", 0);
    // The closed model has no target rate: a threshold on it fails, and says why.
    let shown = exits(&["-n", "5", &url], "rate >= target", 99);
    assert!(shown.contains("no target rate"), "{shown}");
}

#[test]
fn check_thresholds_read_the_checks_and_a_failed_check_is_not_an_error() {
    let petstore = testkit::serve(Backend::Petstore);
    let yaml = format!(
        "scenarios:\n\
         \x20 - name: pets\n\
         \x20   url: {}\n\
         \x20   requests: [GET /v1/pets, GET /v1/pets/1]\n\
         \x20   total_requests: 40\n\
         \x20   connections: 2\n\
         \x20   checks:\n\
         \x20     - status: 200\n\
         \x20     - {{ name: first is catten, json_pointer: /0/name, equals: catten }}\n\
         \x20     - {{ header: content-type, contains: json }}\n",
        petstore.url("")
    );
    let path = plan_file("checks", &yaml);
    let file = path.to_str().unwrap();
    let json = path.with_extension("json");
    // Half the answers (one object, not a list) fail the JSON check.
    let passing = load(&["-f", file, "--threshold", "checks.status 200 == 100%"]);
    assert_eq!(code(&passing), 0, "{}", text(&passing));
    let failing = load(&[
        "-f",
        file,
        "--threshold",
        "checks.first is catten > 99%",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code(&failing), 99, "{}", text(&failing));
    let shown = text(&failing);
    assert!(
        shown.contains("50.000%  first is catten  (20 passed, 20 failed)"),
        "{shown}"
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // Failed checks are not transport errors.
    assert_eq!(report["errors"]["parse"], 0, "{report}");
    assert_eq!(report["status"]["200"], 40, "{report}");
    assert_eq!(report["checks"][1]["failed"], 20, "{report}");
    assert_eq!(report["passed"], false, "{report}");
    // All three together: 100 of 120 verdicts passed.
    let overall = load(&["-f", file, "--threshold", "checks > 83%"]);
    assert_eq!(code(&overall), 0, "{}", text(&overall));
    let overall = load(&["-f", file, "--threshold", "checks > 84%"]);
    assert_eq!(code(&overall), 99, "{}", text(&overall));
}

#[test]
fn scenario_thresholds_judge_their_scenario_and_plan_ones_all_together() {
    let quick = FakeServer::start(Behaviour::Normal);
    let slow = FakeServer::start(Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(40),
    });
    let yaml = |scenario_threshold: &str| {
        format!(
            "thresholds: [\"max >= 30ms\"]\n\
             scenarios:\n\
             \x20 - {{ name: quick, url: \"{}\", total_requests: 20, thresholds: [\"{scenario_threshold}\"] }}\n\
             \x20 - {{ name: slow, url: \"{}\", total_requests: 4 }}\n",
            quick.url("/"),
            slow.url("/")
        )
    };
    // The quick scenario alone is under 30 ms; all together are not.
    let path = plan_file("scoped-pass", &yaml("p99 < 30ms"));
    let json = path.with_extension("json");
    let output = load(&[
        "-f",
        path.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code(&output), 0, "{}", text(&output));
    // All together account for every request of both scenarios.
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("the plan's JSON")).expect("JSON");
    let accounting = &plan["overall"]["accounting"];
    assert_eq!(accounting["sent"], 24, "{accounting}");
    assert_eq!(accounting["unanswered"], 0, "{accounting}");
    assert_eq!(plan["overall"]["requests"], 24, "{accounting}");
    // Its settings are all together's too, not the first scenario's.
    assert_eq!(plan["overall"]["config"]["total_requests"], 24);
    assert_eq!(
        plan["overall"]["config"]["urls"].as_array().unwrap().len(),
        2
    );
    let shown = text(&output);
    assert!(
        shown.contains("Scenario quick") && shown.contains("Scenario slow"),
        "{shown}"
    );
    assert!(shown.contains("(scenario quick: "), "{shown}");
    assert!(shown.contains("(all scenarios: "), "{shown}");
    let path = plan_file("scoped-fail", &yaml("max >= 30ms"));
    let output = load(&["-f", path.to_str().unwrap()]);
    assert_eq!(code(&output), 99, "{}", text(&output));
    assert!(
        text(&output).contains("FAILED max >= 30ms  (scenario quick"),
        "{}",
        text(&output)
    );
}

#[test]
fn an_aborting_threshold_stops_the_run_after_its_grace() {
    let broken = FakeServer::start(Behaviour::Malformed);
    let yaml = format!(
        "scenarios:\n\
         \x20 - name: broken\n\
         \x20   url: \"{}\"\n\
         \x20   duration: 30s\n\
         \x20   connections: 1\n\
         \x20   thresholds:\n\
         \x20     - {{ threshold: \"errors < 1%\", abort_on_fail: true, grace: 1s }}\n",
        broken.url("/")
    );
    let path = plan_file("abort", &yaml);
    let started = Instant::now();
    let output = load(&["-f", path.to_str().unwrap()]);
    let took = started.elapsed();
    assert_eq!(code(&output), 99, "{}", text(&output));
    let shown = text(&output);
    assert!(
        shown.contains("Aborted: threshold `errors < 1%` on scenario broken failed at"),
        "{shown}"
    );
    // Not before the grace, and long before the 30 s.
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    // The same threshold that holds lets the run go to its end.
    let healthy = FakeServer::start(Behaviour::Normal);
    let yaml = yaml
        .replace(&broken.url("/"), &healthy.url("/"))
        .replace("duration: 30s", "duration: 2s");
    let path = plan_file("no-abort", &yaml);
    let output = load(&["-f", path.to_str().unwrap()]);
    assert_eq!(code(&output), 0, "{}", text(&output));
    assert!(!text(&output).contains("Aborted"), "{}", text(&output));
}

#[test]
fn bad_scenario_files_exit_2_naming_file_line_and_key() {
    let cases: [(&str, &str); 6] = [
        (
            "scenarios:\n  - name: a\n    url: http://127.0.0.1:1/\n    checks:\n      - { status: 200, staus: 201 }\n",
            ":5:24: scenarios[0].checks[0].staus: unknown field `staus`",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://127.0.0.1:1/\n    conections: 4\n",
            ":4:5: scenarios[0].conections: unknown field `conections`",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://127.0.0.1:1/\n    model: open\n    stages:\n      - { duration: 1s, target: -5 }\n",
            ":6:7: scenarios[0].stages: stages: stage 1's target must be a rate of 0 or more",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://127.0.0.1:1/\n    thresholds: [\"p99 < 5\"]\n",
            "scenarios[0].thresholds[0]: `p99 < 5`: a time needs a unit",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://127.0.0.1:1/\n    thresholds: [\"checks.nope > 1%\"]\n",
            "no check is named `nope`",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://127.0.0.1:1/\n  - name: a\n    url: http://127.0.0.1:1/\n",
            ":4:11: scenarios[1].name: `a` is the name of another scenario",
        ),
    ];
    for (i, (yaml, expected)) in cases.iter().enumerate() {
        let path = plan_file(&format!("bad-{i}"), yaml);
        let output = load(&["-f", path.to_str().unwrap()]);
        let shown = text(&output);
        assert_eq!(code(&output), 2, "{yaml}\n{shown}");
        let prefix = format!("sluice load: error: {}:", path.display());
        assert!(shown.starts_with(&prefix), "{yaml}\n{shown}");
        assert!(
            shown.contains(expected),
            "{yaml}\nexpected {expected}\n{shown}"
        );
        assert_eq!(shown.lines().count(), 1, "{shown}");
    }
}
