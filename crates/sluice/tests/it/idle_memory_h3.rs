//! What an idle HTTP/3 client connection costs `sluice proxy`, as a
//! separate process, beside an idle HTTP/2 connection over TLS on the same
//! listener in the same run: the RSS rise over many idle connections (each
//! after one request), divided by their number. docs/LIFECYCLE-h3.md has
//! the figures; the bound here is loose, so that it holds on any machine.

use crate::common;

use std::{
    future::poll_fn,
    net::SocketAddr,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::Duration,
};

use load::idle::rss_kib;
use testkit::{serve, Backend, TestCerts};

/// As tests/idle_memory.rs: past the second after which buffers go back,
/// and the allocator's next tick.
const IDLE: Duration = Duration::from_millis(3200);

/// `sluice proxy`, one worker, a TLS listener with `[h2, http1, h3]`.
fn spawn_proxy(backend: SocketAddr, certs: &TestCerts) -> (Child, SocketAddr) {
    let dir = common::scratch("h3-idle");
    let config = dir.join("sluice.yaml");
    std::fs::write(
        &config,
        format!(
            "workers: 1\nlog: {{ level: warn }}\n\
             listeners:\n  - address: 127.0.0.1:0\n    protocols: [h2, http1, h3]\n    tls: {{ cert: \"{}\", key: \"{}\" }}\n\
             upstreams:\n  backend:\n    hosts: [\"http://{backend}\"]\n\
             routes:\n  - {{ path: /, upstream: backend }}\n",
            certs.cert_path.display(),
            certs.key_path.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(common::sluice())
        .args(["proxy", "-c", config.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn sluice proxy");
    let addr = common::first_address(&mut child, "https://");
    (child, addr)
}

/// Connections kept open: their handles (dropped at the end).
type Kept = Vec<Box<dyn std::any::Any + Send>>;

/// An HTTP/3 connection that made one request and stays open.
async fn idle_h3(addr: SocketAddr, endpoint: &quinn::Endpoint) -> Box<dyn std::any::Any + Send> {
    let conn = endpoint.connect(addr, "localhost").unwrap().await.unwrap();
    let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .unwrap();
    let driving = tokio::spawn(async move {
        let _ = poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let request = http::Request::get("https://localhost/").body(()).unwrap();
    let mut stream = send.send_request(request).await.unwrap();
    stream.finish().await.unwrap();
    assert_eq!(stream.recv_response().await.unwrap().status(), 200);
    while stream.recv_data().await.unwrap().is_some() {}
    Box::new((send, driving))
}

/// An HTTP/2 connection over TLS that made one request and stays open.
async fn idle_h2(
    addr: SocketAddr,
    tls: &tokio_rustls::TlsConnector,
) -> Box<dyn std::any::Any + Send> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let stream = tls.connect(name, tcp).await.unwrap();
    let (send, conn) = h2::client::handshake(stream).await.unwrap();
    let driving = tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut send = send.ready().await.unwrap();
    let request = http::Request::get("https://localhost/").body(()).unwrap();
    let (response, _) = send.send_request(request, true).unwrap();
    let mut body = response.await.unwrap().into_body();
    while let Some(data) = body.data().await {
        let _ = body.flow_control().release_capacity(data.unwrap().len());
    }
    Box::new((send, driving))
}

/// The RSS rise per connection over `count` connections made by `open`.
async fn rise<F, Fut>(pid: u32, count: usize, mut open: F) -> (u64, Kept)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Box<dyn std::any::Any + Send>>,
{
    let mut kept: Kept = vec![open().await];
    tokio::time::sleep(IDLE).await;
    let before = rss_kib(pid).unwrap();
    for _ in 0..count {
        kept.push(open().await);
    }
    tokio::time::sleep(IDLE).await;
    let after = rss_kib(pid).unwrap();
    (after.saturating_sub(before) * 1024 / count as u64, kept)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_h3_connection_costs_a_bounded_amount_and_is_measured_beside_h2() {
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let certs = TestCerts::generate();
    let backend = serve(Backend::Static);
    let (mut child, addr) = spawn_proxy(backend.addr(), &certs);
    let pid = child.id();
    const COUNT: usize = 200;

    let trust = tls::Trust::CaFile(&certs.ca_path);
    let config = tls::client_config(trust, None, &[b"h3"]).unwrap();
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(config).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    let (h3, kept_h3) = rise(pid, COUNT, || idle_h3(addr, &endpoint)).await;

    let trust = tls::Trust::CaFile(&certs.ca_path);
    let config = tls::client_config(trust, None, &[b"h2"]).unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let (h2, kept_h2) = rise(pid, COUNT, || idle_h2(addr, &connector)).await;

    println!("idle connections x{COUNT}: HTTP/3 {h3} B each, HTTP/2 over TLS {h2} B each");
    drop((kept_h3, kept_h2));
    endpoint.close(0u32.into(), b"done");
    let _ = child.kill();
    let _ = child.wait();
    assert!(h3 <= 256 * 1024, "{h3} bytes per idle HTTP/3 connection");
}
