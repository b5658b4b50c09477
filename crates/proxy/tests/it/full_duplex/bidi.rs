//! A bidirectional gRPC-style stream interleaves through the proxy: over
//! h2c, over TLS, and to an HTTP/1.1 upstream.

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use h2::{client::SendRequest, RecvStream};
use http::{Request, StatusCode};
use tls::rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use super::{grpc_message, h2_upstream};
use crate::support::{self, h2_client, Proxy};
use testkit::{Behaviour, FakeServer, H2Server, TestCerts};

/// Messages in the ping-pong.
const MESSAGES: usize = 10;
/// How long an echo may take before the test fails instead of hanging.
const ECHO_DEADLINE: Duration = Duration::from_secs(10);

/// The next whole gRPC message from `body`, however its frames were cut;
/// `None` when the body ends first.
async fn next_grpc_message(body: &mut RecvStream, pending: &mut BytesMut) -> Option<String> {
    loop {
        if pending.len() >= 5 {
            let len = u32::from_be_bytes(pending[1..5].try_into().unwrap()) as usize;
            if pending.len() >= 5 + len {
                pending.advance(5);
                let payload = pending.split_to(len);
                return Some(String::from_utf8(payload.to_vec()).unwrap());
            }
        }
        let data = body.data().await?.unwrap();
        let _ = body.flow_control().release_capacity(data.len());
        pending.extend_from_slice(&data);
    }
}

/// A bidi ping-pong on one stream to the upstream's `/echo`: each message
/// is sent only once the echo of the one before came back, so the replies
/// must interleave with the sends (a proxy that waits for the end of the
/// request never answers the first: only the last message ends the
/// client's side). Ends with the upstream's `grpc-status` trailers.
async fn ping_pong(sender: &SendRequest<Bytes>, request: Request<()>) {
    let mut sender = sender.clone().ready().await.unwrap();
    let (response, mut send) = sender.send_request(request, false).unwrap();
    let mut response = Some(response);
    let mut body = None;
    let mut pending = BytesMut::new();
    for i in 0..MESSAGES {
        let payload = format!("ping {i}");
        // The last message ends the client's side (END_STREAM).
        let last = i + 1 == MESSAGES;
        send.send_data(grpc_message(&payload), last).unwrap();
        let reply = tokio::time::timeout(ECHO_DEADLINE, async {
            if let Some(response) = response.take() {
                let response = response.await.unwrap();
                assert_eq!(response.status(), StatusCode::OK);
                body = Some(response.into_body());
            }
            next_grpc_message(body.as_mut().unwrap(), &mut pending).await
        })
        .await
        .unwrap_or_else(|_| {
            panic!("no echo of message {i} before the client's end: no interleaving")
        });
        assert_eq!(reply.as_deref(), Some(payload.as_str()));
    }
    let mut body = body.unwrap();
    let end = tokio::time::timeout(ECHO_DEADLINE, async {
        let rest = next_grpc_message(&mut body, &mut pending).await;
        (rest, body.trailers().await.unwrap())
    })
    .await
    .expect("the end of the stream");
    assert_eq!(end.0, None, "no message after the last echo");
    let trailers = end.1.expect("trailers");
    assert_eq!(trailers["grpc-status"], "0");
}

/// A gRPC-style request for `uri`.
fn grpc_request(uri: &str) -> Request<()> {
    Request::post(uri)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidi_stream_interleaves_over_h2c() {
    let upstream = H2Server::start();
    let proxy = Proxy::start(&h2_upstream(&upstream.url(""), None));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    ping_pong(&sender, grpc_request("http://grpc.test/echo")).await;
    assert_eq!(upstream.requests(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidi_stream_interleaves_over_tls() {
    let certs = TestCerts::generate();
    let upstream = H2Server::start_tls(certs.server_config(&[tls::ALPN_H2]));
    let proxy = Proxy::start_yaml(&format!(
        "workers: 1
listeners:
  - address: 127.0.0.1:0
    tls: {{ cert: \"{}\", key: \"{}\" }}
{}",
        certs.cert_path.display(),
        certs.key_path.display(),
        h2_upstream(&upstream.https_url(""), Some(&certs))
    ));
    let tcp = TcpStream::connect(proxy.addr()).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let io = certs
        .connector(&[tls::ALPN_H2])
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(io.get_ref().1.alpn_protocol(), Some(tls::ALPN_H2));
    let sender = h2_client(io).await;
    ping_pong(&sender, grpc_request("https://grpc.test/echo")).await;
    assert_eq!(upstream.requests(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidi_stream_interleaves_to_an_http11_upstream() {
    let upstream = FakeServer::start(Behaviour::EchoBody);
    let proxy = Proxy::start(&support::one_upstream(upstream.addr(), ""));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    // HTTP/1.1 needs the length (or chunks): ten messages of 11 bytes.
    let length: usize = (0..MESSAGES)
        .map(|i| grpc_message(&format!("ping {i}")).len())
        .sum();
    let mut request = grpc_request("http://grpc.test/echo");
    request
        .headers_mut()
        .insert("content-length", length.into());
    ping_pong(&sender, request).await;
    assert_eq!(upstream.requests(), 1);
}
