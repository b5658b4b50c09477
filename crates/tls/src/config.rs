//! rustls configurations built from PEM files, with errors that name the
//! file: one way for the proxy, the backends and the load generator to
//! set up a TLS server or client.

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
};

use crate::Policy;
use rustls::{
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider},
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName, UnixTime},
    server::WebPkiClientVerifier,
    ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme,
};

/// ALPN protocol ids.
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN protocol ids.
pub const ALPN_HTTP11: &[u8] = b"http/1.1";

/// A TLS setup that failed, naming the file at fault when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    /// The file that could not be used.
    pub path: Option<PathBuf>,
    /// What is wrong with it.
    pub what: String,
}

impl TlsError {
    fn file(path: &Path, what: impl fmt::Display) -> Self {
        Self {
            path: Some(path.to_path_buf()),
            what: what.to_string(),
        }
    }

    pub(crate) fn setup(what: impl fmt::Display) -> Self {
        Self {
            path: None,
            what: what.to_string(),
        }
    }
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{}: {}", path.display(), self.what),
            None => f.write_str(&self.what),
        }
    }
}

impl std::error::Error for TlsError {}

/// The crypto provider every configuration here uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server identity: a certificate chain and its private key, PEM files.
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    /// The certificate chain, leaf first.
    pub cert: &'a Path,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: &'a Path,
}

/// A TLS server configuration (TLS 1.2 and 1.3) offering `alpn` in order
/// of preference; with `client_ca`, clients must present a certificate
/// signed by one of the CAs in that file (mTLS).
pub fn server_config(
    identity: Identity<'_>,
    client_ca: Option<&Path>,
    alpn: &[&[u8]],
) -> Result<ServerConfig, TlsError> {
    server_config_with(identity, client_ca, alpn, &Policy::default())
}

/// [`server_config`] with the versions, cipher suites and key-exchange
/// groups `policy` allows.
pub fn server_config_with(
    identity: Identity<'_>,
    client_ca: Option<&Path>,
    alpn: &[&[u8]],
    policy: &Policy,
) -> Result<ServerConfig, TlsError> {
    let (chain, key) = load_identity(identity)?;
    let provider = policy.provider()?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(policy.min_version.versions())
        .map_err(TlsError::setup)?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let roots = Arc::new(load_roots(path)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|err| TlsError::file(path, err))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|err| TlsError::file(identity.key, err))?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// Whom a TLS client trusts.
#[derive(Debug, Clone, Copy)]
pub enum Trust<'a> {
    /// The Mozilla roots built into the binary (webpki-roots).
    WebRoots,
    /// The CA certificates in a PEM file.
    CaFile(&'a Path),
    /// Any certificate (signatures are still checked): for tests and
    /// benchmarks against self-signed servers, never for production.
    AnyCertificate,
}

/// A TLS client configuration offering `alpn`, presenting `identity`
/// when the server asks for a client certificate.
pub fn client_config(
    trust: Trust<'_>,
    identity: Option<Identity<'_>>,
    alpn: &[&[u8]],
) -> Result<ClientConfig, TlsError> {
    client_config_with(trust, identity, alpn, &Policy::default())
}

/// [`client_config`] with the versions, cipher suites and key-exchange
/// groups `policy` allows.
pub fn client_config_with(
    trust: Trust<'_>,
    identity: Option<Identity<'_>>,
    alpn: &[&[u8]],
    policy: &Policy,
) -> Result<ClientConfig, TlsError> {
    let provider = policy.provider()?;
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(policy.min_version.versions())
        .map_err(TlsError::setup)?;
    let builder = match trust {
        Trust::WebRoots => builder.with_root_certificates(RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        }),
        Trust::CaFile(path) => builder.with_root_certificates(load_roots(path)?),
        Trust::AnyCertificate => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider))),
    };
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some(identity) => {
            let (chain, key) = load_identity(identity)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|err| TlsError::file(identity.key, err))?
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

fn load_identity(
    identity: Identity<'_>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let chain = load_certs(identity.cert)?;
    let key = PrivateKeyDer::from_pem_file(identity.key).map_err(|err| {
        TlsError::file(
            identity.key,
            format!("no usable private key in the file ({err})"),
        )
    })?;
    Ok((chain, key))
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|err| TlsError::file(path, err))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| TlsError::file(path, err))?;
    if certs.is_empty() {
        return Err(TlsError::file(path, "no certificate in the file"));
    }
    Ok(certs)
}

fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    for cert in load_certs(path)? {
        store.add(cert).map_err(|err| TlsError::file(path, err))?;
    }
    Ok(store)
}

/// Accepts any server certificate, but still checks the handshake
/// signatures so that the handshake itself is real.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::LocalCa;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn configs_build_from_issued_files_and_errors_name_the_file() {
        let dir = std::env::temp_dir().join(format!("sluice-tls-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = LocalCa::generate("test CA", Duration::from_secs(3600)).unwrap();
        let server = ca.server(&["localhost".into()]).unwrap();
        let client = ca.client("c1").unwrap();
        let ca_file = write(&dir, "ca.pem", &ca.ca.cert_pem);
        let cert = write(&dir, "server.pem", &server.cert_pem);
        let key = write(&dir, "server.key", &server.key_pem);
        let client_cert = write(&dir, "client.pem", &client.cert_pem);
        let client_key = write(&dir, "client.key", &client.key_pem);
        let identity = Identity {
            cert: &cert,
            key: &key,
        };
        let config = server_config(identity, Some(&ca_file), &[ALPN_H2, ALPN_HTTP11]).unwrap();
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        let client_identity = Identity {
            cert: &client_cert,
            key: &client_key,
        };
        assert!(client_config(Trust::CaFile(&ca_file), Some(client_identity), &[ALPN_H2]).is_ok());
        assert!(client_config(Trust::WebRoots, None, &[]).is_ok());

        // A key file holding a certificate: the error names it.
        let wrong = Identity {
            cert: &cert,
            key: &cert,
        };
        let err = server_config(wrong, None, &[]).unwrap_err();
        assert_eq!(err.path.as_deref(), Some(cert.as_path()));
        assert!(err.to_string().contains("private key"), "{err}");
        let missing = dir.join("missing.pem");
        let err = client_config(Trust::CaFile(&missing), None, &[]).unwrap_err();
        assert!(
            err.to_string().starts_with(&missing.display().to_string()),
            "{err}"
        );
        let empty = write(&dir, "empty.pem", "");
        let err = client_config(Trust::CaFile(&empty), None, &[]).unwrap_err();
        assert!(err.to_string().contains("no certificate"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
