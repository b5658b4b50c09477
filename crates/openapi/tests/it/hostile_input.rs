//! Hostile input against the petstore: huge and malformed query strings
//! and paths, deeply nested and enormous bodies, and values whose escapes
//! would make a message long: each gets a bounded answer, never a panic.

use openapi::Outcome;

use crate::requests::{get, post, CREATE, LIST};
use crate::{pointers, violations};

#[test]
fn hostile_query_strings() {
    // A megabyte of unknown parameters.
    let long = "a=b&".repeat(256 * 1024);
    assert_eq!(get("/v1/pets", Some(&long)), LIST);
    // A long value is cut in the message.
    let long_value = format!("limit={}", "9".repeat(100_000));
    let found = violations(get("/v1/pets", Some(&long_value)));
    assert_eq!(found.len(), 1);
    assert!(
        found[0].message.chars().count() < 120,
        "{}",
        found[0].message
    );
    assert!(found[0].message.contains('…'));
    // Many repeats give one violation.
    let repeated = "limit=5&".repeat(10_000);
    let found = violations(get("/v1/pets", Some(&repeated)));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].pointer, "/query/limit");
    assert_eq!(found[0].message, "must not be repeated");
    // Control characters and quotes are escaped.
    let found = violations(get("/v1/pets", Some("limit=%0a%22%1b")));
    assert_eq!(found[0].message, r#""\n\"\u{1b}" is not an integer"#);
    // Broken escapes in names and values.
    for query in ["limit=%", "limit=%4", "limit=%g0", "%=1&limit=%%%"] {
        assert_eq!(
            pointers(get("/v1/pets", Some(query))),
            ["/query/limit"],
            "{query}"
        );
    }
}

#[test]
fn hostile_paths() {
    let long = format!("/v1/pets/{}", "1".repeat(100_000));
    assert_eq!(pointers(get(&long, None)), ["/path/petId"]);
    let deep = "/v1".to_owned() + &"/pets".repeat(100_000);
    assert_eq!(get(&deep, None), Outcome::NoSuchPath);
    let slashes = "/".repeat(100_000);
    assert_eq!(get(&slashes, None), Outcome::NoSuchPath);
}

#[test]
fn deeply_nested_bodies_do_not_overflow() {
    // serde_json's recursion limit (128) rejects these before jsonschema sees them.
    for depth in [129, 1_000, 500_000] {
        let body = "[".repeat(depth) + &"]".repeat(depth);
        let found = violations(post(Some("application/json"), Some(&body)));
        assert_eq!(found.len(), 1);
        assert!(
            found[0].message.contains("recursion limit"),
            "{}",
            found[0].message
        );
        let depth = depth.min(100_000);
        let body = r#"{"id":1,"name":"x","tag":"#.to_owned()
            + &"{\"a\":".repeat(depth)
            + "1"
            + &"}".repeat(depth)
            + "}";
        let found = violations(post(Some("application/json"), Some(&body)));
        assert!(
            found[0].message.contains("recursion limit"),
            "{}",
            found[0].message
        );
    }
    // Within the limit the body is parsed and checked against the schema.
    let body = "[".repeat(100) + &"]".repeat(100);
    let found = violations(post(Some("application/json"), Some(&body)));
    assert_eq!(
        found[0].message,
        r#"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[… is not of type "object""#
    );
    let body =
        r#"{"id":1,"name":"x","extra":"#.to_owned() + &"[".repeat(120) + &"]".repeat(120) + "}";
    assert_eq!(post(Some("application/json"), Some(&body)), CREATE);
}

#[test]
fn huge_numbers_and_values_in_bodies() {
    let found = violations(post(
        Some("application/json"),
        Some(r#"{"id":1e400,"name":"x"}"#),
    ));
    assert!(
        found[0].message.starts_with("is not valid JSON"),
        "{}",
        found[0].message
    );
    // Beyond int64 (format: int64).
    let found = violations(post(
        Some("application/json"),
        Some(r#"{"id":123456789012345678901234567890,"name":"x"}"#),
    ));
    assert_eq!(found[0].pointer, "/body/id");
    let found = violations(post(
        Some("application/json"),
        Some(r#"{"id":1.5,"name":"x"}"#),
    ));
    assert_eq!(found[0].pointer, "/body/id");
    // A huge value is not echoed whole.
    let body = format!(r#"{{"id":1,"name":"{}"}}"#, "n".repeat(100_000));
    let found = violations(post(Some("application/json"), Some(&body)));
    assert_eq!(found[0].pointer, "/body/name");
    assert!(
        found[0].message.chars().count() < 120,
        "{}",
        found[0].message
    );
    let body = format!(r#"{{"id":"{}","name":"x"}}"#, "9".repeat(100_000));
    let found = violations(post(Some("application/json"), Some(&body)));
    assert!(
        found[0].message.chars().count() < 120,
        "{}",
        found[0].message
    );
    assert!(
        found[0].message.ends_with(r#"… is not of type "integer""#),
        "{}",
        found[0].message
    );
}

#[test]
fn escaped_values_are_cut_too() {
    let query = format!("limit={}", "%7F".repeat(1000));
    let found = violations(get("/v1/pets", Some(&query)));
    assert!(
        found[0].message.chars().count() < 120,
        "{}",
        found[0].message
    );
    let found = violations(get("/v1/pets", Some("limit=it's")));
    assert_eq!(found[0].message, r#""it's" is not an integer"#);
    let exact = "x".repeat(64);
    let found = violations(get("/v1/pets", Some(&format!("limit={exact}"))));
    assert_eq!(found[0].message, format!("\"{exact}\" is not an integer"));
    let found = violations(get("/v1/pets", Some(&format!("limit={exact}y"))));
    assert_eq!(found[0].message, format!("\"{exact}…\" is not an integer"));
}
