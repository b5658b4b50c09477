//! Response bodies an upstream breaks off: an HTTP/1.1 upstream that
//! closes its connection before the content-length or the last chunk, an
//! HTTP/2 upstream that resets its stream (with and without
//! content-length). Every client protocol gets the head and the part
//! sent, then an error: HTTP/1.1 a connection closed before the body's
//! end, HTTP/2 and HTTP/3 a reset stream; never a short success.

use std::{sync::Arc, time::Duration};

use bytes::Buf;
use http::Request;
use testkit::{H2Server, HostileUpstream, Step, TestCerts};
use tls::rustls::pki_types::ServerName;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::Semaphore,
};

use super::{DECLARED, SENT};
use crate::h3_support::{self, Client};

/// How a response reached the client.
#[derive(Debug)]
struct Received {
    status: u16,
    /// Body bytes (decoded from chunks over HTTP/1.1).
    body: usize,
    /// Whether it ended as a whole message: the content-length or the
    /// last chunk reached (HTTP/1.1), END_STREAM (HTTP/2, HTTP/3).
    whole: bool,
    /// What ended it.
    end: String,
}

/// The HTTP/1.1 body in `raw` (after the head): its decoded length,
/// and whether it is whole by its framing.
fn framed(head: &str, raw: &[u8]) -> (usize, bool) {
    let head = head.to_ascii_lowercase();
    if let Some(length) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        return (raw.len(), raw.len() >= length);
    }
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let (mut at, mut body) = (0, 0);
    loop {
        let Some(line) = raw[at..].windows(2).position(|w| w == b"\r\n") else {
            return (body, false);
        };
        let size = String::from_utf8_lossy(&raw[at..at + line]).into_owned();
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        let data = at + line + 2;
        if size == 0 {
            // The last chunk, then a blank line (no trailers here).
            return (body, raw[data..].starts_with(b"\r\n"));
        }
        let here = raw.len().saturating_sub(data).min(size);
        body += here;
        at = data + size + 2;
        if here < size || at > raw.len() {
            return (body, false);
        }
    }
}

/// `GET path` over TLS (ALPN `http/1.1`): reads the head and at least
/// [`SENT`] body bytes (or to the end), calls `cut`, then reads to the
/// end (5 s at most).
async fn over_http1(
    addr: std::net::SocketAddr,
    certs: &TestCerts,
    path: &str,
    cut: &dyn Fn(),
) -> Received {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let connector = certs.connector(&[tls::ALPN_HTTP11]);
    let mut stream = connector.connect(name, tcp).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = vec![0; 16 * 1024];
    let mut end = None;
    let body_start = loop {
        let head_end = seen.windows(4).position(|w| w == b"\r\n\r\n");
        if let Some(at) = head_end.filter(|at| seen.len() - at - 4 >= SENT) {
            break at + 4;
        }
        match stream.read(&mut buf).await {
            Ok(0) => end = Some("closed".to_string()),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(err) => end = Some(err.to_string()),
        }
        if end.is_some() {
            break head_end.map_or(seen.len(), |at| at + 4);
        }
    };
    cut();
    if end.is_none() {
        let mut rest = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
        seen.extend_from_slice(&rest);
        end = Some(match read {
            Ok(Ok(_)) => "closed".into(),
            Ok(Err(err)) => err.to_string(),
            Err(_) => "still open after 5 s".into(),
        });
    }
    let head = String::from_utf8_lossy(&seen[..body_start]).into_owned();
    let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (body, whole) = framed(&head, &seen[body_start..]);
    Received {
        status,
        body,
        whole,
        end: end.unwrap_or_default(),
    }
}

/// `GET path` over TLS (ALPN `h2`), the same way.
async fn over_h2(
    addr: std::net::SocketAddr,
    certs: &TestCerts,
    path: &str,
    cut: &dyn Fn(),
) -> Received {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let stream = certs
        .connector(&[tls::ALPN_H2])
        .connect(name, tcp)
        .await
        .unwrap();
    let sender = crate::support::h2_client(stream).await;
    let mut sender = sender.ready().await.unwrap();
    let uri = format!("https://localhost{path}");
    let (response, _) = sender
        .send_request(Request::get(uri).body(()).unwrap(), true)
        .unwrap();
    let (parts, mut received) = response.await.unwrap().into_parts();
    let (mut body, mut cut_yet) = (0, false);
    let end = loop {
        if body >= SENT && !cut_yet {
            cut();
            cut_yet = true;
        }
        let next = tokio::time::timeout(Duration::from_secs(5), received.data()).await;
        match next {
            Ok(Some(Ok(data))) => {
                body += data.len();
                let _ = received.flow_control().release_capacity(data.len());
            }
            Ok(Some(Err(err))) => break Err(err.to_string()),
            Ok(None) => break Ok("END_STREAM".to_string()),
            Err(_) => break Err("still open after 5 s".into()),
        }
    };
    if !cut_yet {
        cut();
    }
    Received {
        status: parts.status.as_u16(),
        body,
        whole: end.is_ok(),
        end: end.unwrap_or_else(|err| err),
    }
}

/// `GET path` over HTTP/3, the same way.
async fn over_h3(
    addr: std::net::SocketAddr,
    certs: &TestCerts,
    path: &str,
    cut: &dyn Fn(),
) -> Received {
    let mut client = Client::connect(addr, certs).await;
    let uri = format!("https://localhost{path}");
    let mut stream = client
        .send
        .send_request(Request::get(uri).body(()).unwrap())
        .await
        .unwrap();
    stream.finish().await.unwrap();
    let response = stream.recv_response().await.unwrap();
    let (mut body, mut cut_yet) = (0, false);
    let end = loop {
        if body >= SENT && !cut_yet {
            cut();
            cut_yet = true;
        }
        let next = tokio::time::timeout(Duration::from_secs(5), stream.recv_data()).await;
        match next {
            Ok(Ok(Some(mut chunk))) => body += chunk.copy_to_bytes(chunk.remaining()).len(),
            Ok(Ok(None)) => break Ok("end of stream".to_string()),
            Ok(Err(err)) => break Err(err.to_string()),
            Err(_) => break Err("still open after 5 s".into()),
        }
    };
    if !cut_yet {
        cut();
    }
    Received {
        status: response.status().as_u16(),
        body,
        whole: end.is_ok(),
        end: end.unwrap_or_else(|err| err),
    }
}

/// What `exchange` received; a panic if it takes more than 20 s (the part
/// sent never came).
async fn within(exchange: impl std::future::Future<Output = Received>) -> Received {
    tokio::time::timeout(Duration::from_secs(20), exchange)
        .await
        .expect("no answer, or not the part sent, within 20 s")
}

/// An HTTP/1.1 upstream that sends a 200 and [`SENT`] bytes of its body,
/// then, once the test adds a permit to `cuts`, closes: `/h1/length`
/// declares [`DECLARED`] bytes, `/h1/chunked` sends one chunk and no last
/// chunk.
fn breaking_http1_upstream(cuts: Arc<Semaphore>) -> HostileUpstream {
    HostileUpstream::start(move |request| {
        let part = vec![b'x'; SENT];
        let mut answer = if request.starts_with(b"GET /h1/chunked ") {
            format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{SENT:x}\r\n")
                .into_bytes()
        } else {
            format!("HTTP/1.1 200 OK\r\ncontent-length: {DECLARED}\r\n\r\n").into_bytes()
        };
        answer.extend_from_slice(&part);
        if request.starts_with(b"GET /h1/chunked ") {
            answer.extend_from_slice(b"\r\n");
        }
        vec![
            Step::Write(answer),
            Step::Hold(Arc::clone(&cuts)),
            Step::Close,
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_the_upstream_breaks_off_reaches_every_client_as_an_error() {
    let certs = TestCerts::generate();
    let http1_cuts = Arc::new(Semaphore::new(0));
    let http1 = breaking_http1_upstream(Arc::clone(&http1_cuts));
    let h2 = H2Server::start();
    let rest = format!(
        "upstreams:\n  http1:\n    hosts: [\"{}\"]\n    retries: 0\n  h2c:\n    hosts: [\"{}\"]\n    protocol: h2c\n    retries: 0\nroutes:\n  - {{ path: /h1, upstream: http1 }}\n  - {{ path: /cut, upstream: h2c }}\n  - {{ path: /cut-with-length, upstream: h2c }}\n",
        http1.url(),
        h2.url("")
    );
    let proxy = h3_support::proxy(&certs, "", &rest);
    let addr = proxy.addr();
    let paths = [
        "/h1/length".to_string(),
        "/h1/chunked".to_string(),
        format!("/cut/{SENT}"),
        format!("/cut-with-length/{SENT}"),
    ];
    for path in &paths {
        // Each upstream breaks off once the client has the part sent.
        let cut = || {
            if path.starts_with("/cut") {
                h2.cut();
            } else {
                http1_cuts.add_permits(1);
            }
        };
        let received = [
            (
                "HTTP/1.1",
                within(over_http1(addr, &certs, path, &cut)).await,
            ),
            ("HTTP/2", within(over_h2(addr, &certs, path, &cut)).await),
            ("HTTP/3", within(over_h3(addr, &certs, path, &cut)).await),
        ];
        for (protocol, received) in received {
            let case = format!("{path} to an {protocol} client: {received:?}");
            assert_eq!(received.status, 200, "{case}");
            assert_eq!(received.body, SENT, "{case}");
            assert!(!received.whole, "{case}: a short success");
            // An error the client sees, not a wait for the rest.
            assert!(!received.end.contains("still open"), "{case}");
        }
    }
    // Each client asked each `/cut` path once.
    assert_eq!(h2.requests(), 6);
}
