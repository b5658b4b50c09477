use super::*;
use crate::upstream::retry::tests::policy;

#[test]
fn only_idempotent_requests_with_their_body_in_hand_replay_once() {
    assert!(replay_after_stale(&Method::GET, true, false));
    assert!(replay_after_stale(&Method::PUT, true, false));
    assert!(!replay_after_stale(&Method::POST, true, false));
    assert!(
        !replay_after_stale(&Method::GET, false, false),
        "body streamed"
    );
    assert!(
        !replay_after_stale(&Method::GET, true, true),
        "already replayed"
    );
}

#[test]
fn refused_streams_are_resent_within_the_retries() {
    assert!(resend_after_refused(0, 2, true));
    assert!(resend_after_refused(1, 2, true));
    assert!(!resend_after_refused(2, 2, true));
    assert!(!resend_after_refused(0, 2, false), "the body is gone");
    assert!(!resend_after_refused(0, 0, true), "no retries");
}

#[test]
fn failed_attempts_go_again_only_when_listed_safe_within_retries_and_budget() {
    let listed = "retry_on: [connect_failure, reset, 503]";
    let get = true;
    let post = false;
    // (retry_on, failure, attempts made, retries, safe, goes again, why)
    let table = [
        (
            listed,
            Attempt::Reset,
            0,
            2,
            get,
            true,
            "a GET reset, retries left",
        ),
        (listed, Attempt::Reset, 1, 2, get, true, "the second retry"),
        (listed, Attempt::Reset, 2, 2, get, false, "retries spent"),
        (listed, Attempt::Reset, 0, 0, get, false, "retries: 0"),
        (
            listed,
            Attempt::Reset,
            0,
            2,
            post,
            false,
            "a POST is not sent twice",
        ),
        (
            listed,
            Attempt::Status(503),
            0,
            2,
            get,
            true,
            "a listed status",
        ),
        (
            listed,
            Attempt::Status(502),
            0,
            2,
            get,
            false,
            "an unlisted status",
        ),
        (
            listed,
            Attempt::ConnectFailure,
            0,
            2,
            post,
            true,
            "nothing was sent",
        ),
        (
            "",
            Attempt::ConnectFailure,
            0,
            2,
            get,
            true,
            "connect_failure by default",
        ),
        (
            "",
            Attempt::Reset,
            0,
            2,
            get,
            false,
            "reset is not a default",
        ),
        (
            "retry_on: []",
            Attempt::ConnectFailure,
            0,
            2,
            get,
            false,
            "nothing listed",
        ),
    ];
    for (yaml, attempt, attempts, retries, safe, expected, why) in table {
        let got = may_retry(&policy(yaml), attempt, attempts, retries, safe, 0);
        assert_eq!(
            got, expected,
            "{why}: {yaml:?} {attempt:?} {attempts}/{retries}"
        );
    }
}

#[test]
fn the_budget_is_asked_last_and_caps_retries() {
    // At most one retry a second (no requests counted, so the minimum).
    let p = policy("retry_on: [reset]\nretry_budget: { percent: 0, min_per_second: 1 }");
    assert!(!may_retry(&p, Attempt::Reset, 0, 2, false, 0), "a POST");
    assert!(
        !may_retry(&p, Attempt::Reset, 2, 2, true, 0),
        "no retries left"
    );
    assert!(
        may_retry(&p, Attempt::Reset, 0, 2, true, 0),
        "the refusals spent nothing"
    );
    assert!(
        !may_retry(&p, Attempt::Reset, 1, 2, true, 0),
        "the budget is spent"
    );
    let next_second = 1_000_000_000;
    assert!(may_retry(&p, Attempt::Reset, 1, 2, true, next_second));
}

#[test]
fn a_retry_goes_to_another_host_or_back_to_one_that_still_answers() {
    let (failed, other) = (HostId::new(0), HostId::new(1));
    // (failure, next host in, hosts in, where the retry goes, why)
    let table = [
        (Attempt::Reset, Some(other), 2, Some(other), "another host"),
        (
            Attempt::ConnectFailure,
            Some(other),
            2,
            Some(other),
            "another host",
        ),
        (
            Attempt::Reset,
            None,
            1,
            Some(failed),
            "the only host, again",
        ),
        (
            Attempt::Status(503),
            None,
            1,
            Some(failed),
            "the only host, again",
        ),
        (Attempt::Reset, None, 0, None, "ejected meanwhile"),
        (
            Attempt::ConnectFailure,
            None,
            1,
            None,
            "it would refuse again",
        ),
    ];
    for (attempt, next, healthy, expected, why) in table {
        assert_eq!(
            retry_host(failed, attempt, next, || healthy),
            expected,
            "{why}"
        );
    }
    let counted = std::cell::Cell::new(false);
    retry_host(failed, Attempt::Reset, Some(other), || {
        counted.set(true);
        1
    });
    assert!(
        !counted.get(),
        "hosts in are counted only without a next one"
    );
}

#[test]
fn a_failed_connect_gives_up_without_retries_and_answers_503_without_another_host() {
    use AfterConnectFailure::{GiveUp, NoHealthyHost, Retry};
    // (attempts made, retries, another host in, what follows)
    let table = [
        (0, 2, true, Retry),
        (1, 2, true, Retry),
        (2, 2, true, GiveUp),
        (0, 0, true, GiveUp),
        (0, 0, false, GiveUp),
        (0, 2, false, NoHealthyHost),
    ];
    for (attempts, retries, another, expected) in table {
        let got = after_connect_failure(attempts, retries, || another);
        assert_eq!(
            got, expected,
            "{attempts}/{retries}, another host: {another}"
        );
    }
}

/// One request's attempts, in order: what each came to and what the
/// decision is, for every rule that decides (the same on all four
/// protocol pairs, since they all ask `Retries::decide`).
#[test]
fn the_decisions_of_one_request_in_a_table() {
    use Then::{Answer, Replay, Resend, Retry};
    use Tried::{Answered, NoConnection, Refused, Reset, Stale};
    let ok = Answered(StatusCode::OK);
    let unavailable = Answered(StatusCode::SERVICE_UNAVAILABLE);
    // An answer that came while the body was still going up (its request
    // body is not in hand).
    let early_503 = Answered(StatusCode::SERVICE_UNAVAILABLE);
    let listed = "retry_on: [connect_failure, reset, 503]";
    let (get, post) = (Method::GET, Method::POST);
    // (why, retry_on, retries, method, body in hand, [(tried, then)])
    type Steps<'a> = &'a [(Tried, Then)];
    let table: &[(&str, &str, u32, &Method, bool, Steps<'_>)] = &[
        ("an answer stands", listed, 2, &get, true, &[(ok, Answer)]),
        (
            "a listed status goes to another attempt, then its answer stands",
            listed,
            2,
            &get,
            true,
            &[(unavailable, Retry(Attempt::Status(503))), (ok, Answer)],
        ),
        (
            "a listed status of a POST stands",
            listed,
            2,
            &post,
            true,
            &[(unavailable, Answer)],
        ),
        (
            "a listed status stands once the retries are spent",
            listed,
            1,
            &get,
            true,
            &[
                (unavailable, Retry(Attempt::Status(503))),
                (unavailable, Answer),
            ],
        ),
        (
            "an early answer (the body was still going up) stands",
            listed,
            2,
            &post,
            false,
            &[(early_503, Answer)],
        ),
        (
            "an early answer stands even for a GET: its body is not in hand",
            listed,
            2,
            &get,
            false,
            &[(early_503, Answer)],
        ),
        (
            "a stale pooled connection is replayed once, on a new one",
            listed,
            0,
            &get,
            true,
            &[(Stale, Replay), (Stale, Answer)],
        ),
        (
            "a replay spends no retry and a retry allows another replay",
            listed,
            1,
            &get,
            true,
            &[
                (Stale, Replay),
                (Reset, Retry(Attempt::Reset)),
                (Stale, Replay),
            ],
        ),
        (
            "a stale connection with a POST is not replayed",
            listed,
            2,
            &post,
            true,
            &[(Stale, Answer)],
        ),
        (
            "a stale connection with a streamed body is not replayed",
            listed,
            2,
            &get,
            false,
            &[(Stale, Answer)],
        ),
        (
            "a refused stream is resent, whatever the method, within retries",
            "retry_on: []",
            2,
            &post,
            true,
            &[(Refused, Resend), (Refused, Resend), (Refused, Answer)],
        ),
        (
            "a refused stream whose body is streaming is not",
            listed,
            2,
            &get,
            false,
            &[(Refused, Answer)],
        ),
        (
            "a reset goes again when listed",
            listed,
            1,
            &get,
            true,
            &[(Reset, Retry(Attempt::Reset)), (Reset, Answer)],
        ),
        (
            "a reset is not retried by default",
            "",
            2,
            &get,
            true,
            &[(Reset, Answer)],
        ),
        (
            "a failed connect goes again for any request",
            "",
            1,
            &post,
            false,
            &[
                (NoConnection, Retry(Attempt::ConnectFailure)),
                (NoConnection, Answer),
            ],
        ),
        (
            "nothing listed: a failed connect stands",
            "retry_on: []",
            2,
            &get,
            true,
            &[(NoConnection, Answer)],
        ),
    ];
    for (why, yaml, retries, method, in_hand, steps) in table {
        let policy = policy(yaml);
        let mut retries = Retries::new(*retries, method, *in_hand);
        for (n, (tried, then)) in steps.iter().enumerate() {
            let got = retries.decide(*tried, &policy, || 0, || true);
            assert_eq!(got, *then, "{why}: attempt {n} ({tried:?})");
            // A replay takes a new connection; a retry may take a pooled one.
            match got {
                Replay => assert!(retries.fresh_only(), "{why}: attempt {n}"),
                Retry(_) => assert!(!retries.fresh_only(), "{why}: attempt {n}"),
                _ => {}
            }
        }
    }
}

#[test]
fn a_failed_connect_asks_for_another_host_only_with_retries_left_and_the_budget_last() {
    let p = policy("retry_budget: { percent: 0, min_per_second: 1 }");
    let asked = std::cell::Cell::new(0);
    let elsewhere = |answer: bool| {
        asked.set(asked.get() + 1);
        answer
    };
    let mut none_left = Retries::new(0, &Method::GET, true);
    let then = none_left.decide(Tried::NoConnection, &p, || 0, || elsewhere(true));
    assert_eq!(
        (then, asked.get()),
        (Then::Answer, 0),
        "no retries: not asked"
    );
    let mut alone = Retries::new(2, &Method::GET, true);
    let then = alone.decide(Tried::NoConnection, &p, || 0, || elsewhere(false));
    assert_eq!((then, asked.get()), (Then::Answer, 1), "no other host");
    // The budget (one a second) was not spent by the refusal above.
    let mut first = Retries::new(2, &Method::GET, true);
    let retry = Then::Retry(Attempt::ConnectFailure);
    assert_eq!(first.decide(Tried::NoConnection, &p, || 0, || true), retry);
    assert_eq!(first.made(), 1);
    assert_eq!(
        first.decide(Tried::NoConnection, &p, || 0, || true),
        Then::Answer,
        "the budget is spent"
    );
}
