//! Test certificates: a throwaway CA and a server certificate for
//! `localhost` and 127.0.0.1 signed by it (`tls::LocalCa`).

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use tokio_rustls::{
    rustls::{
        self,
        pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
    },
    TlsAcceptor,
};

/// A CA and a server certificate it signed; the CA's PEM is written to a
/// temporary file for clients that take a path (`--cacert`).
#[derive(Debug)]
pub struct TestCerts {
    pub ca_pem: String,
    pub ca_path: PathBuf,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: PrivatePkcs8KeyDer<'static>,
}

impl TestCerts {
    pub fn generate() -> Self {
        let ca = tls::LocalCa::generate("sluice test CA", std::time::Duration::from_secs(86_400))
            .expect("a test CA");
        let server = ca
            .server(&["localhost".into(), "127.0.0.1".into()])
            .expect("a server certificate");

        static NEXT: AtomicU64 = AtomicU64::new(0);
        let ca_path = std::env::temp_dir().join(format!(
            "sluice-test-ca-{}-{}.pem",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&ca_path, &ca.ca.cert_pem).expect("write the CA file");
        Self {
            ca_pem: ca.ca.cert_pem.clone(),
            ca_path,
            server_chain: vec![
                CertificateDer::from_pem_slice(server.cert_pem.as_bytes()).expect("server PEM")
            ],
            server_key: PrivatePkcs8KeyDer::from_pem_slice(server.key_pem.as_bytes())
                .expect("server key PEM"),
        }
    }

    /// A TLS acceptor offering the server certificate, ALPN `http/1.1`.
    pub fn acceptor(&self) -> TlsAcceptor {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(
                self.server_chain.clone(),
                PrivateKeyDer::Pkcs8(self.server_key.clone_key()),
            )
            .expect("server certificate and key");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        TlsAcceptor::from(Arc::new(config))
    }
}

impl Drop for TestCerts {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.ca_path);
    }
}
