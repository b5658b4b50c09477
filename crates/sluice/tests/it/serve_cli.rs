//! `sluice serve` as a user runs it: a separate process, real signals,
//! exit codes, and 10,000 concurrent delayed requests.

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use testkit::{until, Behaviour, FakeServer, RawConn};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A `sluice serve` child process, killed if a test fails before it exits.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Served {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("serve")
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn sluice");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the listening line");
        let addr = line
            .trim()
            .rsplit("://")
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        Self { child, addr }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Waits up to `limit` for the process to exit and returns its code.
    fn wait_exit(&mut self, limit: Duration) -> i32 {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code().unwrap_or(-1);
            }
            assert!(
                started.elapsed() < limit,
                "sluice did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn serves_then_exits_cleanly_on_sigterm() {
    let mut served = Served::start(&["petstore", "--workers", "2"]);
    let mut conn = RawConn::connect(served.addr).await;
    assert_eq!(conn.get("/v1/pets").await.text(), backends::PETS);
    served.signal("TERM");
    assert_eq!(served.wait_exit(Duration::from_secs(5)), 0);
}

#[tokio::test]
async fn sigint_lets_the_request_in_flight_finish() {
    // `passthrough` in front of a downstream that answers 500 ms after a
    // request reaches it: the request is in flight exactly when it has one.
    let downstream = FakeServer::start(Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(500),
    });
    let mut served = Served::start(&[
        "passthrough",
        "--workers",
        "1",
        "--downstream",
        &downstream.url(""),
    ]);
    let mut conn = RawConn::connect(served.addr).await;
    conn.send(testkit::request_bytes(
        "POST",
        "/passthrough/message",
        &["Content-Type: application/json"],
        br#"{"id":"drain","delay":0}"#,
    ))
    .await;
    assert!(
        until(Duration::from_secs(5), || async {
            downstream.requests() == 1
        })
        .await,
        "the request never reached the downstream"
    );
    served.signal("INT");
    let response = conn.read_response(false).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"ok");
    assert_eq!(served.wait_exit(Duration::from_secs(5)), 0);
}

#[test]
fn unknown_service_is_a_usage_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "petshop"])
        .output()
        .expect("run sluice");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown service `petshop`"), "{stderr}");
    assert!(
        stderr.contains("petstore, customers, downstream, passthrough, static"),
        "{stderr}"
    );
}

#[test]
fn bad_flags_are_usage_errors() {
    for (args, message) in [
        (
            &["serve", "petstore", "--workers", "0"][..],
            "invalid worker count `0`",
        ),
        (
            &["serve", "passthrough", "--downstream", "/relative"],
            "expected http://HOST:PORT",
        ),
        (
            &["serve", "passthrough", "--downstream", "https://x:1"],
            "expected http://HOST:PORT",
        ),
        (
            &["serve", "petstore", "--listen", "localhost"],
            "invalid socket address",
        ),
        (
            &["serve", "downstream", "--shutdown-deadline", "soon"],
            "soon",
        ),
        (
            &["serve", "petstore", "--tls-cert", "certs/server.pem"],
            "--tls-key",
        ),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .output()
            .expect("run sluice");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(message),
            "{args:?}: expected {message:?} in {stderr}"
        );
    }
}

/// The files `sluice cert` writes serve TLS; a missing key is named.
#[tokio::test]
async fn serves_tls_with_the_files_of_sluice_cert() {
    let dir = std::env::temp_dir().join(format!("sluice-serve-tls-{}", std::process::id()));
    let made = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["cert", "--out", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let (cert, key) = (dir.join("server.pem"), dir.join("server.key.pem"));

    let served = Served::start(&[
        "petstore",
        "--workers",
        "1",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let config = tls::client_config(
        tls::Trust::CaFile(&dir.join("ca.pem")),
        None,
        &[tls::ALPN_HTTP11],
    )
    .unwrap();
    let tcp = tokio::net::TcpStream::connect(served.addr).await.unwrap();
    let mut stream = tls::tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(served.addr.ip().into(), tcp)
        .await
        .unwrap();
    stream
        .write_all(b"GET /v1/pets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with(backends::PETS), "{answer}");
    drop(served);

    let missing = dir.join("missing.key.pem");
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "petstore", "--listen", "127.0.0.1:0"])
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&missing)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
}

#[test]
fn address_in_use_fails_with_the_address() {
    // A listener without SO_REUSEPORT keeps the port to itself.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("local addr").to_string();
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "static", "--listen", &addr])
        .output()
        .expect("run sluice");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr}"
    );
}

#[test]
fn help_lists_services_and_examples() {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--help"])
        .output()
        .expect("run sluice");
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for needle in [
        "petstore",
        "customers",
        "downstream",
        "passthrough",
        "static",
        "Examples:",
        "--workers",
    ] {
        assert!(help.contains(needle), "help lacks {needle}: {help}");
    }
}

/// seeds/003's point: delays wait on timers, so 10,000 concurrent requests
/// of 1 s finish in about 1 s. The server is its own process so that client
/// and server each need only 10,000 descriptors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_concurrent_delays_finish_in_about_the_delay() {
    let limit = testkit::raise_fd_limit();
    let wanted = 10_000usize;
    let count = wanted.min(usize::try_from(limit).unwrap_or(wanted).saturating_sub(256));
    if count < wanted {
        testkit::skip(
            "ten_thousand_concurrent_delays_finish_in_about_the_delay",
            testkit::Need::FileLimit,
            &format!(
                "open-file limit {limit}: running {count} concurrent requests instead of {wanted} \
                 (raise the hard limit: ulimit -Hn)"
            ),
        );
    }
    let served = Served::start(&["downstream", "--workers", "2"]);

    let conns = testkit::connect_many(served.addr, count).await;
    let started = Instant::now();
    let statuses = testkit::post_json_on_each(conns, "/messages", |i| {
        format!(r#"{{"id":"{i}","delay":1000}}"#)
    })
    .await;
    assert!(statuses.iter().all(|&status| status == 200));
    let elapsed = started.elapsed();
    eprintln!("{count} concurrent requests with a 1000 ms delay took {elapsed:?}");
    assert!(elapsed >= Duration::from_millis(1000));
    // In series the delays alone would take `count` seconds; 60 s leaves
    // room for a loaded machine and still proves that at least count / 60
    // (over 160) ran at once.
    assert!(
        elapsed < Duration::from_secs(60),
        "{count} x 1 s took {elapsed:?}: delays are not concurrent"
    );
}
