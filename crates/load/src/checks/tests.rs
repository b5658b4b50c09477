use super::*;

fn spec(yaml: &str) -> Result<Check, String> {
    let spec: CheckSpec = serde_saphyr::from_str(yaml).map_err(|err| err.to_string())?;
    spec.into_check()
}

fn one(yaml: &str) -> CheckSet {
    CheckSet::new(&[spec(yaml).expect("a valid check")], 1024).expect("one check")
}

fn captured(set: &CheckSet, headers: &[(&str, &str)], body: &[u8]) -> Captured {
    let mut captured = set.capture().expect("the check reads the answer");
    for (name, value) in headers {
        captured.header(name.as_bytes(), value.as_bytes());
    }
    captured.body(body);
    captured
}

const MS: Duration = Duration::from_millis(1);

#[test]
fn statuses_match_codes_and_classes() {
    let set = one("status: [2xx, 304]");
    assert_eq!(set.verdicts(204, None, MS), 1);
    assert_eq!(set.verdicts(304, None, MS), 1);
    assert_eq!(set.verdicts(404, None, MS), 0);
    assert_eq!(spec("status: 200").unwrap().name, "status 200");
    assert_eq!(
        spec("status: [2xx, 304]").unwrap().name,
        "status 2xx or 304"
    );
    for bad in ["status: 600", "status: 6xx", "status: []", "status: ok"] {
        let err = spec(bad).unwrap_err();
        assert!(err.contains("status"), "{bad}: {err}");
    }
}

#[test]
fn headers_are_present_equal_or_contain() {
    let set = one("{header: Content-Type, contains: json}");
    let json = captured(&set, &[("content-type", "application/json")], b"");
    assert_eq!(set.verdicts(200, Some(&json), MS), 1);
    let text = captured(&set, &[("Content-Type", "text/plain")], b"");
    assert_eq!(set.verdicts(200, Some(&text), MS), 0);
    let none = captured(&set, &[], b"");
    assert_eq!(set.verdicts(200, Some(&none), MS), 0);
    let present = one("header: x-id");
    let with = captured(&present, &[("X-Id", "7")], b"");
    assert_eq!(present.verdicts(200, Some(&with), MS), 1);
    let equals = one("{header: x-id, equals: 7}");
    let seven = captured(&equals, &[("x-id", "7")], b"");
    assert_eq!(equals.verdicts(200, Some(&seven), MS), 1);
}

#[test]
fn bodies_and_json_pointers() {
    let body = br#"[{"id":1,"name":"catten","tag":"cat"}]"#;
    let set = one("body_contains: catten");
    assert_eq!(set.verdicts(200, Some(&captured(&set, &[], body)), MS), 1);
    assert_eq!(set.verdicts(200, Some(&captured(&set, &[], b"x")), MS), 0);
    let name = one("{json_pointer: /0/name, equals: catten}");
    assert_eq!(name.verdicts(200, Some(&captured(&name, &[], body)), MS), 1);
    let id = one("{json_pointer: /0/id, equals: 1.0}");
    assert_eq!(id.verdicts(200, Some(&captured(&id, &[], body)), MS), 1);
    let missing = one("json_pointer: /1/id");
    let answer = captured(&missing, &[], body);
    assert_eq!(missing.verdicts(200, Some(&answer), MS), 0);
    let not_json = captured(&missing, &[], b"<html>");
    assert_eq!(missing.verdicts(200, Some(&not_json), MS), 0);
}

#[test]
fn a_body_over_the_limit_is_cut_and_fails_json() {
    let checks = [spec("json_pointer: /a").unwrap()];
    let set = CheckSet::new(&checks, 8).unwrap();
    let mut answer = set.capture().unwrap();
    answer.body(br#"{"a": "a long value"}"#);
    assert_eq!(answer.body.len(), 8);
    assert!(answer.truncated);
    assert_eq!(set.verdicts(200, Some(&answer), MS), 0);
    answer.clear();
    answer.body(br#"{"a":1}"#);
    assert_eq!(set.verdicts(200, Some(&answer), MS), 1);
}

#[test]
fn times_and_several_checks_set_one_bit_each() {
    let checks: Vec<Check> = ["status: 200", "max_time: 10ms", "body_contains: ok"]
        .iter()
        .map(|yaml| spec(yaml).unwrap())
        .collect();
    let set = CheckSet::new(&checks, 64).unwrap();
    let answer = captured(&set, &[], b"ok");
    assert_eq!(set.verdicts(200, Some(&answer), MS), 0b111);
    assert_eq!(set.verdicts(500, Some(&answer), 20 * MS), 0b100);
    // Status and time alone capture nothing.
    let plain = CheckSet::new(&checks[..2], 64).unwrap();
    assert!(plain.capture().is_none());
}

#[test]
fn a_check_that_cannot_fail_is_refused() {
    let cases = [
        ("{status: 200, extra: 1}", "unknown field `extra`"),
        ("{statuss: 200}", "unknown field `statuss`"),
        ("{name: x}", "needs one rule"),
        ("{status: 200, body_contains: a}", "one rule"),
        ("{body_contains: ''}", "empty text"),
        ("{header: a, contains: ''}", "empty text"),
        ("{contains: a}", "needs one rule"),
        (
            "{status: 200, equals: 1}",
            "goes with `header` or `json_pointer`",
        ),
        ("{header: 'bad name'}", "not a header name"),
        ("{json_pointer: name}", "not a JSON pointer"),
        ("{max_time: 0s}", "fails every answer"),
        ("{max_time: soon}", "not a duration"),
        ("{name: 'a > b', status: 200}", "may not hold"),
    ];
    for (yaml, expected) in cases {
        let err = spec(yaml).expect_err(yaml);
        assert!(err.contains(expected), "{yaml}: {err}");
    }
}
