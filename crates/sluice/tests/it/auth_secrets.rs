//! Secrets never reach the log (issue 48): `sluice proxy` as a process,
//! logging everything (`RUST_LOG=trace`, the libraries' own logs too) and
//! an access log that names the credential headers, is sent API keys,
//! Basic passwords (right and wrong) and bearer tokens through `api_key`,
//! `basic_auth` and `ext_authz` (asking an auth service of the test's
//! own); neither the log, the access log nor the answers hold any of them.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    process::{Command, Stdio},
    time::Duration,
};

use base64::Engine as _;

use crate::common;

const API_KEY: &str = "topsecret-api-key-0123456789";
const PASSWORD: &str = "correct-horse-battery-staple";
const WRONG: &str = "wrong-password-zyxwvutsrq";
const TOKEN: &str = "opaque-bearer-token-abcdefghij";

/// An auth service that allows everything, answering on its own thread.
fn auth_service() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 8192];
                let mut seen = Vec::new();
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        let answer =
                            "HTTP/1.1 200 OK\r\nx-auth-user: alice\r\ncontent-length: 0\r\n\r\n";
                        if stream.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

fn exchange(addr: SocketAddr, path: &str, headers: &[(&str, String)]) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn keys_passwords_and_tokens_never_reach_the_logs_or_the_answers() {
    let test = "keys_passwords_and_tokens_never_reach_the_logs_or_the_answers";
    let dir = common::scratch("auth-secrets");
    let htpasswd = dir.join("htpasswd");
    let made = Command::new("htpasswd")
        .args(["-B", "-C", "5", "-b", "-c"])
        .arg(&htpasswd)
        .args(["alice", PASSWORD])
        .output();
    if made.is_err() {
        testkit::skip(
            test,
            testkit::Need::Htpasswd,
            "no htpasswd (apt-get install apache2-utils)",
        );
        return;
    }
    let upstream = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let access_log = dir.join("access.log");
    let config = dir.join("sluice.yaml");
    std::fs::write(
        &config,
        format!(
            "listeners: [{{ address: 127.0.0.1:0 }}]\nupstreams:\n  u: {{ hosts: [\"http://{upstream}\"] }}\n\
             middleware:\n  access_log: {{ path: \"{}\", headers: [authorization, x-api-key, cookie] }}\n  api_key: {{ keys: {{ ci: \"{API_KEY}\" }} }}\n  basic_auth: {{ htpasswd: \"{}\" }}\n  ext_authz: {{ http: \"http://{}/check\", upstream_headers: [x-auth-user] }}\n\
             routes:\n  - {{ path: /key, chain: [access_log, api_key], upstream: u }}\n  - {{ path: /basic, chain: [access_log, basic_auth], upstream: u }}\n  - {{ path: /authz, chain: [access_log, ext_authz], upstream: u }}\n",
            access_log.display(),
            htpasswd.display(),
            auth_service(),
        ),
    )
    .unwrap();
    let log = dir.join("stderr.log");
    let mut child = Command::new(common::sluice())
        .args(["proxy", "-c", config.to_str().unwrap()])
        .env("RUST_LOG", "trace")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let addr = common::first_address(&mut child, "http://");
    let basic = |password: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("alice:{password}"))
        )
    };
    let mut answers = String::new();
    for (path, headers) in [
        ("/key", vec![("x-api-key", API_KEY.to_string())]),
        ("/key", vec![("x-api-key", format!("{API_KEY}x"))]),
        ("/key?api_key=nothing", vec![]),
        ("/basic", vec![("authorization", basic(PASSWORD))]),
        ("/basic", vec![("authorization", basic(WRONG))]),
        (
            "/authz",
            vec![
                ("authorization", format!("Bearer {TOKEN}")),
                ("cookie", format!("session={TOKEN}")),
            ],
        ),
    ] {
        answers.push_str(&exchange(addr, path, &headers));
    }
    // The answers came (the upstream is a closed port: 502 once admitted).
    assert!(answers.contains("HTTP/1.1 401"), "{answers}");
    assert!(answers.contains("HTTP/1.1 502"), "{answers}");
    // The access log's writer takes its queue every 20 ms.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let lines = loop {
        let lines = std::fs::read_to_string(&access_log).unwrap_or_default();
        if lines.lines().count() >= 6 || std::time::Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        lines.lines().count() >= 6,
        "the access log has every request:\n{lines}"
    );
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    let logged = std::fs::read_to_string(&log).unwrap();
    for secret in [
        API_KEY.to_string(),
        PASSWORD.to_string(),
        WRONG.to_string(),
        TOKEN.to_string(),
        basic(PASSWORD)["Basic ".len()..].to_string(),
        basic(WRONG)["Basic ".len()..].to_string(),
    ] {
        for (what, text) in [
            ("the log", &logged),
            ("the access log", &lines),
            ("the answers", &answers),
        ] {
            assert!(!text.contains(&secret), "{what} holds {secret}");
        }
    }
}
