//! What comes back from a hostile upstream reaches only the client it
//! answers (issue 26): interim (1xx) answers before the final one, from
//! HTTP/1.1 and HTTP/2 upstreams to HTTP/1.1, HTTP/2 and HTTP/3 clients, a flood
//! of them, and trailers both ways with the fields the head rules control
//! taken out.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, StatusCode};
use support::{
    h2_client,
    interim::{h2_interim, h3_interim},
    live::until,
    Proxy,
};
use testkit::{H2Server, HostileUpstream, Step};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

const FIRST: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nFIRST";

/// An HTTP/1.1 upstream answering `/102` with `102 Processing` then
/// FIRST, `/103` with two `103 Early Hints` then FIRST, `/flood` with 20
/// interim answers then FIRST, and anything else with SECOND.
fn interim_upstream() -> HostileUpstream {
    HostileUpstream::start(|request| {
        let path = String::from_utf8_lossy(request);
        let path = path.split(' ').nth(1).unwrap_or("/").to_string();
        let interim: &[u8] = match path.as_str() {
            "/102" => b"HTTP/1.1 102 Processing\r\n\r\n",
            "/103" => b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nConnection: x-hop\r\nX-Hop: 1\r\n\r\n",
            "/flood" => b"HTTP/1.1 102 Processing\r\n\r\n",
            _ => {
                return vec![Step::Write(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nSECOND".to_vec(),
                )]
            }
        };
        let times = match path.as_str() {
            "/103" => 2,
            "/flood" => 20,
            _ => 1,
        };
        let mut answer = interim.repeat(times);
        answer.extend_from_slice(FIRST);
        vec![Step::Write(answer)]
    })
}

fn route_to(url: &str, protocol: &str) -> String {
    format!("upstreams:\n  up:\n    hosts: [\"{url}\"]\n    protocol: {protocol}\nroutes:\n  - {{ path: /, upstream: up }}\n")
}

/// Reads from `stream` until `marker` has arrived (or 5 s pass); the text.
async fn read_until(stream: &mut TcpStream, marker: &str) -> String {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !String::from_utf8_lossy(&seen).contains(marker) {
        let mut chunk = [0u8; 4096];
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interim_answer_does_not_shift_the_answers_of_a_kept_alive_connection() {
    let upstream = interim_upstream();
    let proxy = Proxy::start(&route_to(&upstream.url(), "http1"));
    let mut client = send(&proxy, &format!("{}{}", get("/102"), get("/second"))).await;
    let text = read_until(&mut client, "SECOND").await;
    let processing = text.find("HTTP/1.1 102 Processing\r\n").expect(&text);
    let first = text.find("\r\n\r\nFIRST").expect(&text);
    let second = text.find("\r\n\r\nSECOND").expect(&text);
    assert!(processing < first && first < second, "{text}");
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    // Early hints keep their fields, not the hop-by-hop ones.
    let mut client = send(&proxy, &get("/103")).await;
    let text = read_until(&mut client, "FIRST").await;
    assert_eq!(
        text.matches("HTTP/1.1 103 Early Hints\r\n").count(),
        2,
        "{text}"
    );
    let lower = text.to_ascii_lowercase();
    assert_eq!(
        lower.matches("link: </a.css>; rel=preload").count(),
        2,
        "{text}"
    );
    assert!(!text.to_ascii_lowercase().contains("x-hop"), "{text}");
    assert!(text.ends_with("\r\n\r\nFIRST"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http10_client_gets_no_interim_answer() {
    let upstream = interim_upstream();
    let proxy = Proxy::start(&route_to(&upstream.url(), "http1"));
    let mut client = send(&proxy, "GET /103 HTTP/1.0\r\nHost: test\r\n\r\n").await;
    let text = read_until(&mut client, "FIRST").await;
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(!text.contains("103"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_interim_answers_gets_502_and_the_upstream_connection_closes() {
    let upstream = interim_upstream();
    let proxy = Proxy::start(&route_to(&upstream.url(), "http1"));
    let mut client = send(&proxy, &get("/flood")).await;
    let text = read_until(&mut client, "}").await;
    let last_head = text.rfind("HTTP/1.1 ").unwrap();
    assert!(text[last_head..].starts_with("HTTP/1.1 502"), "{text}");
    assert!(text.contains("application/problem+json"), "{text}");
    assert_eq!(
        text.matches("102 Processing").count(),
        16,
        "the bound: {text}"
    );
    assert!(!text.contains("FIRST"), "{text}");
    assert!(
        until(Duration::from_secs(5), || async {
            upstream.open_connections() == 0
        })
        .await,
        "the upstream connection was kept"
    );
    // From an HTTP/2 client: interim HEADERS, then a 502.
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let (interim, status, _) = h2_interim(&sender, "/flood").await;
    assert_eq!(interim.len(), 16);
    assert_eq!(status, StatusCode::BAD_GATEWAY);
}

/// A connection to the proxy on which `bytes` were sent.
async fn send(proxy: &Proxy, bytes: &str) -> TcpStream {
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    client.write_all(bytes.as_bytes()).await.unwrap();
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_gets_interim_headers_then_the_answer_from_an_http1_upstream() {
    let upstream = interim_upstream();
    let proxy = Proxy::start(&route_to(&upstream.url(), "http1"));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let (interim, status, body) = h2_interim(&sender, "/103").await;
    let hint = HeaderValue::from_static("</a.css>; rel=preload");
    assert_eq!(
        interim,
        vec![(StatusCode::EARLY_HINTS, Some(hint.clone())); 2]
    );
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"FIRST"[..]));
    let (interim, status, body) = h2_interim(&sender, "/102").await;
    assert_eq!(interim, vec![(StatusCode::PROCESSING, None)]);
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"FIRST"[..]));
    // The stream after it gets its own answer.
    let (interim, status, body) = h2_interim(&sender, "/second").await;
    assert!(interim.is_empty());
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"SECOND"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interim_answers_of_an_http2_upstream_reach_both_kinds_of_client() {
    let upstream = H2Server::start();
    let proxy = Proxy::start(&route_to(&upstream.url(""), "h2c"));
    // HTTP/1.1 client: three interim heads, then the answer.
    let requests = format!("{}{}", get("/interim/3"), get("/status/201"));
    let mut client = send(&proxy, &requests).await;
    let text = read_until(&mut client, "201 Created").await;
    let text = text + &read_until(&mut client, "ok").await;
    assert_eq!(
        text.matches("HTTP/1.1 103 Early Hints\r\n").count(),
        3,
        "{text}"
    );
    let first = text.find("FIRST").expect(&text);
    assert!(first < text.find("201 Created").unwrap(), "{text}");
    // HTTP/2 client.
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let (interim, status, body) = h2_interim(&sender, "/interim/2").await;
    assert_eq!(interim.len(), 2);
    assert!(interim
        .iter()
        .all(|(s, link)| *s == StatusCode::EARLY_HINTS && link.is_some()));
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"FIRST"[..]));
    // A flood from an HTTP/2 upstream: 502 to both.
    let (interim, status, _) = h2_interim(&sender, "/interim/40").await;
    assert_eq!((interim.len(), status), (16, StatusCode::BAD_GATEWAY));
    let mut client = send(&proxy, &get("/interim/40")).await;
    let text = read_until(&mut client, "}").await;
    assert!(
        text[text.rfind("HTTP/1.1 ").unwrap()..].starts_with("HTTP/1.1 502"),
        "{text}"
    );
}

/// An upstream that records requests and answers a chunked body whose
/// trailers forge fields the head rules control.
fn trailer_upstream() -> HostileUpstream {
    HostileUpstream::start(|_| {
        vec![Step::Write(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\ngrpc-status: 0\r\ncontent-length: 99\r\nx-forwarded-for: 6.6.6.6\r\nset-cookie: s=forged\r\nx-served-by: forged\r\n\r\n".to_vec(),
        )]
    })
}

/// POSTs `body` with trailers that forge controlled fields; the answer's
/// trailers.
async fn post_with_trailers(sender: &h2::client::SendRequest<Bytes>) -> Option<HeaderMap> {
    let request = Request::post("http://test/upload").body(()).unwrap();
    let mut sender = sender.clone().ready().await.unwrap();
    let (response, mut stream) = sender.send_request(request, false).unwrap();
    stream
        .send_data(Bytes::from_static(b"hello"), false)
        .unwrap();
    let mut trailers = HeaderMap::new();
    for (name, value) in [
        ("x-internal", "forged"),
        ("x-forwarded-for", "6.6.6.6"),
        ("authorization", "Bearer forged"),
        ("host", "evil.example"),
        ("x-checksum", "c0ffee"),
    ] {
        trailers.insert(name, HeaderValue::from_static(value));
    }
    stream.send_trailers(trailers).unwrap();
    let mut body = response.await.unwrap().into_body();
    while let Some(data) = body.data().await {
        data.unwrap();
    }
    body.trailers().await.unwrap()
}

const SET_INTERNAL: &str = "middleware:\n  edit:\n    headers:\n      request: { set: { x-internal: proxy } }\n      response: { set: { x-served-by: sluice } }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_trailers_reach_an_http1_upstream_only_when_the_route_forwards_them() {
    let upstream = trailer_upstream();
    for (policy, forwarded) in [("auto", false), ("drop", false), ("forward", true)] {
        let config = format!(
            "{SET_INTERNAL}upstreams:\n  up:\n    hosts: [\"{}\"]\nroutes:\n  - {{ path: /, upstream: up, chain: [edit], request_trailers: {policy} }}\n",
            upstream.url()
        );
        let proxy = Proxy::start(&config);
        let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
        let answered = post_with_trailers(&sender)
            .await
            .expect("response trailers");
        // Response trailers: only what the head rules do not control.
        assert_eq!(answered.len(), 1, "{policy}: {answered:?}");
        assert_eq!(answered["grpc-status"], "0");
        let raw = String::from_utf8(upstream.requests().pop().unwrap()).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        assert!(head.contains("x-internal: proxy"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("transfer-encoding: chunked"),
            "{head}"
        );
        let trailer_section = body.split_once("0\r\n").unwrap().1;
        if forwarded {
            assert_eq!(trailer_section, "x-checksum: c0ffee\r\n\r\n", "{policy}");
        } else {
            assert_eq!(trailer_section, "\r\n", "{policy}: {body:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_trailers_to_an_http2_upstream_lose_the_fields_the_head_rules_control() {
    let upstream = H2Server::start();
    let config = format!(
        "{SET_INTERNAL}upstreams:\n  up:\n    hosts: [\"{}\"]\n    protocol: h2c\nroutes:\n  - {{ path: /, upstream: up, chain: [edit] }}\n",
        upstream.url("")
    );
    let proxy = Proxy::start(&config);
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    post_with_trailers(&sender).await;
    let trailers = upstream
        .request_trailers()
        .expect("trailers reached the upstream");
    let names: Vec<_> = trailers.keys().map(|n| n.as_str().to_string()).collect();
    assert_eq!(names, ["x-checksum"], "{trailers:?}");
}

/// An upstream that answers `100 Continue` as soon as a head is in, then
/// reads the whole Content-Length body and answers with its length.
async fn continue_then_read_upstream() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let head_end = loop {
                    if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        break at + 4;
                    }
                    let mut chunk = [0u8; 4096];
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&chunk[..n]);
                };
                stream
                    .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                    .await
                    .unwrap();
                let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |l| l.trim().parse().unwrap());
                while seen.len() < head_end + length {
                    let mut chunk = [0u8; 4096];
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&chunk[..n]);
                }
                let body = format!("got {length}");
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_100_continue_does_not_cut_the_request_body_short() {
    let upstream = continue_then_read_upstream().await;
    let proxy = Proxy::start(&route_to(&format!("http://{upstream}"), "http1"));
    let mut client = send(
        &proxy,
        "POST /upload HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n",
    )
    .await;
    let text = read_until(&mut client, "100 Continue\r\n\r\n").await;
    assert_eq!(
        text, "HTTP/1.1 100 Continue\r\n\r\n",
        "the proxy's own 100 only"
    );
    client.write_all(b"hello").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    client.write_all(b"world").await.unwrap();
    let text = read_until(&mut client, "got 10").await;
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(
        !text.contains("100 Continue"),
        "the upstream's 100 is dropped: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_trailers_of_an_http2_upstream_lose_the_fields_the_head_rules_control() {
    let upstream = H2Server::start();
    let config = format!(
        "{SET_INTERNAL}upstreams:\n  up:\n    hosts: [\"{}\"]\n    protocol: h2c\nroutes:\n  - {{ path: /, upstream: up, chain: [edit] }}\n",
        upstream.url("")
    );
    let proxy = Proxy::start(&config);
    // An HTTP/2 client gets them as trailers.
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = Request::get("http://test/forged-trailers")
        .body(())
        .unwrap();
    let (response, body, trailers) = support::h2_exchange(&sender, request, b"").await;
    assert_eq!((response.status(), &body[..]), (StatusCode::OK, &b"ok"[..]));
    assert_eq!(response.headers()["x-served-by"], "sluice");
    let trailers = trailers.expect("trailers");
    let names: Vec<_> = trailers.keys().map(|n| n.as_str().to_string()).collect();
    assert_eq!(names, ["grpc-status"], "{trailers:?}");
    // An HTTP/1.1 client gets them after the last chunk.
    let mut client = send(&proxy, &get("/forged-trailers")).await;
    let text = read_until(&mut client, "\r\n0\r\n").await;
    let text = text.clone() + &read_until(&mut client, "\r\n\r\n").await;
    let trailer_section = text.split("\r\n0\r\n").nth(1).unwrap();
    assert_eq!(trailer_section, "grpc-status: 0\r\n\r\n", "{text}");
}

/// An HTTP/3 client gets the interim heads too, each an HTTP/3 HEADERS
/// frame before the final one (RFC 9114 4.1), without their hop-by-hop
/// fields, from an HTTP/1.1 and an HTTP/2 upstream; the next request on
/// the connection gets only its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http3_client_gets_interim_heads_then_the_answer() {
    use crate::h3_support::{proxy, Client};

    let certs = testkit::TestCerts::generate();
    let upstream = interim_upstream();
    let h1 = proxy(&certs, "", &route_to(&upstream.url(), "http1"));
    let mut client = Client::connect(h1.addr(), &certs).await;
    let hint = HeaderValue::from_static("</a.css>; rel=preload");
    let (interim, status, body) = h3_interim(&mut client, "/103").await;
    assert_eq!(interim, vec![Some(hint.clone()); 2]);
    assert_eq!((status, &body[..]), (StatusCode::OK, "FIRST"));
    let (interim, status, body) = h3_interim(&mut client, "/second").await;
    assert!(interim.is_empty());
    assert_eq!((status, &body[..]), (StatusCode::OK, "SECOND"));

    let upstream = H2Server::start();
    let h2 = proxy(&certs, "", &route_to(&upstream.url(""), "h2c"));
    let mut client = Client::connect(h2.addr(), &certs).await;
    let (interim, status, body) = h3_interim(&mut client, "/interim/2").await;
    assert_eq!(interim.len(), 2);
    assert!(interim.iter().all(Option::is_some), "{interim:?}");
    assert_eq!((status, &body[..]), (StatusCode::OK, "FIRST"));
}
