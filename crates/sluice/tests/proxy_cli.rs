//! `sluice proxy` as a user runs it: a separate process, a real config
//! file, exit codes and SIGTERM draining a request in flight.

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use backends::Backend;
use testkit::{serve, RawConn};

fn write_config(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-proxy-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the config dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the config");
    path
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
}

#[test]
fn the_example_config_is_valid() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/petstore.yaml");
    let output = sluice(&["proxy", "-c", example, "--check"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

#[tokio::test]
async fn sigterm_drains_a_request_in_flight() {
    let downstream = serve(Backend::Downstream);
    let path = write_config(
        "drain.yaml",
        &format!(
            "workers: 1\nlisteners: [{{ address: 127.0.0.1:0 }}]\nupstreams:\n  d: {{ hosts: [\"http://{}\"] }}\nroutes: [{{ path: /, upstream: d }}]\nlimits: {{ shutdown_deadline: 5s }}\nlog: {{ level: warn }}\n",
            downstream.addr()
        ),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "-c", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn sluice proxy");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));

    let mut conn = RawConn::connect(addr).await;
    let body = r#"{"id":"1","payload":"p","delay":700}"#;
    conn.send(testkit::request_bytes(
        "POST",
        "/messages",
        &["Content-Type: application/json"],
        body.as_bytes(),
    ))
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
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
