//! The PROXY protocol (versions 1 and 2) on listeners and toward
//! upstreams: headers written by the proxy's own writer and by hand here,
//! by HAProxy and read by HAProxy and nginx in `peers`. Loopback has many
//! addresses (127.0.0.0/8): the "load balancer" connects from 127.0.0.1,
//! which the listener trusts, and a stranger from 127.0.0.2, which it
//! does not.

mod listener;
mod peers;
mod upstream;

use std::net::SocketAddr;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
};

/// The value of the counter `sluice_guard_events_total{event=...}`.
async fn guard_event(admin: SocketAddr, event: &str) -> u64 {
    let metrics = testkit::RawConn::connect(admin)
        .await
        .get("/metrics")
        .await
        .text();
    let prefix = format!("sluice_guard_events_total{{event=\"{event}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in\n{metrics}"))
        .trim()
        .parse()
        .unwrap()
}

/// A connection to `to` from the loopback address `source`.
async fn connect_from(source: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

/// Everything the peer sends until it closes (within 10 s), as text.
async fn read_to_close<S: AsyncReadExt + Unpin>(stream: &mut S) -> String {
    let mut seen = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut seen),
    );
    // A reset counts as a close; whatever came before it is kept.
    let _ = read.await.expect("the proxy neither answered nor closed");
    String::from_utf8_lossy(&seen).into_owned()
}

/// Sends `prefix`, then a `GET path` with `Connection: close` and `extra`
/// header lines, and reads the answer to its close.
async fn request_after<S: AsyncReadExt + AsyncWriteExt + Unpin>(
    stream: &mut S,
    prefix: &[u8],
    path: &str,
    extra: &str,
) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nhost: test\r\n{extra}connection: close\r\n\r\n");
    stream
        .write_all(&[prefix, request.as_bytes()].concat())
        .await
        .unwrap();
    read_to_close(stream).await
}

/// The value of `name` in the request head the echo upstream received
/// (the answer's body), if any.
fn upstream_saw(answer: &str, name: &str) -> Option<String> {
    let body = answer.split_once("\r\n\r\n")?.1;
    body.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

fn status(answer: &str) -> u16 {
    answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}
