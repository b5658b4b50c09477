//! Request bodies an HTTP/2 client (RST_STREAM) or an HTTP/3 client
//! (RESET_STREAM) breaks off, with and without content-length: an
//! HTTP/1.1 upstream never receives a whole request (no last chunk, fewer
//! bytes than the content-length) and its connection is closed; an
//! HTTP/2 upstream's stream is reset, never ended.

use std::{any::Any, time::Duration};

use bytes::Bytes;
use http::Request;
use testkit::{H2Server, HostileUpstream, Step, TestCerts};
use tokio::net::TcpStream;

use super::{DECLARED, SENT};
use crate::{
    h3_support::{self, Client},
    support::{self, live::until, Proxy},
};

#[derive(Debug, Clone, Copy)]
enum ClientProtocol {
    H2,
    H3,
}

/// A POST of which the client sends the head and [`SENT`] bytes of
/// body (declaring [`DECLARED`] when `length`), waits until `reached`
/// says the upstream has them, then resets its stream: CANCEL over
/// HTTP/2, H3_REQUEST_CANCELLED over HTTP/3. What it returns holds the
/// client's connection open until dropped.
async fn break_off(
    protocol: ClientProtocol,
    proxy: &Proxy,
    certs: &TestCerts,
    length: bool,
    reached: impl Fn() -> bool,
) -> Box<dyn Any> {
    let mut request = Request::post("https://localhost/upload");
    if length {
        request = request.header("content-length", DECLARED);
    }
    let request = request.body(()).unwrap();
    let part = Bytes::from(vec![b'a'; SENT]);
    let arrived = || async { reached() };
    let held: Box<dyn Any> = match protocol {
        ClientProtocol::H2 => {
            let tcp = TcpStream::connect(proxy.addr()).await.unwrap();
            let name = tls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let stream = certs
                .connector(&[tls::ALPN_H2])
                .connect(name, tcp)
                .await
                .unwrap();
            let sender = support::h2_client(stream).await;
            let mut sender = sender.ready().await.unwrap();
            let (response, mut body) = sender.send_request(request, false).unwrap();
            body.send_data(part, false).unwrap();
            assert!(
                until(Duration::from_secs(5), arrived).await,
                "the body's first part never reached the upstream"
            );
            body.send_reset(h2::Reason::CANCEL);
            Box::new((sender, body, response))
        }
        ClientProtocol::H3 => {
            let mut client = Client::connect(proxy.addr(), certs).await;
            let mut stream = client.send.send_request(request).await.unwrap();
            stream.send_data(part).await.unwrap();
            assert!(
                until(Duration::from_secs(5), arrived).await,
                "the body's first part never reached the upstream"
            );
            stream.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
            Box::new((client, stream))
        }
    };
    held
}

/// Each client protocol, with and without content-length.
fn cases() -> Vec<(ClientProtocol, bool)> {
    [ClientProtocol::H2, ClientProtocol::H3]
        .into_iter()
        .flat_map(|protocol| [(protocol, false), (protocol, true)])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_the_client_breaks_off_never_reaches_an_http1_upstream_whole() {
    let certs = TestCerts::generate();
    for (protocol, length) in cases() {
        let case = format!("{protocol:?}, content-length: {length}");
        // It would answer a whole request at once.
        let upstream = HostileUpstream::start(|_| {
            vec![Step::Write(
                b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nwhole".to_vec(),
            )]
        });
        let rest = support::one_upstream(upstream.addr(), "    retries: 0\n");
        let proxy = h3_support::proxy(&certs, "", &rest);
        // Its head and the part sent: more than SENT bytes.
        let reached = || upstream.bytes_received() > SENT as u64;
        let held = break_off(protocol, &proxy, &certs, length, reached).await;
        let closed = until(Duration::from_secs(5), || async {
            upstream.open_connections() == 0
        })
        .await;
        assert!(closed, "{case}: the upstream connection stayed open");
        // Chunked, a whole request ends with its last chunk; with a
        // length, with that many bytes: neither came.
        assert_eq!(upstream.connections(), 1, "{case}");
        assert!(
            upstream.requests().is_empty(),
            "{case}: the upstream got a whole request: {:?}",
            String::from_utf8_lossy(&upstream.requests()[0])
        );
        drop(held);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_the_client_breaks_off_resets_the_http2_upstream_stream() {
    let certs = TestCerts::generate();
    for (protocol, length) in cases() {
        let case = format!("{protocol:?}, content-length: {length}");
        let upstream = H2Server::start();
        let rest = format!(
            "upstreams:\n  h2c:\n    hosts: [\"{}\"]\n    protocol: h2c\n    retries: 0\nroutes:\n  - {{ path: /, upstream: h2c }}\n",
            upstream.url("")
        );
        let proxy = h3_support::proxy(&certs, "", &rest);
        let reached = || upstream.body_bytes() >= SENT as u64;
        let held = break_off(protocol, &proxy, &certs, length, reached).await;
        let reset = until(Duration::from_secs(5), || async {
            upstream.broken_bodies() == 1
        })
        .await;
        // Ended instead (END_STREAM), the upstream would have answered
        // a request whose body was cut short.
        assert!(reset, "{case}: the upstream stream was not reset");
        assert_eq!(upstream.requests(), 1, "{case}");
        assert_eq!(upstream.body_bytes(), SENT as u64, "{case}");
        drop(held);
    }
}
