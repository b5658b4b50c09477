//! An upstream whose answer is framed two ways at once (Content-Length and
//! chunked, two lengths, two transfer codings, a bare LF in its head) is
//! a broken upstream, over real sockets: the client, HTTP/1.1 or HTTP/2,
//! gets a 502 problem and none of the ambiguous body, and the upstream
//! connection is never used again (a second request needs a new one).
//! The parser's own unit tests are in crates/http1/src/response.rs.

use crate::support;

use std::time::Duration;

use http::Request;
use support::{h2_client, h2_exchange, one_upstream, Proxy};
use testkit::{HostileUpstream, Step};
use tokio::net::TcpStream;

/// What no client may see: it is in every ambiguous body.
const MARK: &str = "SMUGGLED";

/// The ambiguous answers, each with a body holding [`MARK`] whichever
/// framing a reader believes.
fn answers() -> [(&'static str, String); 4] {
    let chunked = format!("{:x}\r\n{MARK}\r\n0\r\n\r\n", MARK.len());
    [
        (
            "Content-Length and chunked",
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n{chunked}",
                MARK.len()
            ),
        ),
        (
            "two Content-Lengths",
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Length: {}\r\n\r\n{MARK}{MARK}",
                MARK.len(),
                2 * MARK.len()
            ),
        ),
        (
            "two Transfer-Encodings",
            format!(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n{chunked}"
            ),
        ),
        (
            "a bare LF in the head",
            format!(
                "HTTP/1.1 200 OK\r\nX-Note: one\nContent-Length: {}\r\n\r\n{MARK}",
                MARK.len()
            ),
        ),
    ]
}

/// A proxy with no retries (so that each request is one upstream attempt)
/// in front of an upstream that always answers `answer`, and keeps its
/// connection open: only the proxy can decide not to reuse it.
fn setup(answer: String) -> (HostileUpstream, Proxy) {
    let upstream = HostileUpstream::start(move |_| vec![Step::Write(answer.as_bytes().to_vec())]);
    let proxy = Proxy::start(&one_upstream(upstream.addr(), "    retries: 0\n"));
    (upstream, proxy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_upstream_answer_is_a_502_to_an_http11_client() {
    for (what, answer) in answers() {
        let (upstream, proxy) = setup(answer);
        for round in 1..=2u64 {
            let response = proxy.conn().await.get("/").await;
            assert_eq!(response.status, 502, "{what}: {}", response.text());
            assert_eq!(
                response.header("content-type"),
                Some("application/problem+json"),
                "{what}"
            );
            assert_eq!(response.json()["status"], 502, "{what}");
            assert!(
                !response.text().contains(MARK),
                "{what}: {}",
                response.text()
            );
            // Each request met a fresh upstream connection.
            assert_eq!(upstream.connections(), round, "{what}: a connection reused");
        }
        assert_eq!(upstream.requests().len(), 2, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_upstream_answer_is_a_502_to_an_http2_client() {
    for (what, answer) in answers() {
        let (upstream, proxy) = setup(answer);
        let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
        for round in 1..=2u64 {
            let request = Request::get("http://api.test/").body(()).unwrap();
            let (response, body, _) =
                tokio::time::timeout(Duration::from_secs(10), h2_exchange(&sender, request, b""))
                    .await
                    .unwrap_or_else(|_| panic!("{what}: no answer within 10 s"));
            let text = String::from_utf8_lossy(&body);
            assert_eq!(response.status(), 502, "{what}: {text}");
            assert_eq!(
                response.headers()["content-type"],
                "application/problem+json",
                "{what}"
            );
            let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(problem["status"], 502, "{what}");
            assert!(!text.contains(MARK), "{what}: {text}");
            assert_eq!(upstream.connections(), round, "{what}: a connection reused");
        }
    }
}
