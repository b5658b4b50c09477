//! What the HTTP/3 tests share: a proxy with an h3 listener, and an
//! HTTP/3 client (`h3` and `h3-quinn`) trusting the test CA.

// Each test crate that includes it uses a part.
#![allow(dead_code, clippy::unwrap_used)]

use std::{future::poll_fn, net::SocketAddr, sync::Arc};

use bytes::{Buf, Bytes};
use http::{Request, Response};
use testkit::TestCerts;

use crate::support::Proxy;

pub(crate) mod raw;

pub(crate) type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// A proxy with one TLS listener serving `[h2, http1, h3]` (its `h3`
/// block `h3`), the test CA's leaf, and `rest` (upstreams, routes).
pub(crate) fn proxy(certs: &TestCerts, h3: &str, rest: &str) -> Proxy {
    proxy_on(1, certs, h3, rest)
}

/// [`proxy`] with `workers` workers.
pub(crate) fn proxy_on(workers: usize, certs: &TestCerts, h3: &str, rest: &str) -> Proxy {
    Proxy::start_yaml(&format!(
        "workers: {workers}\nlisteners:\n  - address: 127.0.0.1:0\n    protocols: [h2, http1, h3]\n    tls: {{ cert: \"{}\", key: \"{}\" }}\n{h3}admin: {{ address: 127.0.0.1:0 }}\n{rest}",
        certs.cert_path.display(),
        certs.key_path.display(),
    ))
}

/// A QUIC client endpoint offering `h3` and trusting `certs`' CA.
pub(crate) fn endpoint(certs: &TestCerts) -> quinn::Endpoint {
    let trust = tls::Trust::CaFile(&certs.ca_path);
    let tls = tls::client_config(trust, None, &[b"h3"]).unwrap();
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    endpoint
}

/// An HTTP/3 connection to `addr`, trusting the test CA.
pub(crate) struct Client {
    pub(crate) send: SendRequest,
    endpoint: quinn::Endpoint,
}

impl Client {
    pub(crate) async fn connect(addr: SocketAddr, certs: &TestCerts) -> Self {
        let endpoint = endpoint(certs);
        let conn = endpoint.connect(addr, "localhost").unwrap().await.unwrap();
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
            .await
            .unwrap();
        tokio::spawn(async move {
            let _ = poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Self { send, endpoint }
    }

    /// Sends a request (with `body`), reads the whole answer.
    pub(crate) async fn exchange(
        &mut self,
        request: Request<()>,
        body: &[u8],
    ) -> (Response<()>, String) {
        let mut stream = self.send.send_request(request).await.unwrap();
        // The proxy may answer before the whole body is sent (a 413) and
        // stop reading it (STOP_SENDING H3_NO_ERROR): the answer counts.
        let mut sent = Ok(());
        if !body.is_empty() {
            sent = stream.send_data(Bytes::copy_from_slice(body)).await;
        }
        if sent.is_ok() {
            sent = stream.finish().await;
        }
        if let Err(err) = sent {
            assert!(err.to_string().contains("256"), "not H3_NO_ERROR: {err}");
        }
        let response = stream.recv_response().await.unwrap();
        let mut bytes = Vec::new();
        while let Some(mut chunk) = stream.recv_data().await.unwrap() {
            bytes.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
        }
        (response, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Moves the connection to a new UDP socket (a new source port), as
    /// a NAT rebinding or a client's migration would (RFC 9000 9).
    pub(crate) fn rebind(&self) {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        self.endpoint.rebind(socket).unwrap();
    }

    pub(crate) async fn get(&mut self, path: &str) -> (Response<()>, String) {
        let uri = format!("https://localhost{path}");
        self.exchange(Request::get(uri).body(()).unwrap(), b"")
            .await
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.endpoint.close(0u32.into(), b"done");
    }
}

/// The venv's Python (`SLUICE_H3_PYTHON`, else ~/.cache/sluice/venv-h3,
/// which .ci/run makes) if it imports every one of `modules`; otherwise
/// `None` after a skip of group `h3py` (testkit::skip: a failure under
/// `SLUICE_STRICT=1` or `SLUICE_REQUIRE_H3PY=1`, which .ci/run sets once
/// it installed them).
pub(crate) fn python(test: &str, modules: &[&str]) -> Option<std::path::PathBuf> {
    use std::{path::PathBuf, process::Command};
    let candidate = std::env::var_os("SLUICE_H3_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            Some(PathBuf::from(home).join(".cache/sluice/venv-h3/bin/python"))
        })
        .unwrap_or_else(|| PathBuf::from("python3"));
    let imports = Command::new(&candidate)
        .args(["-c", &format!("import {}", modules.join(", "))])
        .output()
        .is_ok_and(|out| out.status.success());
    if imports {
        return Some(candidate);
    }
    let wanted = modules.join(" ");
    testkit::skip(
        test,
        testkit::Need::H3py,
        &format!(
            "no Python with {wanted} at {} (python3 -m venv ~/.cache/sluice/venv-h3 && ~/.cache/sluice/venv-h3/bin/pip install {wanted})",
            candidate.display()
        ),
    );
    None
}
