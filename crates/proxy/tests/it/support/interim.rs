//! The interim (1xx) answers a client of each protocol gets for one GET,
//! and then the final answer (tests/it/interim_answers.rs,
//! tests/it/protocol_pairs.rs).

use bytes::Bytes;
use http::{HeaderValue, Request, StatusCode};

/// A GET of `path` over HTTP/2: the interim answers (status and `link`),
/// then the final status and body.
pub(crate) async fn h2_interim(
    sender: &h2::client::SendRequest<Bytes>,
    path: &str,
) -> (Vec<(StatusCode, Option<HeaderValue>)>, StatusCode, Vec<u8>) {
    let request = Request::get(format!("http://test{path}")).body(()).unwrap();
    let mut sender = sender.clone().ready().await.unwrap();
    let (mut response, _) = sender.send_request(request, true).unwrap();
    let mut interim = Vec::new();
    while let Some(answer) = std::future::poll_fn(|cx| response.poll_informational(cx)).await {
        let answer = answer.unwrap();
        interim.push((answer.status(), answer.headers().get("link").cloned()));
    }
    let (parts, mut body) = response.await.unwrap().into_parts();
    let mut bytes = Vec::new();
    while let Some(data) = body.data().await {
        bytes.extend_from_slice(&data.unwrap());
    }
    (interim, parts.status, bytes)
}

/// A GET of `path` over HTTP/3: the interim heads (their `link`; each is
/// checked to be a 103 without the upstream's hop field), then the final
/// status and body.
pub(crate) async fn h3_interim(
    client: &mut crate::h3_support::Client,
    path: &str,
) -> (Vec<Option<HeaderValue>>, StatusCode, String) {
    use bytes::Buf;

    let request = Request::get(format!("https://localhost{path}"))
        .body(())
        .unwrap();
    let mut stream = client.send.send_request(request).await.unwrap();
    stream.finish().await.unwrap();
    let mut interim = Vec::new();
    let last = loop {
        let head = stream.recv_response().await.unwrap();
        if !head.status().is_informational() {
            break head;
        }
        assert_eq!(head.status(), StatusCode::EARLY_HINTS, "{path}");
        assert!(head.headers().get("x-hop").is_none(), "{head:?}");
        interim.push(head.headers().get("link").cloned());
    };
    let mut bytes = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.unwrap() {
        bytes.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
    }
    (
        interim,
        last.status(),
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}
