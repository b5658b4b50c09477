use std::path::Path;

use super::*;
use crate::Protocol;

fn plan(yaml: &str) -> Result<TestPlan, PlanError> {
    parse(yaml, Path::new("plan.yaml"))
}

fn error(yaml: &str) -> String {
    plan(yaml).expect_err("a mistake").to_string()
}

#[test]
fn a_full_file_becomes_its_scenarios() {
    let plan = plan(
        "sequential: true\n\
         thresholds: [\"p99 < 5ms\", {threshold: \"errors < 1%\", abort_on_fail: true, grace: 10s}]\n\
         scenarios:\n\
         \x20 - name: browse\n\
         \x20   model: open\n\
         \x20   protocol: h2\n\
         \x20   url: http://127.0.0.1:8080\n\
         \x20   headers: { X-Tenant: '7' }\n\
         \x20   requests:\n\
         \x20     - GET /v1/pets\n\
         \x20     - { method: POST, url: /v1/pets, body: '{}', weight: 3, headers: { Content-Type: application/json } }\n\
         \x20   connections: 16\n\
         \x20   streams: 4\n\
         \x20   start_rate: 100\n\
         \x20   stages: [{ duration: 10s, target: 1000 }, { duration: 20s, target: 1000 }]\n\
         \x20   checks: [{ status: 2xx }]\n\
         \x20   thresholds: [\"checks > 99.9%\"]\n\
         \x20 - name: users\n\
         \x20   url: http://127.0.0.1:8080/v1/pets\n\
         \x20   users: 50\n\
         \x20   think: 1s..2s\n\
         \x20   duration: 1m\n",
    )
    .unwrap();
    assert!(plan.sequential);
    assert_eq!(plan.thresholds.len(), 2);
    assert!(plan.thresholds[1].abort_on_fail);
    assert_eq!(plan.thresholds[1].grace, Duration::from_secs(10));
    let browse = &plan.scenarios[0];
    assert_eq!(browse.name, "browse");
    let c = &browse.config;
    assert_eq!(c.protocol, Protocol::Http2);
    assert_eq!(c.rate, Some(1000.0));
    assert_eq!(c.duration, Duration::from_secs(30));
    assert_eq!(c.stages.as_ref().unwrap().from, 100.0);
    assert_eq!(c.requests[1].url, "http://127.0.0.1:8080/v1/pets");
    assert_eq!(c.requests[1].method, http::Method::POST);
    assert_eq!(c.requests[1].weight, 3);
    assert_eq!(c.requests[1].body.as_deref(), Some(&b"{}"[..]));
    assert_eq!(c.headers[0].0, "x-tenant");
    assert_eq!(c.checks[0].name, "status 2xx");
    assert_eq!(browse.thresholds[0].threshold.text, "checks > 99.9%");
    let users = &plan.scenarios[1].config;
    assert_eq!(users.connections, 50);
    assert_eq!(users.rate, None);
    assert!(users.think.is_some());
    assert_eq!(users.duration, Duration::from_secs(60));
}

#[test]
fn user_stages_set_the_connections_to_their_peak() {
    let plan = plan(
        "scenarios:\n  - name: ramp\n    model: closed\n    url: http://h:1/\n    stages: [{duration: 5s, target: 12.5}, {duration: 5s, target: 0}]\n",
    )
    .unwrap();
    let c = &plan.scenarios[0].config;
    assert_eq!(c.connections, 13);
    assert_eq!(c.duration, Duration::from_secs(10));
    assert_eq!(c.rate, None);
}

#[test]
fn mistakes_name_the_line_and_the_key() {
    let cases: &[(&str, &str)] = &[
        ("scenarios: []\n", "plan.yaml: scenarios: give at least one scenario"),
        (
            "scenarios:\n  - name: a\n    url: http://h:1/\n    model: closed\n    rate: 10\n",
            "plan.yaml:5:11: scenarios[0].rate: a rate is the open model's: say `model: open`",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://h:1/\n    model: open\n",
            "plan.yaml:2:11: scenarios[0].rate: the open model needs a `rate`",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://h:1/\n    stages: [{duration: 1s, target: 1}]\n",
            "plan.yaml:2:11: scenarios[0].model: stages need the model said",
        ),
        (
            "scenarios:\n  - name: a\n    model: open\n    url: http://h:1/\n    rate: 5\n    stages: [{duration: 1s, target: 1}]\n",
            "plan.yaml:5:11: scenarios[0].rate: with stages the rates are the stages' targets",
        ),
        (
            "scenarios:\n  - name: a\n    requests: [/v1/pets]\n",
            "plan.yaml:3:16: scenarios[0].requests[0]: `/v1/pets` is a path: give the scenario a `url`",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://h:1/\n    requests: [http://other:2/]\n",
            "plan.yaml:3:10: scenarios[0].url: the requests go to http://other:2, not to http://h:1",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://h:1/\n    duration: soon\n",
            "plan.yaml:4:15: scenarios[0].duration: `soon` is not a duration",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://h:1/\n    threads: 4\n    connections: 2\n",
            "plan.yaml:2:11: scenarios[0]: --connections (2) must be at least --threads (4)",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://h:1/\n    body_file: missing.json\n",
            "plan.yaml:4:16: scenarios[0].body_file: missing.json:",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://h:1/\n    start_time: 5s\nsequential: true\n",
            "plan.yaml:4:17: scenarios[0].start_time: start_time goes with scenarios run together",
        ),
        (
            "thresholds: [{threshold: \"p99 < 1ms\", grace: 1s}]\nscenarios:\n  - name: a\n    url: http://h:1/\n",
            "plan.yaml:1:14: thresholds[0].grace: grace goes with abort_on_fail: true",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://h:1/\n    checks: [{status: 200}, {status: 200}]\n",
            "plan.yaml:4:29: scenarios[0].checks[1]: two checks are named `status 200`",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://h:1/\n    model: closed\n    start_rate: 4\n",
            "plan.yaml:5:17: scenarios[0].start_rate: start_rate goes with the open model",
        ),
        (
            "scenarios:\n  - name: \"\"\n    url: http://h:1/\n",
            "plan.yaml:2:11: scenarios[0].name: a name of 1 to 64 printable characters",
        ),
        (
            "scenarios:\n  - name: a\n    url: http://h:1/\n    requests: [\"GET a b\"]\n",
            "plan.yaml:4:16: scenarios[0].requests[0]: `GET a b`: expected `[METHOD ]URL`",
        ),
        ("scenarios: {a: 1}\n", "plan.yaml:1:12: scenarios:"),
    ];
    let mut wrong = Vec::new();
    for (yaml, expected) in cases {
        let shown = error(yaml);
        if !shown.starts_with(expected) {
            wrong.push(format!("{yaml}\nexpected {expected}\n     got {shown}"));
        }
        assert!(!shown.contains('\n'), "{shown}");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn nothing_in_a_file_unbounds_the_generator() {
    let many = |what: &str, n: usize| {
        let items: Vec<String> = (0..n)
            .map(|i| what.replace("{i}", &i.to_string()))
            .collect();
        items.join(", ")
    };
    let too_many_stages = format!(
        "scenarios:\n  - name: a\n    model: open\n    url: http://h:1/\n    stages: [{}]\n",
        many("{duration: 1s, target: 1}", crate::stages::MAX_STAGES + 1)
    );
    assert!(error(&too_many_stages).contains("at most 1000 stages"));
    let too_many_checks = format!(
        "scenarios:\n  - name: a\n    url: http://h:1/\n    checks: [{}]\n",
        many("{status: 200, name: c{i}}", crate::MAX_CHECKS + 1)
    );
    assert!(error(&too_many_checks).contains("at most 64 checks"));
    let rotation = "scenarios:\n  - name: a\n    url: http://h:1/\n    requests: [{url: /a, weight: 99999}, {url: /b, weight: 99998}]\n";
    assert!(error(rotation).contains("rotation of 199997 requests"));
    let threads =
        "scenarios:\n  - name: a\n    url: http://h:1/\n    threads: 5000\n    connections: 5000\n";
    assert!(error(threads).contains("--threads must be at most 1024"));
    let capture = "scenarios:\n  - name: a\n    url: http://h:1/\n    connections: 10000\n    check_body_limit: 1048576\n    checks: [{body_contains: x}]\n";
    assert!(
        error(capture).contains("lower check_body_limit"),
        "{}",
        error(capture)
    );
    let limit = "scenarios:\n  - name: a\n    url: http://h:1/\n    check_body_limit: 999999999\n";
    assert!(error(limit).contains("check_body_limit must be at most"));
    let scenarios = format!(
        "scenarios: [{}]\n",
        many("{name: s{i}, url: \"http://h:1/\"}", MAX_SCENARIOS + 1)
    );
    assert!(error(&scenarios).contains("at most 100 scenarios"));
}

fn load_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/LOAD.md");
    std::fs::read_to_string(path).expect("docs/LOAD.md")
}

#[test]
fn the_documented_example_reads() {
    let doc = load_md();
    let marker = "<!-- scenario example: crates/load tests parse it -->\n```yaml\n";
    let start = doc.find(marker).expect("the example's marker") + marker.len();
    let example = &doc[start..start + doc[start..].find("```").expect("its end")];
    let dir = std::env::temp_dir().join(format!("sluice-plan-doc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("pet.json"), br#"{"id":3,"name":"kitty"}"#).unwrap();
    let read = parse(example, &dir.join("ci.yaml"));
    std::fs::remove_dir_all(&dir).ok();
    let plan = read.unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(plan.scenarios.len(), 2);
    assert_eq!(plan.scenarios[0].config.checks.len(), 4);
    assert_eq!(plan.scenarios[1].config.connections, 200);
}

/// The keys serde expects where `yaml` puts an unknown one.
fn keys_expected(yaml: &str) -> Vec<String> {
    let shown = error(yaml);
    let (_, list) = shown
        .split_once("expected one of ")
        .unwrap_or_else(|| panic!("{shown}"));
    list.split(',')
        .map(|key| key.trim().trim_matches('`').to_string())
        .collect()
}

#[test]
fn every_key_of_a_scenario_file_is_documented() {
    let doc = load_md();
    let files = [
        "bogus: 1\nscenarios: []\n",
        "scenarios:\n  - { name: a, url: \"http://h:1/\", bogus: 1 }\n",
        "scenarios:\n  - { name: a, url: \"http://h:1/\", checks: [{bogus: 1}] }\n",
        "scenarios:\n  - { name: a, url: \"http://h:1/\", requests: [{url: /, bogus: 1}] }\n",
        "scenarios:\n  - { name: a, model: open, url: \"http://h:1/\", stages: [{bogus: 1}] }\n",
        "scenarios:\n  - { name: a, url: \"http://h:1/\", thresholds: [{bogus: 1}] }\n",
    ];
    let mut missing = Vec::new();
    for yaml in files {
        for key in keys_expected(yaml) {
            if !doc.contains(&format!("`{key}`")) {
                missing.push(key);
            }
        }
    }
    assert!(missing.is_empty(), "not in docs/LOAD.md: {missing:?}");
}
