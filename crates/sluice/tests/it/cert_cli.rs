//! `sluice cert`: the files it writes make a real TLS handshake, with the
//! client certificate accepted by a server that requires one (mTLS).

use std::{path::Path, process::Command, sync::Arc};

use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn certs(path: &Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(path)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn key(path: &Path) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_file(path).unwrap()
}

#[tokio::test]
async fn the_certificates_make_an_mtls_handshake() {
    let dir = std::env::temp_dir().join(format!("sluice-cert-{}", std::process::id()));
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args([
                "cert",
                "--out",
                dir.to_str().unwrap(),
                "--hosts",
                "localhost,127.0.0.1",
            ])
            .output()
            .unwrap()
    };
    let first = run();
    assert!(first.status.success(), "{first:?}");
    let ca_before = std::fs::read(dir.join("ca.pem")).unwrap();
    // Run again: the CA is reused, so earlier certificates stay trusted.
    assert!(run().status.success());
    assert_eq!(std::fs::read(dir.join("ca.pem")).unwrap(), ca_before);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        for key in ["ca.key.pem", "server.key.pem", "client.key.pem"] {
            let mode = std::fs::metadata(dir.join(key))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{key} is readable by its owner only");
        }
    }

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in certs(&dir.join("ca.pem")) {
        roots.add(ca).unwrap();
    }
    let roots = Arc::new(roots);
    let client_verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::clone(&roots),
        Arc::clone(&provider),
    )
    .build()
    .unwrap();
    let server = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(
            certs(&dir.join("server.pem")),
            key(&dir.join("server.key.pem")),
        )
        .unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(
            certs(&dir.join("client.pem")),
            key(&dir.join("client.key.pem")),
        )
        .unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let served = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(stream).await.unwrap();
        let mut buf = [0u8; 5];
        tls.read_exact(&mut buf).await.unwrap();
        tls.write_all(b"pong!").await.unwrap();
        tls.shutdown().await.unwrap();
        buf
    });
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), stream)
        .await
        .unwrap();
    tls.write_all(b"ping!").await.unwrap();
    let mut answer = Vec::new();
    tls.read_to_end(&mut answer).await.unwrap();
    assert_eq!(answer, b"pong!");
    assert_eq!(&served.await.unwrap(), b"ping!");

    let bad = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["cert", "--out", dir.to_str().unwrap(), "--days", "0"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
