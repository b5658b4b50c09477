//! Hostile HTTP/3 clients (issue 42), written frame by frame
//! (`h3_support::raw`): resets that must cancel the upstream work at any
//! point, a rapid-reset flood bounded like HTTP/2's, malformed requests
//! that never reach an upstream, and QPACK and control-stream abuse that
//! closes the connection with the code RFC 9114 and RFC 9204 name.

use crate::h3_support;
use crate::support;

use std::time::Duration;

use h3_support::{
    proxy,
    raw::{self, Answer, RawH3},
};
use support::live::until;
use testkit::{H2Server, HostileUpstream, Step, TestCerts};

const H3_FRAME_UNEXPECTED: u64 = 0x105;
const H3_EXCESSIVE_LOAD: u64 = 0x107;
const H3_MESSAGE_ERROR: u64 = 0x10e;
const H3_MISSING_SETTINGS: u64 = 0x10a;
const H3_STREAM_CREATION_ERROR: u64 = 0x103;
const H3_ID_ERROR: u64 = 0x108;
const QPACK_DECOMPRESSION_FAILED: u64 = 0x200;
const QPACK_ENCODER_STREAM_ERROR: u64 = 0x201;
const QPACK_DECODER_STREAM_ERROR: u64 = 0x202;

const WAIT: Duration = Duration::from_secs(5);

/// An HTTP/1.1 upstream that answers `/slow` after 10 s, anything else at once.
fn upstream() -> HostileUpstream {
    HostileUpstream::start(|request| {
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfast".to_vec();
        if request.starts_with(b"GET /slow ") {
            return vec![Step::Wait(Duration::from_secs(10)), Step::Write(answer)];
        }
        vec![Step::Write(answer)]
    })
}

fn routes(url: &str, protocol: &str) -> String {
    format!("upstreams:\n  up: {{ hosts: [\"{url}\"], protocol: {protocol} }}\nroutes: [{{ path: /, upstream: up }}]\n")
}

/// A GET reset (RESET_STREAM and STOP_SENDING) after its stream has ended
/// and the upstream has the request: the upstream exchange is cancelled at
/// once, on an HTTP/1.1 upstream (its connection closed) and on an h2c one
/// (its stream reset), where before the reset went unheard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_after_the_request_ended_cancels_the_upstream_exchange() {
    let certs = TestCerts::generate();
    let h1 = upstream();
    let proxy1 = proxy(&certs, "", &routes(&h1.url(), "http1"));
    let client = RawH3::connect(proxy1.addr(), &certs).await;
    let (mut send, mut recv) = client.request(&raw::get("/slow"), true).await;
    assert!(until(WAIT, || async { h1.requests().len() == 1 }).await);
    raw::reset(&mut send, &mut recv);
    assert!(
        until(Duration::from_secs(3), || async {
            h1.open_connections() == 0
        })
        .await,
        "the HTTP/1.1 upstream connection outlived the reset"
    );

    let h2 = H2Server::start();
    let proxy2 = proxy(&certs, "", &routes(&h2.url(""), "h2c"));
    let client = RawH3::connect(proxy2.addr(), &certs).await;
    let (mut send, mut recv) = client.request(&raw::get("/delay/10000"), true).await;
    assert!(until(WAIT, || async { h2.requests() == 1 }).await);
    raw::reset(&mut send, &mut recv);
    assert!(
        until(Duration::from_secs(3), || async { h2.in_flight() == 0 }).await,
        "the h2c upstream stream outlived the reset"
    );
    assert_eq!(h2.cancelled(), 1);
}

/// The rapid-reset attack over HTTP/3: one connection opens request
/// streams and resets each at once. Past `http2.max_premature_resets` the
/// connection is closed with H3_EXCESSIVE_LOAD; the upstream saw at most
/// the budget plus the streams in flight at once; every one of them was
/// cancelled; and a client on another connection is served throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_flood_is_closed_with_excessive_load_and_costs_the_upstream_little() {
    let certs = TestCerts::generate();
    let up = upstream();
    let settings = "http2: { max_premature_resets: 20, premature_reset_window: 1m }\n";
    let h3 = "    h3: { max_concurrent_streams: 10 }\n";
    let proxy = proxy(
        &certs,
        h3,
        &format!("{settings}{}", routes(&up.url(), "http1")),
    );
    let attacker = RawH3::connect(proxy.addr(), &certs).await;
    let mut opened = 0;
    let flood = async {
        while opened < 3_000 {
            let Ok((mut send, mut recv)) = attacker.conn.open_bi().await else {
                break;
            };
            opened += 1;
            if send.write_all(&raw::get("/slow")).await.is_err() || send.finish().is_err() {
                break;
            }
            raw::reset(&mut send, &mut recv);
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(20), flood).await;
    assert_eq!(
        attacker.closed_with(WAIT).await,
        Some(H3_EXCESSIVE_LOAD),
        "after {opened} streams"
    );
    let reached = up.requests().len();
    assert!(
        reached <= 20 + 10 + 1,
        "{reached} of {opened} reset requests reached the upstream"
    );
    assert!(
        until(Duration::from_secs(3), || async {
            up.open_connections() == 0
        })
        .await,
        "reset requests still hold upstream connections"
    );
    let metrics = support::live::admin_get(proxy.admin(), "/metrics")
        .await
        .text();
    assert!(
        metrics.contains("sluice_guard_events_total{event=\"h2_reset_flood\"} 1"),
        "{metrics}"
    );

    let client = RawH3::connect(proxy.addr(), &certs).await;
    let (_send, mut recv) = client.request(&raw::get("/fast"), true).await;
    let answer = raw::answer(&mut recv, WAIT).await;
    assert_eq!(answer.status(), Some(200), "{answer:?}");
    assert_eq!(answer.body(), "fast");
}

/// Malformed requests (RFC 9114 4.1.2, 4.3): each is a stream error that
/// never reaches the upstream, and the connection serves the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_stream_errors_that_never_reach_an_upstream() {
    let certs = TestCerts::generate();
    let up = upstream();
    let proxy = proxy(&certs, "", &routes(&up.url(), "http1"));
    let client = RawH3::connect(proxy.addr(), &certs).await;
    let base = [
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "localhost"),
    ];
    let post = |path: &'static str| [&base[..], &[(":path", path)]].concat();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "a pseudo-header after a regular field",
            raw::headers(&[
                (":method", "GET"),
                (":scheme", "https"),
                ("accept", "*/*"),
                (":authority", "localhost"),
                (":path", "/"),
            ]),
        ),
        (
            "a repeated :path",
            raw::headers(&[&post("/public")[..], &[(":path", "/admin")]].concat()),
        ),
        (
            "a second full head taken as trailers",
            [
                raw::headers(&post("/public")),
                raw::headers(&[
                    (":method", "DELETE"),
                    (":path", "/admin"),
                    (":authority", "localhost"),
                ]),
            ]
            .concat(),
        ),
        (
            "trailers carrying :path",
            [
                raw::headers(&post("/public")),
                raw::data(b"x"),
                raw::headers(&[(":path", "/admin")]),
            ]
            .concat(),
        ),
        (
            "an upper-case field name",
            raw::headers(&[&post("/")[..], &[("X-Upper", "1")]].concat()),
        ),
        (
            "a connection-specific field",
            raw::headers(&[&post("/")[..], &[("transfer-encoding", "chunked")]].concat()),
        ),
        (
            "no :scheme",
            raw::headers(&[
                (":method", "GET"),
                (":authority", "localhost"),
                (":path", "/"),
            ]),
        ),
        (
            "a body longer than its content-length",
            [
                raw::headers(&[&post("/")[..], &[("content-length", "1")]].concat()),
                raw::data(b"xy"),
            ]
            .concat(),
        ),
        (
            "a body shorter than its content-length",
            [
                raw::headers(&[&post("/")[..], &[("content-length", "3")]].concat()),
                raw::data(b"xy"),
            ]
            .concat(),
        ),
    ];
    for (what, bytes) in cases {
        let (_send, mut recv) = client.request(&bytes, true).await;
        match raw::answer(&mut recv, WAIT).await {
            Answer::Reset(code) => assert_eq!(code, H3_MESSAGE_ERROR, "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    let (_send, mut recv) = client.request(&raw::get("/fast"), true).await;
    assert_eq!(raw::answer(&mut recv, WAIT).await.status(), Some(200));
    assert_eq!(
        up.requests().len(),
        1,
        "only the last, good request: {:?}",
        up.requests()
    );
}

/// Frames out of place on a request stream close the whole connection
/// (RFC 9114 4.1, 7.2): HEADERS, HEADERS, DATA; DATA first; control frames;
/// HTTP/2 frame types; a dynamic QPACK reference. None reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_out_of_place_close_the_connection_and_reach_no_upstream() {
    let certs = TestCerts::generate();
    let up = upstream();
    let proxy = proxy(&certs, "", &routes(&up.url(), "http1"));
    let post = raw::headers(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "localhost"),
        (":path", "/"),
    ]);
    let cases: Vec<(&str, Vec<u8>, u64)> = vec![
        (
            "HEADERS, HEADERS, DATA",
            [post.clone(), raw::headers(&[("x-t", "1")]), raw::data(b"x")].concat(),
            H3_FRAME_UNEXPECTED,
        ),
        ("DATA before HEADERS", raw::data(b"x"), H3_FRAME_UNEXPECTED),
        (
            "SETTINGS on a request stream",
            [post.clone(), raw::frame_of(0x4, &[])].concat(),
            H3_FRAME_UNEXPECTED,
        ),
        (
            "GOAWAY on a request stream",
            [post.clone(), raw::frame_of(0x7, &[0])].concat(),
            H3_FRAME_UNEXPECTED,
        ),
        (
            "an HTTP/2 PING type",
            [post.clone(), raw::frame_of(0x6, &[0; 8])].concat(),
            H3_FRAME_UNEXPECTED,
        ),
        (
            "a dynamic table reference",
            raw::frame_of(0x1, &[0x00, 0x00, 0x80]),
            QPACK_DECOMPRESSION_FAILED,
        ),
        (
            "a Required Insert Count",
            raw::frame_of(0x1, &[0x02, 0x00, 0xd1]),
            QPACK_DECOMPRESSION_FAILED,
        ),
    ];
    for (what, bytes, code) in cases {
        let client = RawH3::connect(proxy.addr(), &certs).await;
        let (_send, _recv) = client.request(&bytes, true).await;
        assert_eq!(client.closed_with(WAIT).await, Some(code), "{what}");
    }
    assert!(up.requests().is_empty(), "{:?}", up.requests());
}

/// The client's QPACK streams with a table capacity of 0 (RFC 9204 3.2.3,
/// 4.3, 4.4) and its control stream (RFC 9114 6.2.1, 7.2): each abuse
/// closes the connection with its code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qpack_and_control_stream_abuse_closes_the_connection() {
    let certs = TestCerts::generate();
    let up = upstream();
    let proxy = proxy(&certs, "", &routes(&up.url(), "http1"));
    let settings = raw::frame_of(0x4, &[]);
    let cases: Vec<(&str, u64, Vec<u8>, u64)> = vec![
        (
            "an insert with a literal name",
            0x02,
            vec![0x41, b'a', 0x01, b'b'],
            QPACK_ENCODER_STREAM_ERROR,
        ),
        (
            "a table capacity of 4096",
            0x02,
            vec![0x3f, 0xe1, 0x1f],
            QPACK_ENCODER_STREAM_ERROR,
        ),
        (
            "capacity 0 then an insert",
            0x02,
            vec![0x20, 0xc0 | 17, 0x01, b'x'],
            QPACK_ENCODER_STREAM_ERROR,
        ),
        (
            "a section acknowledgment",
            0x03,
            vec![0x80],
            QPACK_DECODER_STREAM_ERROR,
        ),
        (
            "an insert count increment",
            0x03,
            vec![0x01],
            QPACK_DECODER_STREAM_ERROR,
        ),
        (
            "a second control stream",
            0x00,
            settings.clone(),
            H3_STREAM_CREATION_ERROR,
        ),
        (
            "a push stream from a client",
            0x01,
            vec![0x00],
            H3_STREAM_CREATION_ERROR,
        ),
    ];
    for (what, kind, bytes, code) in cases {
        let client = RawH3::connect(proxy.addr(), &certs).await;
        let _stream = client.uni(kind, &bytes).await;
        assert_eq!(client.closed_with(WAIT).await, Some(code), "{what}");
    }
    // A control stream (the raw client's own) that goes on badly.
    let cases: Vec<(&str, Vec<u8>, u64)> = vec![
        ("a second SETTINGS", settings.clone(), H3_FRAME_UNEXPECTED),
        (
            "HEADERS on the control stream",
            raw::get("/"),
            H3_FRAME_UNEXPECTED,
        ),
        (
            "CANCEL_PUSH for no push",
            raw::frame_of(0x3, &[0]),
            H3_ID_ERROR,
        ),
    ];
    for (what, bytes, code) in cases {
        let mut client = RawH3::connect(proxy.addr(), &certs).await;
        client.control.write_all(&bytes).await.unwrap();
        assert_eq!(client.closed_with(WAIT).await, Some(code), "{what}");
    }
    // A control stream that does not begin with SETTINGS.
    let client = RawH3::connect_with(proxy.addr(), &certs, &raw::frame_of(0x7, &[0])).await;
    assert_eq!(
        client.closed_with(WAIT).await,
        Some(H3_MISSING_SETTINGS),
        "GOAWAY first"
    );
    // The encoder stream's capacity 0 and a stream cancellation are fine,
    // and the connection serves on.
    let client = RawH3::connect(proxy.addr(), &certs).await;
    let _encoder = client.uni(0x02, &[0x20]).await;
    let _decoder = client.uni(0x03, &[0x41]).await;
    let _grease = client.uni(0x21, b"anything").await;
    let (_send, mut recv) = client.request(&raw::get("/fast"), true).await;
    assert_eq!(raw::answer(&mut recv, WAIT).await.status(), Some(200));
    assert_eq!(client.closed_with(Duration::from_millis(200)).await, None);
}
