use std::{path::Path, time::Duration};

use super::*;

fn parse_str(text: &str) -> Result<Config, ConfigError> {
    parse(text, Path::new("sluice.yaml"), |name| match name {
        "BACKEND" => Some("http://127.0.0.1:8080".into()),
        _ => None,
    })
}

const GOOD: &str = "\
workers: 2
listeners:
  - address: 127.0.0.1:8000
upstreams:
  petstore:
    hosts: [ \"${BACKEND}\", \"http://127.0.0.1:8081\" ]
    timeouts: { connect: 500ms, request: 5s }
    retries: 1
routes:
  - { path: /v1/pets, match: exact, methods: [GET], upstream: petstore }
  - { path: /, upstream: petstore }
admin: { address: 127.0.0.1:9901 }
limits: { max_header_bytes: 16KiB, max_body_bytes: 100MB }
";

#[test]
fn a_good_file_parses_with_defaults_filled_in() {
    let config = parse_str(GOOD).unwrap();
    assert_eq!(config.workers, Some(2));
    let petstore = &config.upstreams["petstore"];
    assert_eq!(petstore.hosts[0].value.url, "http://127.0.0.1:8080");
    assert_eq!(petstore.timeouts.connect, Duration::from_millis(500));
    assert_eq!(petstore.pool.max_idle, 1024);
    assert_eq!(config.routes[0].match_kind, PathMatch::Exact);
    assert_eq!(config.routes[1].match_kind, PathMatch::Prefix);
    assert_eq!(config.limits.max_header_bytes, 16 * 1024);
    assert_eq!(config.limits.max_body_bytes, 100_000_000);
    assert_eq!(config.limits.header_read_timeout, Duration::from_secs(10));
}

#[test]
fn the_saturation_keys_have_their_defaults_and_refuse_bad_values() {
    let petstore = &parse_str(GOOD).unwrap().upstreams["petstore"];
    assert_eq!(petstore.max_connecting, 256);
    assert_eq!(petstore.timeouts.queue, Duration::from_secs(10));
    assert_eq!(petstore.health.panic_threshold, 50);
    assert_eq!(petstore.max_pending, None, "bounded by timeouts.queue");

    let err = error_with(8, "    max_connecting: 0");
    assert_eq!(
        (err.line, err.key.as_str(), err.message.as_str()),
        (8, "upstreams.petstore.max_connecting", "must be at least 1")
    );
    let err = error_with(8, "    health: { panic_threshold: 101 }");
    assert_eq!(
        (err.line, err.key.as_str()),
        (8, "upstreams.petstore.health.panic_threshold")
    );
    assert!(err.message.contains("0 to 100"), "{err}");
    let err = error_with(7, "    timeouts: { queue: forever }");
    assert_eq!(
        (err.line, err.key.as_str()),
        (7, "upstreams.petstore.timeouts.queue")
    );
}

/// Replaces one line of `GOOD` (1-based) and returns the error.
fn error_with(line: usize, replacement: &str) -> ConfigError {
    let mut lines: Vec<&str> = GOOD.lines().collect();
    lines[line - 1] = replacement;
    parse_str(&lines.join("\n")).unwrap_err()
}

#[test]
fn unknown_keys_name_line_key_and_a_suggestion() {
    let err = error_with(8, "    retires: 1");
    assert_eq!(
        (err.line, err.key.as_str()),
        (8, "upstreams.petstore.retires")
    );
    assert!(err.message.contains("did you mean `retries`?"), "{err}");
    assert!(
        err.to_string()
            .starts_with("sluice.yaml:8:5: upstreams.petstore.retires: unknown field"),
        "{err}"
    );
}

#[test]
fn bad_values_name_their_line_and_key() {
    let err = error_with(7, "    timeouts: { connect: soon, request: 5s }");
    assert_eq!(
        (err.line, err.key.as_str()),
        (7, "upstreams.petstore.timeouts.connect")
    );
    assert!(err.message.contains("invalid duration `soon`"), "{err}");

    let err = error_with(13, "limits: { max_header_bytes: 16 furlongs }");
    assert_eq!(err.key, "limits.max_header_bytes");
    assert!(err.message.contains("invalid size"), "{err}");

    let err = error_with(1, "workers: many");
    assert_eq!((err.line, err.key.as_str()), (1, "workers"));
}

#[test]
fn cross_checks_point_at_the_value() {
    let err = error_with(
        10,
        "  - { path: /v1/pets, methods: [GET], upstream: petshop }",
    );
    assert_eq!((err.line, err.key.as_str()), (10, "routes[0].upstream"));
    assert!(
        err.message
            .contains("no upstream named `petshop`; defined: petstore"),
        "{err}"
    );

    let err = error_with(3, "  - address: localhost:8000");
    assert_eq!((err.line, err.key.as_str()), (3, "listeners[0].address"));

    let err = error_with(6, "    hosts: [ \"ftp://x:1\" ]");
    assert_eq!(
        (err.line, err.key.as_str()),
        (6, "upstreams.petstore.hosts[0]")
    );

    let err = error_with(6, "    hosts: [ \"http://x:1\" ]\n    protocol: h2");
    assert_eq!(err.key, "upstreams.petstore.hosts[0]");
    assert!(
        err.message.contains("HTTP/2 over TLS; use https://"),
        "{err}"
    );
    let err = error_with(6, "    hosts: [ \"https://x:1\" ]\n    protocol: h2c");
    assert!(err.message.contains("h2c is HTTP/2 without TLS"), "{err}");
    let err = error_with(6, "    hosts: [ \"https://x:1\" ]\n    protocol: h3");
    assert_eq!(err.key, "upstreams.petstore.protocol");
    let err = error_with(6, "    hosts: [ \"http://x:1\" ]\n    tls: { ca: ca.pem }");
    assert!(
        err.message.contains("TLS settings need https:// hosts"),
        "{err}"
    );

    let err = error_with(11, "  - { path: v1, upstream: petstore }");
    assert_eq!(err.key, "routes[1].path");

    let err = error_with(12, "admin: { address: 127.0.0.1:8000 }");
    assert!(err.message.contains("also a listener"), "{err}");

    let err = error_with(
        10,
        "  - { path: /v1/pets, methods: [\"G T\"], upstream: petstore }",
    );
    assert_eq!(err.key, "routes[0].methods[0]");
}

#[test]
fn environment_errors_point_at_the_reference() {
    let text = GOOD.replace("${BACKEND}", "${NOT_SET:?the petstore URL}");
    let err = parse_str(&text).unwrap_err();
    assert_eq!((err.line, err.column), (6, 15));
    assert!(
        err.message.contains("NOT_SET is not set: the petstore URL"),
        "{err}"
    );
}

#[test]
fn unreadable_files_name_the_file() {
    let err = load(Path::new("/nonexistent/sluice.yaml")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/sluice.yaml: cannot read the file"),
        "{err}"
    );
}

#[test]
fn sizes() {
    assert_eq!(units::parse_size("4096"), Some(4096));
    assert_eq!(units::parse_size("32KiB"), Some(32 * 1024));
    assert_eq!(units::parse_size("10 MB"), Some(10_000_000));
    assert_eq!(units::parse_size("1GiB"), Some(1 << 30));
    assert_eq!(units::parse_size("1.5MB"), None);
    assert_eq!(units::parse_size("MB"), None);
}

const CHAINED: &str = "\
listeners: [{ address: 127.0.0.1:8000 }]
upstreams:
  a: { hosts: [\"http://127.0.0.1:8080\"] }
middleware:
  limit: { rate_limit: { rate: 100/s } }
  inside: { ip_filter: { allow: [10.0.0.0/8] } }
chains:
  default: [correlation, metrics, limit]
routes:
  - { path: /, chain: default, upstream: a }
  - { path: /x, chain: [inside, cors], upstream: a }
";

/// Replaces one line of `CHAINED` (1-based) and returns the error.
fn chain_error_with(line: usize, replacement: &str) -> ConfigError {
    let mut lines: Vec<&str> = CHAINED.lines().collect();
    lines[line - 1] = replacement;
    parse_str(&lines.join("\n")).unwrap_err()
}

#[test]
fn chains_and_middleware_parse() {
    let config = parse_str(CHAINED).unwrap();
    assert!(matches!(
        config.middleware.0["limit"],
        HandlerSettings::RateLimitSettings(_)
    ));
    assert_eq!(config.chains["default"].len(), 3);
    assert!(matches!(
        config.routes[1].chain.as_ref().unwrap().value,
        ChainRef::List(ref names) if names == &["inside", "cors"]
    ));
}

#[test]
fn middleware_mistakes_name_line_and_key() {
    let err = chain_error_with(8, "  default: [correlation, metrics, limt]");
    assert_eq!(
        (err.line, err.key.as_str()),
        (8, "chains.default[2]"),
        "{err}"
    );
    assert!(err.message.contains("no middleware named `limt`"), "{err}");

    let err = chain_error_with(10, "  - { path: /, chain: nope, upstream: a }");
    assert_eq!(
        (err.line, err.key.as_str()),
        (10, "routes[0].chain"),
        "{err}"
    );

    let err = chain_error_with(11, "  - { path: /x, chain: [jwt], upstream: a }");
    assert!(
        err.message
            .contains("needs settings under `middleware.jwt`"),
        "{err}"
    );

    let err = chain_error_with(5, "  limit: { rate_limit: { rate: 100/d } }");
    assert_eq!(
        (err.line, err.key.as_str()),
        (5, "middleware.limit.rate_limit.rate"),
        "{err}"
    );

    let err = chain_error_with(6, "  inside: { ip_filter: { allow: [10.0.0.0/33] } }");
    assert_eq!(
        (err.line, err.key.as_str()),
        (6, "middleware.inside.ip_filter.allow[0]"),
        "{err}"
    );

    let err = chain_error_with(5, "  limit: { rate_limt: { rate: 100/s } }");
    assert_eq!(err.line, 5, "{err}");
    assert!(err.message.contains("did you mean `rate_limit`?"), "{err}");

    let err = chain_error_with(5, "  limit: { rate_limit: { rate: 100/s, brust: 3 } }");
    assert_eq!(err.key, "middleware.limit.rate_limit.brust", "{err}");
    assert!(err.message.contains("did you mean `burst`?"), "{err}");
}

#[test]
fn handler_settings_fail_where_they_are_written() {
    // (line 6 of CHAINED, the start of the error it gives: the column of the value)
    let cases = [
        (
            "  inside: { correlation: { header: \"x id\" } }",
            "sluice.yaml:6:36: middleware.inside.correlation.header: `x id` is not a valid header name",
        ),
        (
            "  inside: { cors: { methods: [GET, \"P T\"] } }",
            "sluice.yaml:6:36: middleware.inside.cors.methods[1]: `P T` is not an HTTP method",
        ),
        (
            "  inside: { jwt: { jwks: k.json, algorithms: [RS256, none] } }",
            "sluice.yaml:6:54: middleware.inside.jwt.algorithms[1]: JWT algorithm \"none\" (unsigned tokens) is never accepted",
        ),
        (
            "  inside: { jwt: { jwks_url: \"ftp://idp/keys\", algorithms: [RS256] } }",
            "sluice.yaml:6:30: middleware.inside.jwt.jwks_url: `ftp://idp/keys` is not an http:// or https:// URL with a host",
        ),
        (
            "  inside: { access_log: { fields: [status, statsu] } }",
            "sluice.yaml:6:44: middleware.inside.access_log.fields[1]: unknown variant `statsu`, expected one of time,",
        ),
        (
            "  inside: { access_log: { mask: [\"a:b\"] } }",
            "sluice.yaml:6:34: middleware.inside.access_log.mask[0]: `a:b` is not a valid header name",
        ),
        (
            "  inside: { headers: { request: { set: { x-env: \"a\\nb\" } } } }",
            "sluice.yaml:6:49: middleware.inside.headers.request.set.x-env: `a\\nb` is not a valid header value",
        ),
        (
            "  inside: { fault: { abort: { status: 200, percent: 5 } } }",
            "sluice.yaml:6:39: middleware.inside.fault.abort.status: status must be 400-599, not 200",
        ),
        (
            "  inside: { fault: { delay: { duration: 1s, percent: 101 } } }",
            "sluice.yaml:6:54: middleware.inside.fault.delay.percent: percent must be between 0 and 100, not 101",
        ),
        (
            "  inside: { rate_limit: { rate: 1/s, key: \"header:\" } }",
            "sluice.yaml:6:43: middleware.inside.rate_limit.key: `header:` is not a key: use client_ip, header:NAME or claim:NAME",
        ),
        (
            "  inside: { rate_limit: { rate: 1/s, burst: 0 } }",
            "sluice.yaml:6:38: middleware.inside.rate_limit.burst: invalid value: integer `0`, expected a nonzero u32",
        ),
    ];
    for (line, expected) in cases {
        let shown = chain_error_with(6, line).to_string();
        assert!(
            shown.starts_with(expected),
            "{shown}\nshould start with\n{expected}"
        );
    }
    let err = chain_error_with(6, "  inside: { access_log: { fields: [statsu] } }");
    assert!(err.message.ends_with("did you mean `status`?"), "{err}");
    let err = chain_error_with(
        6,
        "  inside: { headers: { response: { add: { \"x y\": v } } } }",
    );
    assert_eq!(
        err.to_string(),
        "sluice.yaml:6:43: middleware.inside.headers.response.add.x y: `x y` is not a valid header name"
    );
}

#[test]
fn a_value_from_the_environment_is_kept_out_of_the_key_too() {
    // Found by the `config` fuzz target: the value landed in the key's
    // path of an unknown-field error, which only the message was
    // scrubbed of.
    let text = "admin: { address: 127.0.0.1:9901, token:7 \"${SECRET}\" }\n";
    let err = parse(text, Path::new("sluice.yaml"), |name| {
        (name == "SECRET").then(|| "s3cr3t-fuzz-value".to_string())
    })
    .unwrap_err();
    assert!(!err.to_string().contains("s3cr3t"), "{err}");
    assert!(err.key.contains("(redacted)"), "{err}");
    assert_eq!(err.line, 1);
}

#[test]
fn an_error_is_one_line_whatever_the_key_holds() {
    // Found by the `config` fuzz target: a malformed mapping put a line
    // break (YAML folds the two carriage returns into one) into the key's
    // path, and the error onto two lines.
    let text = "admin: { address: 127.0.0.1:9901, token:x \"a\r\rb\" }\n";
    let err = parse_str(text).unwrap_err();
    let shown = err.to_string();
    assert!(!shown.chars().any(char::is_control), "{shown:?}");
    assert!(shown.contains("\\n"), "{shown:?}");
}
