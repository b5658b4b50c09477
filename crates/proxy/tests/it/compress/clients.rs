//! Real decoders get the exact bytes: curl `--compressed` over HTTP/1.1
//! and HTTP/2 (h2c), and Python's gzip, brotli and zstandard modules over
//! HTTP/1.1, HTTP/2 and HTTP/3 (tests/compress_clients.py), for each
//! coding, from HTTP/1.1 and h2c upstreams, with and without a length.

use std::{path::PathBuf, process::Command};

use testkit::TestCerts;

use super::{body, Upstreams, EACH_CODING};
use crate::{h3_support, support::Proxy};

/// Every path the routes serve, `/{upstream}/{coding}/{json|chunked}`.
fn paths() -> Vec<String> {
    let mut paths = Vec::new();
    for upstream in ["h1", "h2c"] {
        for (coding, _) in EACH_CODING {
            for what in ["json", "chunked"] {
                paths.push(format!("/{upstream}/{coding}/{what}"));
            }
        }
    }
    paths
}

fn sha256(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_decodes_every_coding_over_http1_and_http2() {
    let test = "curl_decodes_every_coding_over_http1_and_http2";
    let Some(curl) = crate::support::peers::program("curl") else {
        return testkit::skip(
            test,
            testkit::Need::Peer,
            "curl is not installed (apt-get install curl)",
        );
    };
    let upstreams = Upstreams::start().await;
    let proxy = Proxy::start(&upstreams.config(&EACH_CODING));
    let expected = body();
    let dir = crate::support::peers::scratch("curl");
    for path in paths() {
        for http2 in [false, true] {
            let (out, head) = (dir.join("body"), dir.join("head"));
            let mut command = Command::new(&curl);
            command.args(["-sS", "--compressed", "--max-time", "10", "-D"]);
            command.arg(&head).arg("-o").arg(&out);
            if http2 {
                command.arg("--http2-prior-knowledge");
            }
            command.arg(format!("http://{}{path}", proxy.addr()));
            let ran = tokio::task::spawn_blocking(move || command.output().unwrap())
                .await
                .unwrap();
            assert!(
                ran.status.success(),
                "{path}: {}",
                String::from_utf8_lossy(&ran.stderr)
            );
            let head = std::fs::read_to_string(&head).unwrap().to_ascii_lowercase();
            let coding = path.split('/').nth(2).unwrap();
            assert!(
                head.contains(&format!("content-encoding: {coding}\r\n")),
                "{path} (HTTP/2: {http2}): {head}"
            );
            assert!(head.contains("vary: accept-encoding\r\n"), "{head}");
            assert!(!head.contains("content-length"), "{head}");
            let got = std::fs::read(&out).unwrap();
            assert!(
                got == expected,
                "{path} (HTTP/2: {http2}): {} bytes decoded",
                got.len()
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_decoders_get_the_exact_bytes_over_http1_http2_and_http3() {
    let test = "python_decoders_get_the_exact_bytes_over_http1_http2_and_http3";
    let modules = ["aioquic", "niquests", "brotli", "zstandard"];
    let Some(python) = h3_support::python(test, &modules) else {
        return;
    };
    let certs = TestCerts::generate();
    let upstreams = Upstreams::start().await;
    let proxy = h3_support::proxy(&certs, "", &upstreams.config(&EACH_CODING));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/compress_clients.py");
    let mut command = Command::new(python);
    command
        .arg(script)
        .arg(proxy.addr().to_string())
        .arg(&certs.ca_path)
        .args(paths());
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "compress_clients.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let expected = sha256(&body());
    for protocol in ["http1", "http2", "http3"] {
        for path in paths() {
            let answer = &seen[protocol][&path];
            let coding = path.split('/').nth(2).unwrap();
            assert_eq!(answer["status"], 200, "{protocol} {path}: {answer}");
            assert_eq!(answer["encoding"], coding, "{protocol} {path}: {answer}");
            assert_eq!(
                answer["sha256"],
                expected.as_str(),
                "{protocol} {path}: {answer}"
            );
            assert!(answer["wire"].as_u64().unwrap() < 200_000 / 3, "{answer}");
        }
    }
    // The protocols were what they say.
    assert_eq!(seen["http1"]["/h1/gzip/json"]["version"], 11);
    assert_eq!(seen["http2"]["/h1/gzip/json"]["version"], 20);
}
