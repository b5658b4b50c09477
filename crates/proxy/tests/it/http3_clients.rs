//! Independent HTTP/3 clients (aioquic and niquests, PyPI) get from sluice
//! the answers an HTTP/1.1 client gets (tests/h3_clients.py makes their
//! requests). Their Python is `SLUICE_H3_PYTHON`, else the venv
//! ~/.cache/sluice/venv-h3 that .ci/run makes; without one that imports
//! both, the test skips through testkit::skip (group `h3py`): a SKIP
//! line, or a failure under `SLUICE_STRICT=1` or `SLUICE_REQUIRE_H3PY=1`.

use crate::h3_support;
use crate::support;

use std::{path::PathBuf, process::Command};

use h3_support::proxy;
use support::Echo;
use testkit::TestCerts;

/// The request line and body count the echo upstream saw, from its answer.
fn upstream_saw(body: &str) -> (String, String) {
    let line = |prefix: &str| {
        body.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_default()
            .to_string()
    };
    (line("GET ").max(line("POST ")), line("body-bytes:"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aioquic_and_niquests_get_the_answers_an_http11_client_gets() {
    let test = "aioquic_and_niquests_get_the_answers_an_http11_client_gets";
    let Some(python) = h3_support::python(test, &["aioquic", "niquests"]) else {
        return;
    };
    let certs = TestCerts::generate();
    let echo = Echo::start("e").await;
    let routes = format!(
        "upstreams:\n  echo:\n    hosts: [\"http://{}\"]\nroutes:\n  - {{ path: /pets, upstream: echo }}\n",
        echo.addr
    );
    let proxy = proxy(
        &certs,
        "    h3: { max_field_section_size: 4KiB }\n",
        &routes,
    );
    let addr = proxy.addr();

    // The HTTP/1.1 client's answers, over TLS on the TCP listener.
    let tls = tls::client_config(tls::Trust::CaFile(&certs.ca_path), None, &[b"http/1.1"]).unwrap();
    let connector = tls::tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls));
    let http11 = |request: &'static str| {
        let connector = connector.clone();
        async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let name = tls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let mut stream = connector.connect(name, tcp).await.unwrap();
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer).await;
            let answer = String::from_utf8_lossy(&answer).into_owned();
            let status: u16 = answer[9..12].parse().unwrap();
            let body = answer.split_once("\r\n\r\n").unwrap().1.to_string();
            (status, body)
        }
    };
    let get11 =
        http11("GET /pets?x=1 HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n").await;
    let post11 = http11("POST /pets HTTP/1.1\r\nhost: localhost\r\ncontent-length: 11\r\nconnection: close\r\n\r\nhello world").await;
    let missing11 =
        http11("GET /nowhere HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n").await;

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/h3_clients.py");
    let ca = certs.ca_path.display().to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(addr.to_string())
            .arg(ca)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "h3_clients.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let answer = |key: &str| {
        let status = seen[key]["status"].as_u64().unwrap_or(0) as u16;
        (status, seen[key]["body"].as_str().unwrap_or("").to_string())
    };

    for (key, expected) in [("get", &get11), ("post", &post11)] {
        let (status, body) = answer(key);
        assert_eq!(status, expected.0, "{key}: {seen}");
        assert_eq!(
            upstream_saw(&body),
            upstream_saw(&expected.1),
            "{key}: {seen}"
        );
    }
    assert_eq!(upstream_saw(&answer("post").1).1, "body-bytes: 11");
    let (status, body) = answer("missing");
    assert_eq!((status, body.as_str()), (missing11.0, missing11.1.as_str()));
    assert_eq!(
        seen["missing"]["headers"]["content-type"],
        "application/problem+json"
    );
    assert_eq!(answer("oversize").0, 431, "{seen}");
    assert_eq!(answer("after").0, 200, "the connection serves on: {seen}");

    let niquests = &seen["niquests"];
    assert_eq!(niquests["status"], 200, "{seen}");
    assert_eq!(niquests["version"], 30, "not HTTP/3: {seen}");
    let body = niquests["body"].as_str().unwrap();
    assert_eq!(upstream_saw(body), upstream_saw(&get11.1), "{seen}");
}
