//! Mutual TLS (issue 51): a listener with `tls.client_ca` admits a
//! client only with a certificate that CA signed and that is valid now,
//! over TCP (HTTP/1.1 and HTTP/2, by ALPN) and QUIC (HTTP/3), and refuses
//! one without a certificate, one another CA signed and an expired one,
//! each with the TLS alert that says why; an upstream that wants a client
//! certificate gets the one `upstreams.*.tls` names, and without it (or
//! with a wrong one) the client gets 502.

use crate::support;

use std::{
    future::poll_fn,
    net::SocketAddr,
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use bytes::Buf;
use http::Request;
use support::{Echo, Proxy};
use testkit::H2Server;
use tls::{
    rustls::{pki_types::ServerName, ClientConfig, ServerConfig},
    tokio_rustls::{TlsAcceptor, TlsConnector},
    LocalCa,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// A test's certificates, PEM files (`NAME.pem`, `NAME.key`) in a
/// directory removed on drop: the servers' CA (`ca`) and certificate
/// (`server`); the CA trusted for clients (`client-ca`), with a client
/// certificate it signed (`good`) and an expired one (`expired`); and a
/// client certificate another CA signed (`other`).
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("sluice-mtls-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |stem: &str, issued: &tls::Issued| {
            std::fs::write(dir.join(format!("{stem}.pem")), &issued.cert_pem).unwrap();
            std::fs::write(dir.join(format!("{stem}.key")), &issued.key_pem).unwrap();
        };
        let day = Duration::from_secs(86_400);
        let servers = LocalCa::generate("sluice mTLS server CA", day).unwrap();
        write("ca", &servers.ca);
        let hosts: [String; 2] = ["localhost".into(), "127.0.0.1".into()];
        write("server", &servers.server(&hosts).unwrap());
        let clients = LocalCa::generate("sluice mTLS client CA", day).unwrap();
        write("client-ca", &clients.ca);
        write("good", &clients.client("good client").unwrap());
        write(
            "expired",
            &clients.expired_client("expired client").unwrap(),
        );
        let stranger = LocalCa::generate("another CA", day).unwrap();
        write("other", &stranger.client("stranger").unwrap());
        Self { dir }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// A path as it goes into YAML.
    fn text(&self, file: &str) -> String {
        self.path(file).display().to_string()
    }

    /// A client configuration trusting the servers' CA, offering `alpn`
    /// and presenting `who`'s certificate.
    fn client(&self, who: Who, alpn: &[&[u8]]) -> ClientConfig {
        let files = who.stem().map(|stem| {
            (
                self.path(&format!("{stem}.pem")),
                self.path(&format!("{stem}.key")),
            )
        });
        let identity = files.as_ref().map(|(cert, key)| tls::Identity {
            cert: cert.as_path(),
            key: key.as_path(),
        });
        tls::client_config(tls::Trust::CaFile(&self.path("ca.pem")), identity, alpn).unwrap()
    }

    /// [`Pki::client`] offering TLS 1.2 only. There a server checks the
    /// client's certificate before its Finished, so a refusal ends the
    /// handshake itself with its alert. In TLS 1.3 the client's handshake
    /// is over first, and a request it writes meanwhile can meet a
    /// closed socket: a reset that may discard the alert.
    fn tls12_client(&self, who: Who, alpn: &[&[u8]]) -> ClientConfig {
        use tls::rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
        let mut roots = tls::rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(self.path("ca.pem")).unwrap())
            .unwrap();
        let builder = ClientConfig::builder_with_provider(tls::provider())
            .with_protocol_versions(&[&tls::rustls::version::TLS12])
            .unwrap()
            .with_root_certificates(roots);
        let mut config = match who.stem() {
            None => builder.with_no_client_auth(),
            Some(stem) => {
                let cert = CertificateDer::from_pem_file(self.path(&format!("{stem}.pem")));
                let key = PrivateKeyDer::from_pem_file(self.path(&format!("{stem}.key")));
                builder
                    .with_client_auth_cert(vec![cert.unwrap()], key.unwrap())
                    .unwrap()
            }
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config
    }

    /// A server configuration (the server certificate, `alpn`) that wants
    /// a client certificate `client-ca` signed.
    fn server(&self, alpn: &[&[u8]]) -> ServerConfig {
        let (cert, key) = (self.path("server.pem"), self.path("server.key"));
        let identity = tls::Identity {
            cert: &cert,
            key: &key,
        };
        tls::server_config(identity, Some(&self.path("client-ca.pem")), alpn).unwrap()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Who a client is, by the certificate it presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Nobody,
    Stranger,
    Expired,
    Good,
}

impl Who {
    const ALL: [Who; 4] = [Who::Nobody, Who::Stranger, Who::Expired, Who::Good];

    /// The stem of its certificate's files.
    fn stem(self) -> Option<&'static str> {
        match self {
            Who::Nobody => None,
            Who::Stranger => Some("other"),
            Who::Expired => Some("expired"),
            Who::Good => Some("good"),
        }
    }

    /// The TLS alert (RFC 8446 6.2) a server that checks client
    /// certificates refuses it with, by rustls's name and by number
    /// (QUIC's CONNECTION_CLOSE carries 0x100 + the number); `None`: admitted.
    fn refusal(self) -> Option<(&'static str, u8)> {
        match self {
            Who::Nobody => Some(("CertificateRequired", 116)),
            Who::Stranger => Some(("UnknownCA", 48)),
            Who::Expired => Some(("CertificateExpired", 45)),
            Who::Good => None,
        }
    }
}

/// What an exchange ended with: the status and body, or the error text.
type Answer = Result<(u16, String), String>;

/// `exchange`'s answer, or an error if it takes more than 10 s.
async fn within(exchange: impl std::future::Future<Output = Answer>) -> Answer {
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .unwrap_or_else(|_| Err("no answer within 10 s".into()))
}

async fn tls_stream(
    addr: SocketAddr,
    config: ClientConfig,
) -> Result<tls::tokio_rustls::client::TlsStream<TcpStream>, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").unwrap();
    let connector = TlsConnector::from(Arc::new(config));
    connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())
}

/// `GET /mtls` over TLS 1.2 with ALPN `http/1.1`, as `who`.
async fn over_http1(addr: SocketAddr, pki: &Pki, who: Who) -> Answer {
    let mut stream = tls_stream(addr, pki.tls12_client(who, &[tls::ALPN_HTTP11])).await?;
    let request = b"GET /mtls HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n";
    stream.write_all(request).await.map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .await
        .map_err(|e| e.to_string())?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, answer))
}

/// `GET /mtls` over TLS 1.3 with ALPN `h2`, as `who`; an error says the
/// connection's end too (where the alert usually is).
async fn over_h2(addr: SocketAddr, pki: &Pki, who: Who) -> Answer {
    let stream = tls_stream(addr, pki.client(who, &[tls::ALPN_H2])).await?;
    let (sender, connection) = h2::client::handshake(stream)
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(connection);
    let exchange = async {
        let mut sender = sender.ready().await?;
        let request = Request::get("https://localhost/mtls").body(()).unwrap();
        let (response, _) = sender.send_request(request, true)?;
        let (parts, mut body) = response.await?.into_parts();
        let mut bytes = Vec::new();
        while let Some(data) = body.data().await {
            bytes.extend_from_slice(&data?);
        }
        Ok::<_, h2::Error>((
            parts.status.as_u16(),
            String::from_utf8_lossy(&bytes).into_owned(),
        ))
    };
    match exchange.await {
        Ok(answer) => Ok(answer),
        Err(err) => {
            let ended = tokio::time::timeout(Duration::from_secs(5), driver).await;
            Err(format!("{err}; the connection ended: {ended:?}"))
        }
    }
}

/// `GET /mtls` over QUIC (HTTP/3), as `who`; an error says why the
/// connection closed too (where the alert is).
async fn over_h3(addr: SocketAddr, pki: &Pki, who: Who) -> Answer {
    let quic =
        quinn::crypto::rustls::QuicClientConfig::try_from(pki.client(who, &[b"h3"])).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    let conn = endpoint
        .connect(addr, "localhost")
        .unwrap()
        .await
        .map_err(|e| e.to_string())?;
    let closed = |err: &dyn std::fmt::Display| {
        let reason = conn.close_reason().map(|r| r.to_string());
        format!("{err}; closed: {reason:?}")
    };
    let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .map_err(|e| closed(&e))?;
    tokio::spawn(async move {
        let _ = poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let request = Request::get("https://localhost/mtls").body(()).unwrap();
    let mut stream = send.send_request(request).await.map_err(|e| closed(&e))?;
    stream.finish().await.map_err(|e| closed(&e))?;
    let response = stream.recv_response().await.map_err(|e| closed(&e))?;
    let mut bytes = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| closed(&e))? {
        bytes.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
    }
    endpoint.close(0u32.into(), b"done");
    Ok((
        response.status().as_u16(),
        String::from_utf8_lossy(&bytes).into_owned(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_ca_admits_only_the_clients_it_signed_over_tcp_and_quic() {
    let pki = Pki::new("listener");
    let echo = Echo::start("mtls").await;
    let proxy = Proxy::start_yaml(&format!(
        "workers: 1\nlisteners:\n  - address: 127.0.0.1:0\n    protocols: [h2, http1, h3]\n    tls: {{ cert: \"{}\", key: \"{}\", client_ca: \"{}\" }}\nadmin: {{ address: 127.0.0.1:0 }}\n{}",
        pki.text("server.pem"),
        pki.text("server.key"),
        pki.text("client-ca.pem"),
        support::one_upstream(echo.addr, "")
    ));
    let addr = proxy.addr();
    for who in Who::ALL {
        let answers = [
            ("HTTP/1.1", within(over_http1(addr, &pki, who)).await),
            ("HTTP/2", within(over_h2(addr, &pki, who)).await),
            ("HTTP/3", within(over_h3(addr, &pki, who)).await),
        ];
        for (protocol, answer) in answers {
            match who.refusal() {
                None => {
                    let (status, body) =
                        answer.unwrap_or_else(|err| panic!("{who:?} over {protocol}: {err}"));
                    assert_eq!(status, 200, "{who:?} over {protocol}: {body}");
                    assert!(body.contains("upstream: mtls"), "{protocol}: {body}");
                }
                Some((alert, number)) => {
                    let err = answer.expect_err(&format!("{who:?} got in over {protocol}"));
                    // rustls names the alert over TCP; quinn gives its number.
                    let why = match protocol {
                        "HTTP/3" => format!("the cryptographic handshake failed: error {number}"),
                        _ => format!("received fatal alert: {alert}"),
                    };
                    // Over TLS 1.3 (HTTP/2 here) the alert may be lost to
                    // the reset that the preface written meanwhile met.
                    let reset = ["ConnectionReset", "broken pipe", "reset by peer"]
                        .iter()
                        .any(|said| err.contains(said));
                    let lost = protocol == "HTTP/2" && reset;
                    assert!(err.contains(&why) || lost, "{who:?} over {protocol}: {err}");
                }
            }
        }
    }
    // Only the good client's three requests reached the upstream.
    assert_eq!(echo.requests.load(Ordering::SeqCst), 3);
}

/// An HTTP/1.1 upstream over TLS that wants a client certificate
/// `client-ca` signed; answers each request (a head, no body) `200
/// mtls-http1`, and counts the handshakes it completed.
async fn http1_upstream(pki: &Pki) -> (SocketAddr, Arc<AtomicU64>) {
    let acceptor = TlsAcceptor::from(Arc::new(pki.server(&[tls::ALPN_HTTP11])));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let admitted = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&admitted);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, count) = (acceptor.clone(), Arc::clone(&count));
            tokio::spawn(async move {
                let Ok(mut stream) = acceptor.accept(tcp).await else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    match stream.read(&mut buf).await {
                        Ok(n) if n > 0 => seen.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nmtls-http1";
                        if stream.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, admitted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_wants_a_client_certificate_gets_the_configured_one() {
    let pki = Pki::new("upstream");
    let (http1, admitted) = http1_upstream(&pki).await;
    let h2 = H2Server::start_tls(pki.server(&[tls::ALPN_H2]));
    let mut upstreams = String::from("upstreams:\n");
    let mut routes = String::from("routes:\n");
    for (protocol, port) in [("http1", http1.port()), ("h2", h2.addr().port())] {
        for who in Who::ALL {
            let name = format!("{protocol}_{who:?}").to_lowercase();
            let identity = who.stem().map_or(String::new(), |stem| {
                format!(
                    ", cert: \"{}\", key: \"{}\"",
                    pki.text(&format!("{stem}.pem")),
                    pki.text(&format!("{stem}.key"))
                )
            });
            upstreams.push_str(&format!(
                "  {name}:\n    hosts: [\"https://localhost:{port}\"]\n    protocol: {protocol}\n    retries: 0\n    tls: {{ ca: \"{}\"{identity} }}\n",
                pki.text("ca.pem")
            ));
            routes.push_str(&format!("  - {{ path: /{name}, upstream: {name} }}\n"));
        }
    }
    let proxy = Proxy::start(&format!("{upstreams}{routes}"));
    for protocol in ["http1", "h2"] {
        for who in Who::ALL {
            let path = format!("/{protocol}_{who:?}").to_lowercase();
            let answer = proxy.conn().await.get(&path).await;
            if who == Who::Good {
                assert_eq!(answer.status, 200, "{path}: {}", answer.text());
                let expected = if protocol == "h2" { "ok" } else { "mtls-http1" };
                assert_eq!(answer.text(), expected, "{path}");
            } else {
                // The upstream refused the handshake: a 502 problem.
                assert_eq!(answer.status, 502, "{path}: {}", answer.text());
                assert_eq!(answer.json()["status"], 502, "{path}");
            }
        }
    }
    // Each upstream completed a handshake with the good client only.
    assert_eq!(admitted.load(Ordering::SeqCst), 1);
    assert_eq!(h2.requests(), 1);
}
