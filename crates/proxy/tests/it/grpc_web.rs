//! `grpc_web` against real gRPC-Web clients and a real gRPC server
//! (tests/grpcweb/, built here with `go build`): connect-go with
//! `connect.WithGRPCWeb()` (proto and JSON codecs) and hand-framed
//! text-mode (base64) calls over HTTP/1.1, HTTP/2 and HTTP/3, and the
//! official gRPC-Web JS client (npm `grpc-web`, text mode) under Node,
//! calling a grpc-go server's unary and server-streaming methods through
//! sluice: messages, error statuses (trailers-only, and after messages),
//! headers and trailers. A browser's CORS preflight is answered by `cors`.

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::OnceLock,
};

use serde_json::Value;
use testkit::{Need, TestCerts};

use crate::support::{peers::program, Proxy};

/// The Go program, built once per test binary; `None` after a SKIP line.
fn peer(test: &str) -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let go = program("go")
            .or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| p.is_file()))
            .ok_or("go is not installed (apt-get install golang)")?;
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("grpcweb-peer");
        let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/grpcweb");
        let built = Command::new(go)
            .args(["build", "-o"])
            .arg(&out)
            .arg(".")
            .current_dir(source)
            .output()
            .map_err(|err| err.to_string())?;
        if !built.status.success() {
            return Err(format!(
                "go build failed: {}",
                String::from_utf8_lossy(&built.stderr)
            ));
        }
        Ok(out)
    });
    match built {
        Ok(path) => Some(path.clone()),
        Err(why) => {
            testkit::skip(test, Need::Toolchain, why);
            None
        }
    }
}

/// The grpc-go server, killed on drop.
struct Server(Child, std::net::SocketAddr);

impl Server {
    fn start(peer: &PathBuf) -> Self {
        let mut child = Command::new(peer)
            .arg("server")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Self(child, line.trim().parse().unwrap())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// sluice in front of `server`: a TLS listener (HTTP/1.1, HTTP/2, HTTP/3)
/// and a plaintext one, `cors` then `grpc_web` on the service's route.
fn proxy(certs: &TestCerts, server: std::net::SocketAddr) -> Proxy {
    Proxy::start_yaml(&format!(
        "workers: 1\nlisteners:\n  - address: 127.0.0.1:0\n    protocols: [h2, http1, h3]\n    tls: {{ cert: \"{}\", key: \"{}\" }}\n  - address: 127.0.0.1:0\nadmin: {{ address: 127.0.0.1:0, hosts: [test] }}\nupstreams:\n  grpc:\n    hosts: [\"http://{server}\"]\n    protocol: h2c\nmiddleware:\n  browser: {{ cors: {{ origins: [\"https://app.example\"], methods: [POST], headers: [content-type, x-grpc-web, x-user-agent], expose_headers: [grpc-status, grpc-message] }} }}\nroutes:\n  - {{ path: /sluice.test.Echo, chain: [browser, grpc_web], upstream: grpc }}\n",
        certs.cert_path.display(),
        certs.key_path.display()
    ))
}

/// The Go program, its grpc-go server, and sluice in front of it; `None`
/// after a SKIP line.
fn setup(test: &str) -> Option<(PathBuf, Server, TestCerts, Proxy)> {
    let peer = peer(test)?;
    let server = Server::start(&peer);
    let certs = TestCerts::generate();
    let proxy = proxy(&certs, server.1);
    Some((peer, server, certs, proxy))
}

async fn run(mut command: Command) -> Value {
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_go_calls_grpc_go_through_sluice_over_every_protocol() {
    let test = "connect_go_calls_grpc_go_through_sluice_over_every_protocol";
    let Some((peer, _server, certs, proxy)) = setup(test) else {
        return;
    };
    let base = format!("https://127.0.0.1:{}", proxy.addr().port());
    let mut command = Command::new(&peer);
    command.arg("client").arg(&base).arg(&certs.ca_path);
    let seen = run(command).await;
    for protocol in ["http1", "http2", "http3"] {
        for codec in ["proto", "json"] {
            let calls = &seen[format!("{protocol}/{codec}")];
            let unary = &calls["unary"];
            assert_eq!(unary["value"], "echo: hello", "{protocol}/{codec}: {calls}");
            assert_eq!(unary["header"], "h", "{calls}");
            assert_eq!(unary["trailer"], "t", "{calls}");
            assert_eq!(
                unary["content_type"],
                format!("application/grpc-web+{codec}")
            );
            // A trailers-only answer: the status in the head.
            assert_eq!(calls["unary_error"]["code"], "not_found", "{calls}");
            assert_eq!(calls["unary_error"]["message"], "no such pet", "{calls}");
            let stream = &calls["stream"];
            assert_eq!(
                stream["messages"],
                serde_json::json!(["message 0", "message 1", "message 2"]),
                "{calls}"
            );
            assert_eq!(stream["sent"], "3");
            assert!(stream.get("error").is_none(), "{calls}");
            // Trailers after messages carry the error.
            let failed = &calls["stream_error"];
            assert_eq!(
                failed["messages"],
                serde_json::json!(["message 0", "message 1"]),
                "{calls}"
            );
            assert_eq!(failed["error"]["code"], "aborted", "{calls}");
            assert_eq!(calls["stream_empty"]["sent"], "0", "{calls}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_mode_calls_are_base64_both_ways() {
    let test = "text_mode_calls_are_base64_both_ways";
    let Some((peer, _server, certs, proxy)) = setup(test) else {
        return;
    };
    let base = format!("https://127.0.0.1:{}", proxy.addr().port());
    let mut command = Command::new(&peer);
    command.arg("text").arg(&base).arg(&certs.ca_path);
    let seen = run(command).await;
    for (protocol, proto) in [
        ("http1", "HTTP/1.1"),
        ("http2", "HTTP/2.0"),
        ("http3", "HTTP/3.0"),
    ] {
        let calls = &seen[protocol];
        let unary = &calls["unary"];
        assert_eq!(unary["proto"], proto, "{calls}");
        assert_eq!(
            unary["content_type"], "application/grpc-web-text+proto",
            "{calls}"
        );
        assert_eq!(
            unary["messages"],
            serde_json::json!(["echo: hello"]),
            "{calls}"
        );
        assert_eq!(unary["status"], "0", "{calls}");
        assert_eq!(unary["trailer x-echo-trailer"], "t", "{calls}");
        assert_eq!(calls["unary_error"]["status"], "5", "{calls}");
        assert_eq!(calls["unary_error"]["message"], "no such pet", "{calls}");
        assert_eq!(
            calls["stream"]["messages"].as_array().unwrap().len(),
            3,
            "{calls}"
        );
        assert_eq!(calls["stream"]["trailer x-sent"], "3", "{calls}");
        assert_eq!(
            calls["stream_error"]["messages"].as_array().unwrap().len(),
            2,
            "{calls}"
        );
        assert_eq!(calls["stream_error"]["status"], "10", "{calls}");
    }

    // The official JS client, text mode, over HTTP/1.1 (xhr2).
    let node_modules = std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".cache/sluice/grpcweb-node/node_modules"))
        .filter(|dir| dir.join("grpc-web").is_dir());
    let (Some(node), Some(node_modules)) = (program("node"), node_modules) else {
        return testkit::skip(
            test,
            Need::Toolchain,
            "node or the grpc-web npm client is missing (npm install --prefix ~/.cache/sluice/grpcweb-node grpc-web xhr2 google-protobuf)",
        );
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/grpcweb/text_client.js");
    let mut command = Command::new(node);
    command
        .arg(script)
        .arg(format!("http://{}", proxy.addrs()[1]))
        .env("NODE_PATH", node_modules);
    let seen = run(command).await;
    assert_eq!(seen["unary"]["value"], "echo: hello", "{seen}");
    assert_eq!(seen["unary_error"]["code"], 5, "{seen}");
    assert_eq!(seen["unary_error"]["message"], "no such pet", "{seen}");
    assert_eq!(
        seen["stream"]["messages"],
        serde_json::json!(["message 0", "message 1", "message 2"]),
        "{seen}"
    );
    assert_eq!(seen["stream"]["status"]["code"], 0, "{seen}");
    assert_eq!(
        seen["stream_error"]["messages"].as_array().unwrap().len(),
        2,
        "{seen}"
    );
    assert_eq!(seen["stream_error"]["error"]["code"], 10, "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browsers_preflight_is_answered_and_the_status_exposed() {
    let test = "a_browsers_preflight_is_answered_and_the_status_exposed";
    let Some((_peer, _server, _certs, proxy)) = setup(test) else {
        return;
    };
    let mut conn = testkit::RawConn::connect(proxy.addrs()[1]).await;
    let preflight = conn
        .request(
            "OPTIONS",
            "/sluice.test.Echo/Unary",
            &[
                "Origin: https://app.example",
                "Access-Control-Request-Method: POST",
                "Access-Control-Request-Headers: content-type, x-grpc-web, x-user-agent",
            ],
            b"",
        )
        .await;
    assert_eq!(preflight.status, 204, "{}", preflight.text());
    assert_eq!(
        preflight.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    let allowed = preflight
        .header("access-control-allow-headers")
        .unwrap_or("")
        .to_ascii_lowercase();
    assert!(
        allowed.contains("x-grpc-web") && allowed.contains("content-type"),
        "{allowed}"
    );
    // The call itself: a gRPC-Web unary POST, its status exposed to scripts.
    let message = b"\x0a\x05hello";
    let mut body = vec![0u8, 0, 0, 0, u8::try_from(message.len()).unwrap()];
    body.extend_from_slice(message);
    let answer = conn
        .request(
            "POST",
            "/sluice.test.Echo/Unary",
            &[
                "Origin: https://app.example",
                "Content-Type: application/grpc-web+proto",
                "X-Grpc-Web: 1",
            ],
            &body,
        )
        .await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.header("content-type"),
        Some("application/grpc-web+proto")
    );
    assert_eq!(
        answer.header("access-control-expose-headers"),
        Some("grpc-status, grpc-message")
    );
    // The message, then the trailer frame with the status.
    assert!(
        answer.body.windows(11).any(|w| w == b"echo: hello"),
        "{:?}",
        answer.body
    );
    let text = String::from_utf8_lossy(&answer.body);
    assert!(text.contains("grpc-status: 0\r\n"), "{text}");
}
