//! Test certificates: a throwaway CA and a server certificate for
//! `localhost` and 127.0.0.1 signed by it, made with rcgen.

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio_rustls::{
    rustls::{
        self,
        pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
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
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "sluice test CA");
        let ca_cert = ca_params.self_signed(&ca_key).expect("self-signed CA");
        let issuer = Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate().expect("server key");
        let server_params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("server params");
        let server_cert = server_params
            .signed_by(&server_key, &issuer)
            .expect("server certificate");

        static NEXT: AtomicU64 = AtomicU64::new(0);
        let ca_pem = ca_cert.pem();
        let ca_path = std::env::temp_dir().join(format!(
            "sluice-test-ca-{}-{}.pem",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&ca_path, &ca_pem).expect("write the CA file");
        Self {
            ca_pem,
            ca_path,
            server_chain: vec![server_cert.der().clone()],
            server_key: PrivatePkcs8KeyDer::from(server_key.serialize_der()),
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
