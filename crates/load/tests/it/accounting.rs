//! Every request of a run's measured time is accounted for: those in
//! flight when it began (`carried_in`) and those sent during it (`sent`)
//! were answered, lost to an error, or are still waiting at its end
//! (`unanswered`), exactly: `carried_in + sent = requests + lost +
//! unanswered`. Against a backend that falls behind (one answer every
//! 10 ms, in order, for 500 users) most requests are still waiting when
//! the run stops, and the report says how many instead of showing a low
//! rate and no errors.

use std::time::Duration;

use http::Method;
use load::{Accounting, LoadConfig, Protocol, Report, ThinkTime};
use testkit::{BacklogServer, Behaviour, FakeServer, H2Options, H2Server};

use crate::support::run;

fn accounting(report: &Report) -> Accounting {
    report.accounting.expect("a run accounts for its requests")
}

fn assert_balanced(report: &Report) {
    let a = accounting(report);
    assert_eq!(
        a.carried_in + a.sent,
        report.requests + a.lost + a.unanswered,
        "{a:?}, {} answered",
        report.requests
    );
}

/// Waits until the server has read `count` requests: each request the
/// generator wrote reaches it, also those of connections closed at the stop.
fn wait_received(server: &BacklogServer, count: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let reached = runtime.block_on(testkit::until(Duration::from_secs(10), || async {
        server.received() >= count
    }));
    assert!(reached, "the server read {} of {count}", server.received());
    assert_eq!(server.received(), count, "more arrived than were sent");
}

/// 500 users thinking 1-2 s in front of a backend that answers 100 a
/// second: all 500 send at once, about 100 are answered in the second the
/// run lasts, and every other one is counted unanswered, none lost.
#[test]
fn requests_a_backend_still_holds_at_the_end_are_counted_unanswered() {
    let server = BacklogServer::start(Duration::from_millis(10));
    let url = format!("http://{}/passthrough/message", server.addr());
    let mut config = LoadConfig::new(&[(Method::POST, url)]).expect("valid URL");
    config.body = bytes::Bytes::from_static(br#"{"id":"1"}"#);
    config.connections = 500;
    config.duration = Duration::from_secs(1);
    config.think = Some(ThinkTime {
        min: Duration::from_secs(1),
        max: Duration::from_secs(2),
    });
    let report = run(&config);
    let a = accounting(&report);
    assert_balanced(&report);
    assert_eq!(a.carried_in, 0, "no warm-up: nothing carried in");
    assert_eq!(a.lost, 0, "{:?}", report.errors);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    // One request per user; the backend answers at most about 100 in 1 s.
    assert_eq!(a.sent, 500, "{a:?}");
    assert!(report.requests <= 150, "{} answered", report.requests);
    assert!(a.unanswered >= 350, "{a:?}");
    wait_received(&server, a.sent);
    let text = report.to_text();
    assert!(
        text.contains(&format!(
            "Unanswered at the end: {} of 500 requests",
            a.unanswered
        )),
        "{text}"
    );
}

/// With a warm-up, the requests in flight when measuring begins are
/// carried in; 50 connections that always keep one in flight carry in
/// all but the one being answered. Sent during the warm-up and the
/// measured time together: every request the server read.
#[test]
fn requests_in_flight_when_measuring_begins_are_carried_in() {
    let server = BacklogServer::start(Duration::from_millis(10));
    let mut config =
        LoadConfig::new(&[(Method::GET, format!("http://{}/", server.addr()))]).expect("valid");
    config.connections = 50;
    config.warmup = Duration::from_millis(300);
    config.duration = Duration::from_millis(300);
    let report = run(&config);
    let a = accounting(&report);
    assert_balanced(&report);
    assert!((49..=50).contains(&a.carried_in), "{a:?}");
    assert!((49..=50).contains(&a.unanswered), "{a:?}");
    assert_eq!(a.lost, 0, "{a:?}");
    // The server read those carried in during the warm-up, with the
    // ones the warm-up saw answered (not counted), and those sent after.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let expected = a.carried_in + a.sent + 1;
    assert!(
        runtime.block_on(testkit::until(Duration::from_secs(10), || async {
            server.received() >= expected
        })),
        "the server read {} of at least {expected}",
        server.received()
    );
}

/// A server that closes in the middle of every answer: each request is
/// lost, none answered, none left waiting once the connection is gone.
#[test]
fn requests_whose_connection_breaks_are_lost_not_unanswered() {
    let server = FakeServer::start(Behaviour::CloseMidResponse);
    let mut config = LoadConfig::new(&[(Method::GET, server.url("/"))]).expect("valid URL");
    config.connections = 4;
    config.duration = Duration::from_millis(500);
    let report = run(&config);
    let a = accounting(&report);
    assert_balanced(&report);
    assert_eq!(report.requests, 0);
    assert!(a.lost > 0, "{a:?}");
    assert_eq!(a.lost, report.errors.read, "{:?}", report.errors);
    assert!(a.unanswered <= 4, "{a:?}");
}

/// HTTP/2 streams are requests too: the accounts balance over streams
/// reset by the server, refused and sent again, and answered.
#[test]
fn http2_streams_balance_too() {
    let server = H2Server::start_with(H2Options {
        refuse_first: 1,
        reset_first: 1,
        ..H2Options::default()
    });
    let mut config = LoadConfig::new(&[(Method::GET, server.url("/"))]).expect("valid URL");
    config.protocol = Protocol::Http2;
    config.connections = 2;
    config.streams = 8;
    config.duration = Duration::from_millis(500);
    let report = run(&config);
    let a = accounting(&report);
    assert_balanced(&report);
    assert!(report.requests > 0);
    // The reset streams are lost; the refused ones were sent again.
    assert!(a.lost >= 2, "{a:?}, {:?}", report.errors);
}
