//! The TLS client: built-in web roots, a CA file, or (for tests and
//! self-signed benchmarks) no verification at all.

use std::{path::Path, sync::Arc};

use rustls::{
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider},
    pki_types::{pem::PemObject, CertificateDer, ServerName, UnixTime},
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_rustls::TlsConnector;

use crate::config::ConfigError;

/// A connector offering ALPN `http/1.1`.
pub(crate) fn connector(
    insecure: bool,
    cacert: Option<&Path>,
) -> Result<TlsConnector, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|err| ConfigError(format!("TLS setup failed: {err}")))?;
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(roots(cacert)?)
            .with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

fn roots(cacert: Option<&Path>) -> Result<RootCertStore, ConfigError> {
    let Some(path) = cacert else {
        return Ok(RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        });
    };
    let fail = |why: String| ConfigError(format!("--cacert {}: {why}", path.display()));
    let mut store = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path).map_err(|err| fail(err.to_string()))?;
    for cert in certs {
        let cert = cert.map_err(|err| fail(err.to_string()))?;
        store.add(cert).map_err(|err| fail(err.to_string()))?;
    }
    if store.is_empty() {
        return Err(fail("no certificate in the file".into()));
    }
    Ok(store)
}

/// `--insecure`: any certificate is accepted, signatures are still checked
/// so that the handshake itself is real.
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
