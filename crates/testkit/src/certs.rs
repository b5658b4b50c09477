//! Test certificates: a throwaway CA and a server certificate for
//! `localhost` and 127.0.0.1 signed by it (`tls::LocalCa`), written to
//! temporary PEM files for what takes paths (`--cacert`, a proxy's
//! `tls: { cert, key }`), with TLS configurations built from them.

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use tls::{Identity, Trust};
use tokio_rustls::{rustls::ServerConfig, TlsAcceptor, TlsConnector};

/// A CA and a server certificate it signed, as PEM files removed on drop.
#[derive(Debug)]
pub struct TestCerts {
    pub ca_pem: String,
    /// The CA certificate.
    pub ca_path: PathBuf,
    /// The server certificate (for `localhost` and 127.0.0.1).
    pub cert_path: PathBuf,
    /// The server certificate's private key.
    pub key_path: PathBuf,
}

impl TestCerts {
    pub fn generate() -> Self {
        let ca = tls::LocalCa::generate("sluice test CA", std::time::Duration::from_secs(86_400))
            .expect("a test CA");
        let server = ca
            .server(&["localhost".into(), "127.0.0.1".into()])
            .expect("a server certificate");

        static NEXT: AtomicU64 = AtomicU64::new(0);
        let stem = format!(
            "sluice-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let write = |suffix: &str, pem: &str| {
            let path = std::env::temp_dir().join(format!("{stem}-{suffix}.pem"));
            std::fs::write(&path, pem).expect("write a test PEM file");
            path
        };
        Self {
            ca_pem: ca.ca.cert_pem.clone(),
            ca_path: write("ca", &ca.ca.cert_pem),
            cert_path: write("server", &server.cert_pem),
            key_path: write("server-key", &server.key_pem),
        }
    }

    /// A server configuration offering the server certificate and `alpn`.
    pub fn server_config(&self, alpn: &[&[u8]]) -> ServerConfig {
        let identity = Identity {
            cert: &self.cert_path,
            key: &self.key_path,
        };
        tls::server_config(identity, None, alpn).expect("a test server configuration")
    }

    /// A TLS acceptor offering the server certificate, ALPN `http/1.1`.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(Arc::new(self.server_config(&[tls::ALPN_HTTP11])))
    }

    /// A TLS connector that trusts the CA and offers `alpn`.
    pub fn connector(&self, alpn: &[&[u8]]) -> TlsConnector {
        let config = tls::client_config(Trust::CaFile(&self.ca_path), None, alpn)
            .expect("a test client configuration");
        TlsConnector::from(Arc::new(config))
    }
}

impl Drop for TestCerts {
    fn drop(&mut self) {
        for path in [&self.ca_path, &self.cert_path, &self.key_path] {
            let _ = std::fs::remove_file(path);
        }
    }
}
