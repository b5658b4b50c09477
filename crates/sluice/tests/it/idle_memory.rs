//! What an idle client connection costs `sluice proxy`, as a separate
//! process: its RSS rise over many idle connections, each opened after
//! one request, divided by their number. The bounds are twice the targets
//! (1 KiB for HTTP/1.1, 4 KiB for HTTP/2; docs/PERFORMANCE.md has the
//! measured figures), so that the test stays stable on any machine.

use crate::common;

use std::{
    net::{SocketAddr, TcpStream},
    process::{Child, Command, Stdio},
    time::Duration,
};

use load::idle::{open_idle, rss_kib, IdleProtocol};
use testkit::{serve, Backend};

/// How long the connections sit idle before the RSS is read: the proxy
/// gives an HTTP/2 connection's buffers back a second after its last
/// stream, and the allocator's freed pages go back to the system at the
/// next once-a-second tick after they stayed free a second (crates/sluice/
/// src/allocator.rs), so 3 s after the last answer (as docs/PERFORMANCE.md
/// measures) all of it is gone.
const IDLE: Duration = Duration::from_millis(3200);

/// `sluice proxy` with one worker in front of `backend`, and its address.
fn spawn_proxy(backend: SocketAddr, protocols: &str) -> (Child, SocketAddr) {
    let dir = std::env::temp_dir().join(format!("sluice-idle-{}-{protocols}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("sluice.yaml");
    std::fs::write(
        &config,
        format!(
            "workers: 1\nlog: {{ level: warn }}\n\
             listeners: [{{ address: 127.0.0.1:0, protocols: [{protocols}] }}]\n\
             upstreams:\n  backend:\n    hosts: [\"http://{backend}\"]\n\
             routes:\n  - {{ path: /, upstream: backend }}\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "-c", config.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn sluice proxy");
    let addr = common::first_address(&mut child, "http://");
    (child, addr)
}

/// The proxy's RSS rise per connection over `count` idle connections,
/// each opened by `open` (after a first one, so that the upstream
/// connection and the worker's spares exist before the count starts).
fn rise_per_connection(protocol: IdleProtocol, count: usize) -> u64 {
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let backend = serve(Backend::Static);
    let protocols = match protocol {
        IdleProtocol::Http1 => "http1",
        IdleProtocol::H2 => "h2",
    };
    let (mut child, addr) = spawn_proxy(backend.addr(), protocols);
    let open = || open_idle(addr, protocol, "idle.test", "/").unwrap();
    let warm = open();
    std::thread::sleep(Duration::from_millis(100));
    let before = rss_kib(child.id()).unwrap();
    let conns: Vec<TcpStream> = (0..count).map(|_| open()).collect();
    // Idle: past the second after which sluice parks an HTTP/1.1
    // connection (its task goes; docs/PERFORMANCE.md).
    std::thread::sleep(IDLE);
    let after = rss_kib(child.id()).unwrap();
    drop(conns);
    drop(warm);
    let _ = child.kill();
    let _ = child.wait();
    after.saturating_sub(before) * 1024 / count as u64
}

#[test]
fn an_idle_http1_connection_costs_at_most_2_kib() {
    let per_connection = rise_per_connection(IdleProtocol::Http1, 2000);
    assert!(
        per_connection <= 2048,
        "{per_connection} bytes per idle HTTP/1.1 connection"
    );
}

/// An idle HTTP/2 connection gives back its stream slots and buffers after
/// a second without streams (vendor/h2/SLUICE.md): about 3.8 KB remain.
#[test]
fn an_idle_h2_connection_costs_at_most_8_kib() {
    let per_connection = rise_per_connection(IdleProtocol::H2, 500);
    assert!(
        per_connection <= 8192,
        "{per_connection} bytes per idle HTTP/2 connection"
    );
}
