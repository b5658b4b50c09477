//! `sluice proxy` as a user runs it: a separate process, a real config
//! file, exit codes, SIGTERM draining a request in flight and memory
//! staying flat while large bodies pass.

use crate::common;

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use testkit::RawConn;

fn write_config(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-proxy-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the config dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the config");
    path
}

/// `sluice proxy -c PATH` running, and the address its first listener got.
fn spawn_proxy(path: &Path) -> (Child, SocketAddr) {
    spawn_proxy_as(path, "http://")
}

/// The same for a first listener whose URL starts with `scheme`.
fn spawn_proxy_as(path: &Path, scheme: &str) -> (Child, SocketAddr) {
    spawn_with_stderr(path, scheme, Stdio::inherit())
}

/// The same, its stderr (the log) going to `stderr`.
fn spawn_with_stderr(path: &Path, scheme: &str, stderr: Stdio) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "-c", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn sluice proxy");
    let addr = common::first_address(&mut child, scheme);
    (child, addr)
}

fn sluice(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

#[test]
fn bad_config_names_file_line_and_key_and_exits_2() {
    let path = write_config(
        "bad.yaml",
        "listeners: [{ address: 127.0.0.1:0 }]\nupstreams:\n  a:\n    hosts: [\"http://127.0.0.1:1\"]\n    retires: 3\n",
    );
    let output = sluice(&["proxy", "-c", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.yaml:5:5: upstreams.a.retires: unknown field"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean `retries`?"), "{stderr}");

    let missing = sluice(&["proxy", "-c", "/nonexistent/sluice.yaml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/sluice.yaml"));
}

#[test]
fn check_validates_without_serving() {
    let good = write_config(
        "good.yaml",
        "listeners: [{ address: 127.0.0.1:0 }]\nupstreams:\n  a: { hosts: [\"http://127.0.0.1:1\"] }\nroutes: [{ path: /, upstream: a }]\n",
    );
    let output = sluice(&["proxy", "-c", good.to_str().unwrap(), "--check"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("OK"));

    let unresolvable = write_config(
        "unresolvable.yaml",
        "listeners: [{ address: 127.0.0.1:0 }]\nupstreams:\n  a: { hosts: [\"http://no-such-host.invalid:80\"] }\n",
    );
    let output = sluice(&["proxy", "-c", unresolvable.to_str().unwrap(), "--check"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("upstreams.a.hosts"));

    // TLS files are read by --check too; the error names the key and the file.
    let missing_cert = write_config(
        "missing-cert.yaml",
        "listeners:\n  - address: 127.0.0.1:0\n    tls: { cert: /nonexistent/server.pem, key: /nonexistent/server.key.pem }\nupstreams:\n  a: { hosts: [\"http://127.0.0.1:1\"] }\n",
    );
    let output = sluice(&["proxy", "-c", missing_cert.to_str().unwrap(), "--check"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("listeners[0].tls"), "{stderr}");
    assert!(stderr.contains("/nonexistent/server.pem"), "{stderr}");
}

#[test]
fn a_bad_handler_setting_fails_the_check_where_it_is_written() {
    let path = write_config(
        "bad-rate.yaml",
        "listeners: [{ address: 127.0.0.1:0 }]\nupstreams:\n  a: { hosts: [\"http://127.0.0.1:1\"] }\nmiddleware:\n  limit:\n    rate_limit: { rate: 100/d }\nroutes: [{ path: /, chain: [limit], upstream: a }]\n",
    );
    let output = sluice(&["proxy", "-c", path.to_str().unwrap(), "--check"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "bad-rate.yaml:6:25: middleware.limit.rate_limit.rate: `100/d`: the unit must be s, m or h, not `d`"
        ),
        "{stderr}"
    );
}

#[test]
fn the_example_config_is_valid() {
    // Its paths are relative to the repository root, where it is meant to run.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "-c", "examples/petstore.yaml", "--check"])
        .current_dir(root)
        .output()
        .expect("run sluice");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

#[test]
fn schema_prints_the_json_schema_of_the_file() {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "--schema"])
        .output()
        .expect("run sluice");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let schema: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(schema, proxy::config::json_schema());
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let file = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/petstore.yaml"
    ));
    let text = std::fs::read_to_string(file).unwrap();
    let mut document = proxy::config::document(&text, file, |_| None).unwrap();
    assert!(validator.is_valid(&document));
    document["listener"] = serde_json::json!([]);
    assert!(!validator.is_valid(&document));
}

#[tokio::test]
async fn sigterm_drains_a_request_in_flight() {
    // Answers 700 ms after each request arrives, and counts them.
    let downstream = testkit::FakeServer::start(testkit::Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_millis(700),
    });
    let path = write_config(
        "drain.yaml",
        &format!(
            "workers: 1\nlisteners: [{{ address: 127.0.0.1:0 }}]\nupstreams:\n  d: {{ hosts: [\"http://{}\"] }}\nroutes: [{{ path: /, upstream: d }}]\nlimits: {{ shutdown_deadline: 5s }}\nlog: {{ level: warn }}\n",
            downstream.addr()
        ),
    );
    let (mut child, addr) = spawn_proxy(&path);

    let mut conn = RawConn::connect(addr).await;
    conn.send("GET /messages HTTP/1.1\r\nHost: t\r\n\r\n").await;
    // In flight once the upstream has it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while downstream.requests() == 0 {
        assert!(
            Instant::now() < deadline,
            "the request never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let response = conn.read_response(false).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("connection"), Some("close"));
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        // It exits when the request is done (700 ms); one that waited
        // out its shutdown_deadline (5 s) instead fails here.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the proxy did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(exit.code(), Some(0));
    // New connections are refused once it has stopped.
    assert!(std::net::TcpStream::connect(addr).is_err());
}

const HUNDRED_MB: usize = 100 * 1024 * 1024;

/// An upstream for one connection: `POST` bodies (Content-Length) are read
/// and counted, anything else gets a 100 MB body, written 64 KiB at a time.
fn bulk_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        loop {
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 {
                    return;
                }
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let length: u64 = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")?
                        .trim()
                        .parse()
                        .ok()
                })
                .unwrap_or(0);
            let read =
                std::io::copy(&mut (&mut reader).take(length), &mut std::io::sink()).unwrap();
            if head.starts_with("POST") {
                let body = read.to_string();
                write!(
                    writer,
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
            } else {
                write!(
                    writer,
                    "HTTP/1.1 200 OK\r\ncontent-length: {HUNDRED_MB}\r\n\r\n"
                )
                .unwrap();
                let block = vec![b'x'; 64 * 1024];
                for _ in 0..HUNDRED_MB / block.len() {
                    writer.write_all(&block).unwrap();
                }
            }
        }
    });
    addr
}

/// Reads one response head from `stream`; the rest stays unread.
fn read_head(stream: &mut BufReader<TcpStream>) -> String {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert_ne!(
            stream.read_line(&mut line).unwrap(),
            0,
            "closed after {head:?}"
        );
        head.push_str(&line);
        if line == "\r\n" {
            return head;
        }
    }
}

fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmHWM:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap()
}

#[test]
fn a_100_mb_body_each_way_passes_with_flat_memory() {
    let path = write_config(
        "bulk.yaml",
        &format!(
            "workers: 1\nlisteners: [{{ address: 127.0.0.1:0 }}]\nupstreams:\n  b: {{ hosts: [\"http://{}\"] }}\nroutes: [{{ path: /, upstream: b }}]\nlimits: {{ max_body_bytes: 200MiB }}\nlog: {{ level: warn }}\n",
            bulk_upstream()
        ),
    );
    let (mut child, addr) = spawn_proxy(&path);
    // The peak before any body moved: the binary's own size (its code
    // pages count in RSS) is not what this test is about.
    let started = peak_rss_kib(child.id());
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);

    write!(
        writer,
        "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {HUNDRED_MB}\r\n\r\n"
    )
    .unwrap();
    let block = vec![b'u'; 64 * 1024];
    for _ in 0..HUNDRED_MB / block.len() {
        writer.write_all(&block).unwrap();
    }
    let head = read_head(&mut reader);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut counted = vec![0u8; HUNDRED_MB.to_string().len()];
    reader.read_exact(&mut counted).unwrap();
    assert_eq!(String::from_utf8_lossy(&counted), HUNDRED_MB.to_string());

    writer
        .write_all(b"GET /download HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let head = read_head(&mut reader);
    assert!(
        head.contains(&format!("content-length: {HUNDRED_MB}")),
        "{head}"
    );
    let received = std::io::copy(
        &mut (&mut reader).take(HUNDRED_MB as u64),
        &mut std::io::sink(),
    )
    .unwrap();
    assert_eq!(received, HUNDRED_MB as u64);

    // Buffers are bounded per connection: 200 MB moved, memory stayed near idle.
    let peak = peak_rss_kib(child.id());
    let _ = child.kill();
    let _ = child.wait();
    eprintln!("peak RSS after 100 MB each way: {peak} KiB (at start: {started} KiB)");
    assert!(
        peak - started < 16 * 1024,
        "peak RSS {peak} KiB, {started} KiB at start"
    );
}

/// The certificate a TLS listener presents now (DER).
fn presented_certificate(addr: SocketAddr, ca: &Path) -> Vec<u8> {
    let config = tls::client_config(tls::Trust::CaFile(ca), None, &[tls::ALPN_HTTP11]).unwrap();
    let name = tls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut client = tls::rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while client.is_handshaking() {
        client.complete_io(&mut tcp).unwrap();
    }
    client.peer_certificates().unwrap()[0].to_vec()
}

#[test]
fn sighup_reloads_the_tls_certificate_and_a_bad_one_keeps_the_old() {
    let dir = std::env::temp_dir().join(format!("sluice-proxy-cli-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let certs = dir.to_str().unwrap();
    let issue = || {
        let out = sluice(&["cert", "--out", certs, "--hosts", "localhost,127.0.0.1"]);
        assert!(out.status.success(), "{out:?}");
    };
    issue();
    let config = write_config(
        "tls.yaml",
        &format!(
            "listeners:\n  - address: 127.0.0.1:0\n    tls: {{ cert: {certs}/server.pem, key: {certs}/server.key.pem }}\nupstreams:\n  a: {{ hosts: [\"http://127.0.0.1:1\"] }}\nroutes: [{{ path: /, upstream: a }}]\n"
        ),
    );
    let (mut child, addr) = spawn_with_stderr(&config, "https://", Stdio::piped());
    // The log, read as it comes: the failed reload is a state seen there.
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let collected = std::sync::Arc::clone(&log);
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            collected.lock().unwrap().push_str(&line);
            collected.lock().unwrap().push('\n');
        }
    });
    let ca = dir.join("ca.pem");
    let first = presented_certificate(addr, &ca);

    let hangup = || {
        let status = Command::new("kill")
            .args(["-HUP", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    issue();
    hangup();
    let deadline = Instant::now() + Duration::from_secs(5);
    let second = loop {
        let now = presented_certificate(addr, &ca);
        if now != first || Instant::now() > deadline {
            break now;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_ne!(second, first, "SIGHUP did not load the new certificate");

    std::fs::write(dir.join("server.key.pem"), "not a key").unwrap();
    hangup();
    // Only once the proxy has read the bad key (and said so) does the
    // certificate it presents say anything about the reload.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !log.lock().unwrap().contains("TLS reload failed") {
        assert!(
            Instant::now() < deadline,
            "no failed TLS reload logged within 10 s: {}",
            log.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(presented_certificate(addr, &ca), second);
    child.kill().unwrap();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// An upstream TLS failure reaches the client as a kind of failure only;
/// the names, addresses and rustls's reason go to the log (issue 26).
#[test]
fn an_upstream_tls_failure_names_no_internal_host_to_the_client_but_to_the_log() {
    let certs = testkit::TestCerts::generate();
    let upstream = testkit::FakeServer::start_tls(testkit::Behaviour::Normal, &certs);
    let config = write_config(
        "tls-mismatch.yaml",
        &format!(
            "workers: 1\nlisteners: [{{ address: 127.0.0.1:0 }}]\nupstreams:\n  payments:\n    hosts: [\"https://127.0.0.1:{}\"]\n    retries: 0\n    tls: {{ ca: \"{}\", server_name: payments.internal.corp }}\nroutes:\n  - {{ path: /, upstream: payments }}\n",
            upstream.addr().port(),
            certs.ca_path.display()
        ),
    );
    let (mut child, addr) = spawn_with_stderr(&config, "http://", Stdio::piped());
    let mut client = TcpStream::connect(addr).unwrap();
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    for internal in [
        "payments",
        "internal.corp",
        "127.0.0.1",
        "localhost",
        "certificate",
    ] {
        assert!(
            !answer.contains(internal),
            "{internal} reached the client: {answer}"
        );
    }
    child.kill().unwrap();
    let _ = child.wait();
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("payments"), "{log}");
    assert!(
        log.contains("payments.internal.corp"),
        "the log keeps the reason: {log}"
    );
}
