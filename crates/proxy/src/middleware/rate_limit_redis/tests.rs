//! The limiter's own logic, without Redis: its settings, the keys it
//! counts under, what each error means, when Redis is taken for down and
//! asked again, and what `on_failure` answers. The decisions themselves
//! are tested against a real Redis (tests/it/rate_limit_redis).

use super::*;

fn settings(redis: &str) -> RateLimitSettings {
    serde_saphyr::from_str(&format!("rate: 10/s\nstore: redis\nredis: {{ {redis} }}\n")).unwrap()
}

fn try_limiter(redis: &str) -> anyhow::Result<RedisLimiter> {
    let config = settings(redis);
    RedisLimiter::new(&config, config.redis.as_ref().unwrap(), "api", 2)
}

fn limiter(redis: &str) -> RedisLimiter {
    try_limiter(redis).unwrap()
}

const URL: &str = "url: \"redis://127.0.0.1:9\", timeout: 5ms";

#[test]
fn bad_settings_are_refused_without_repeating_the_password() {
    let err = try_limiter("url: \"redis://127.0.0.1:9\", timeout: 0s")
        .unwrap_err()
        .to_string();
    assert!(err.contains("redis.timeout: 0"), "{err}");
    let config = serde_saphyr::from_str::<RateLimitSettings>(
        "rate: 2000000/s\nstore: redis\nredis: { url: \"redis://127.0.0.1:9\" }\n",
    )
    .unwrap();
    let err = RedisLimiter::new(&config, config.redis.as_ref().unwrap(), "api", 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("microsecond"), "{err}");
    let err = try_limiter("url: \"redis://:hunter2@127.0.0.1:notaport\"")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("redis.url") && !err.contains("hunter2"),
        "{err}"
    );
    let err = try_limiter(&format!("{URL}, ca_file: /etc/ssl/ca.pem"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("rediss://"), "{err}");
    let err = format!(
        "{:#}",
        try_limiter(&format!("{URL}, password_file: /nonexistent/redis-pw")).unwrap_err()
    );
    assert!(err.contains("/nonexistent/redis-pw"), "{err}");
}

#[test]
fn keys_carry_the_prefix_and_long_ones_are_hashed() {
    let shared = &limiter(URL).shared;
    assert_eq!(
        shared.key(KeyOf::Ip("10.0.0.1".parse().unwrap())),
        "sluice:rate:api:10.0.0.1"
    );
    let at_most = "k".repeat(MAX_KEY);
    assert_eq!(
        shared.key(KeyOf::Text(at_most.clone())),
        format!("sluice:rate:api:{at_most}")
    );
    // A client's megabyte header is not a megabyte Redis key, and two long
    // values stay two keys.
    let long = shared.key(KeyOf::Text("x".repeat(1 << 20)));
    let other = shared.key(KeyOf::Text(format!("{}y", "x".repeat((1 << 20) - 1))));
    let hex = long.strip_prefix("sluice:rate:api:").unwrap();
    assert!(
        hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "{long}"
    );
    assert_ne!(long, other);
    let prefixed = limiter(&format!("{URL}, prefix: \"tenant-a:\""));
    assert_eq!(prefixed.shared.key(KeyOf::Text("t".into())), "tenant-a:t");
}

/// The error Redis answers with `line` (a RESP error line).
fn server_error(line: &str) -> RedisError {
    redis::parse_redis_value(line.as_bytes())
        .unwrap()
        .extract_error()
        .unwrap_err()
}

#[test]
fn each_error_is_named_by_what_an_operator_must_fix() {
    let cases = [
        (
            server_error("-WRONGPASS invalid username-password pair\r\n"),
            Cause::Authentication,
        ),
        (
            server_error("-NOAUTH Authentication required.\r\n"),
            Cause::Authentication,
        ),
        (
            server_error("-NOPERM this user has no permissions to run 'evalsha'\r\n"),
            Cause::Permission,
        ),
        (
            server_error("-OOM command not allowed when used memory > 'maxmemory'.\r\n"),
            Cause::Refused,
        ),
        (
            server_error("-ERR user_script:3: Script attempted to access nonexistent global\r\n"),
            Cause::Refused,
        ),
        (
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into(),
            Cause::Unavailable,
        ),
    ];
    for (err, cause) in cases {
        assert_eq!(Cause::of(&err), cause, "{err}");
    }
    // The script answering with another shape than {allowed, wait, left}
    // (a proxy pointed at something else, a script changed under it) is
    // a protocol fault, not a count.
    for wrong in [
        redis::Value::Okay,
        redis::Value::Array(vec![redis::Value::Int(1), redis::Value::Int(0)]),
        redis::Value::BulkString(b"1 0 0".to_vec()),
    ] {
        let err: RedisError = redis::from_redis_value::<(u8, u64, u64)>(wrong.clone())
            .unwrap_err()
            .into();
        assert_eq!(Cause::of(&err), Cause::Protocol, "{wrong:?}: {err}");
    }
    assert!(!Cause::Timeout.is_fault() && !Cause::Unavailable.is_fault());
    assert!(Cause::Authentication.is_fault() && Cause::Protocol.is_fault());
}

/// The `/stats.json` figures of a limiter.
fn figures(limiter: &RedisLimiter) -> StoreCounts {
    limiter.counts()
}

#[test]
fn timeouts_in_a_row_or_one_error_take_redis_down_and_one_probe_at_a_time_asks_again() {
    let limiter = limiter(URL);
    let shared = &limiter.shared;
    for _ in 1..TIMEOUTS_DOWN {
        shared.failed(Cause::Timeout, &NO_ANSWER);
    }
    assert!(shared.up.load(Relaxed), "a slow answer or two is no outage");
    shared.answered();
    for _ in 1..TIMEOUTS_DOWN {
        shared.failed(Cause::Timeout, &NO_ANSWER);
    }
    assert!(
        shared.up.load(Relaxed),
        "an answer between starts the count again"
    );
    shared.failed(Cause::Timeout, &NO_ANSWER);
    assert!(!shared.up.load(Relaxed));
    assert!(!figures(&limiter).up);
    // Down: no request asks until the probe is due; then exactly one.
    assert!(!shared.may_ask());
    shared.next_probe.store(0, Relaxed);
    assert!(shared.may_ask());
    assert!(!shared.may_ask(), "a second probe within PROBE_EVERY");
    shared.answered();
    assert!(shared.up.load(Relaxed) && shared.may_ask());
    shared.failed(Cause::Authentication, &"WRONGPASS");
    assert!(!shared.up.load(Relaxed), "an error is down at once");
    assert_eq!(figures(&limiter).errors, 2 * (TIMEOUTS_DOWN as u64 - 1) + 2);
}

fn status_of(flow: Flow) -> Option<u16> {
    match flow {
        Flow::Next => None,
        Flow::Answer(answer) => Some(answer.status.as_u16()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn while_redis_is_down_on_failure_answers_at_once() {
    let headers = http::HeaderMap::new();
    let request = RequestView::get(&headers);
    for (on_failure, status) in [("fail_closed", Some(503)), ("fail_open", None)] {
        let limiter = limiter(&format!("{URL}, on_failure: {on_failure}"));
        limiter.shared.failed(Cause::Unavailable, &"refused");
        // Not a wait for Redis: the answer comes from the request phase.
        assert_eq!(
            status_of(limiter.request(&request, &mut Exchange::default())),
            status
        );
        assert_eq!(figures(&limiter).fallbacks, 1);
    }
    // Up, the request waits for Redis's decision.
    let up = limiter(URL);
    assert!(matches!(
        up.request(&request, &mut Exchange::default()),
        Flow::Wait(_)
    ));
}

/// A wait of -5 µs from the script comes out of the redis crate as
/// 2^64 - 5: `Retry-After` stays within one interval (100 ms at 10/s).
#[test]
fn a_wait_from_redis_is_at_most_one_interval() {
    let limiter = limiter(URL);
    let wrapped: (u8, u64, u64) = redis::from_redis_value(redis::Value::Array(vec![
        redis::Value::Int(0),
        redis::Value::Int(-5),
        redis::Value::Int(0),
    ]))
    .unwrap();
    assert_eq!(
        limiter.shared.retry_wait(wrapped.1),
        Duration::from_millis(100)
    );
    assert_eq!(limiter.shared.retry_wait(40_000), Duration::from_millis(40));
}
