//! Streamed responses keep their flush boundaries: a server-sent event
//! reaches the client, decodable, before the upstream sends the next one
//! (HTTP/1.1 and HTTP/2 clients; both upstream protocols). The memory
//! budget: a response that finds no room goes uncompressed and is counted,
//! and the room comes back when the compressed response ends.

use std::io::Write;

use bytes::Bytes;
use http::Request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Upstreams, EVENT_ONE, EVENT_TWO};
use crate::support::{self, Proxy};

/// A gzip decoder fed as bytes arrive.
fn decoder() -> flate2::write::GzDecoder<Vec<u8>> {
    flate2::write::GzDecoder::new(Vec::new())
}

/// The decoded bytes of an HTTP/1.1 chunked body read so far, from the
/// raw bytes after the head (whole chunks only).
fn dechunk(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = raw;
    while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16).unwrap();
        let start = line_end + 2;
        if size == 0 || rest.len() < start + size + 2 {
            break;
        }
        out.extend_from_slice(&rest[start..start + size]);
        rest = &rest[start + size + 2..];
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_sent_events_arrive_event_by_event() {
    let upstreams = Upstreams::start().await;
    let handlers = [
        ("sse", "{ algorithms: [gzip], event_stream: true }"),
        ("plain", "{ algorithms: [gzip] }"),
    ];
    let proxy = Proxy::start(&upstreams.config(&handlers));
    for upstream in ["h1", "h2c"] {
        // HTTP/1.1 client.
        let mut stream = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
        let request = format!(
            "GET /{upstream}/sse/events HTTP/1.1\r\nhost: t\r\naccept-encoding: gzip\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        let head_end = loop {
            let mut more = [0u8; 4096];
            let n = stream.read(&mut more).await.unwrap();
            assert!(n > 0, "closed before the first event");
            raw.extend_from_slice(&more[..n]);
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let body = dechunk(&raw[end + 4..]);
                let mut decoded = decoder();
                decoded.write_all(&body).unwrap();
                decoded.flush().unwrap();
                if decoded.get_ref().as_slice() == EVENT_ONE {
                    break end;
                }
            }
        };
        let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
        assert!(head.contains("content-encoding: gzip"), "{head}");
        // Only now does the upstream send the second event.
        upstreams.release.add_permits(1);
        while !raw.ends_with(b"0\r\n\r\n") {
            let mut more = [0u8; 4096];
            let n = stream.read(&mut more).await.unwrap();
            assert!(n > 0, "closed mid-stream");
            raw.extend_from_slice(&more[..n]);
        }
        let mut whole = decoder();
        whole.write_all(&dechunk(&raw[head_end + 4..])).unwrap();
        assert_eq!(whole.finish().unwrap(), [EVENT_ONE, EVENT_TWO].concat());

        // Without `event_stream`, events go as they are.
        let mut conn = proxy.conn().await;
        let request = format!(
            "GET /{upstream}/plain/events HTTP/1.1\r\nhost: t\r\naccept-encoding: gzip\r\n\r\n"
        );
        upstreams.release.add_permits(1);
        conn.send(request).await;
        let answer = conn.read_response(false).await;
        assert_eq!(answer.header("content-encoding"), None);
        assert_eq!(answer.body, [EVENT_ONE, EVENT_TWO].concat());
    }
    // An HTTP/2 client (h2c), from the h2c upstream.
    let tcp = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    let sender = support::h2_client(tcp).await;
    let request = Request::get(format!("http://{}/h2c/sse/events", proxy.addr()))
        .header("accept-encoding", "gzip")
        .body(())
        .unwrap();
    let (response, _) = sender
        .clone()
        .ready()
        .await
        .unwrap()
        .send_request(request, true)
        .unwrap();
    let (parts, mut body) = response.await.unwrap().into_parts();
    assert_eq!(parts.headers["content-encoding"], "gzip");
    let mut decoded = decoder();
    while decoded.get_ref().as_slice() != EVENT_ONE {
        let data: Bytes = body.data().await.expect("the first event").unwrap();
        let _ = body.flow_control().release_capacity(data.len());
        decoded.write_all(&data).unwrap();
        decoded.flush().unwrap();
    }
    upstreams.release.add_permits(1);
    while let Some(data) = body.data().await {
        decoded.write_all(&data.unwrap()).unwrap();
    }
    assert_eq!(decoded.finish().unwrap(), [EVENT_ONE, EVENT_TWO].concat());
}

/// The value of `metric{middleware="NAME"}` on the admin's `/metrics`.
async fn sample(admin: std::net::SocketAddr, metric: &str) -> u64 {
    let text = testkit::RawConn::connect(admin)
        .await
        .get("/metrics")
        .await
        .text();
    let prefix = format!("{metric}{{middleware=\"small\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_budget_sends_responses_uncompressed_and_counts_them() {
    let upstreams = Upstreams::start().await;
    // Room for one gzip compressor (about 230 KB with a 4 KiB window), not two.
    let handlers = [(
        "small",
        "{ algorithms: [gzip], event_stream: true, max_memory: 300KB }",
    )];
    let proxy = Proxy::start(&upstreams.config(&handlers));
    let admin = proxy.admin();
    // A stream that holds its compressor until released.
    let mut held = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    held.write_all(b"GET /h1/small/events HTTP/1.1\r\nhost: t\r\naccept-encoding: gzip\r\n\r\n")
        .await
        .unwrap();
    let head = support::read_head(&mut held).await;
    assert!(
        head.to_ascii_lowercase().contains("content-encoding: gzip"),
        "{head}"
    );
    assert!(sample(admin, "sluice_compress_memory_bytes").await > 150_000);
    // Meanwhile: no room, the whole body goes as it is.
    let mut conn = proxy.conn().await;
    let plain = conn
        .request("GET", "/h2c/small/json", &["Accept-Encoding: gzip"], b"")
        .await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.header("vary"), Some("accept-encoding"));
    assert_eq!(plain.body, super::body());
    assert_eq!(sample(admin, "sluice_compress_over_budget_total").await, 1);
    // The stream ends: its room comes back.
    upstreams.release.add_permits(1);
    let mut rest = Vec::new();
    while !rest.ends_with(b"0\r\n\r\n") {
        let mut more = [0u8; 1024];
        let n = held.read(&mut more).await.unwrap();
        assert!(n > 0);
        rest.extend_from_slice(&more[..n]);
    }
    let freed = testkit::until(std::time::Duration::from_secs(5), || async {
        sample(admin, "sluice_compress_memory_bytes").await == 0
    });
    assert!(freed.await, "the compressor's memory was not given back");
    let compressed = conn
        .request("GET", "/h1/small/json", &["Accept-Encoding: gzip"], b"")
        .await;
    assert_eq!(compressed.header("content-encoding"), Some("gzip"));
    assert_eq!(sample(admin, "sluice_compress_over_budget_total").await, 1);
}
