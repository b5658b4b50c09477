//! TLS pieces shared by sluice's commands and tests.
//!
//! [`LocalCa`] is a throwaway certificate authority (rcgen) that issues
//! server and client certificates, for `sluice cert`, the test harness and
//! benchmarks: everything a TLS listener, an mTLS client or a `--cacert`
//! needs on a machine without a real PKI. [`server_config`] and
//! [`client_config`] turn PEM files into rustls configurations.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

pub use rcgen::Error;
pub use rustls;
pub use tokio_rustls;

mod config;
mod policy;
pub use config::{
    client_config, client_config_with, provider, server_config, server_config_with, Identity,
    TlsError, Trust, ALPN_H2, ALPN_HTTP11,
};
pub use policy::{cipher_suite, kx_group, MinVersion, Policy};

/// A certificate and its private key, PEM-encoded.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate (a single PEM block).
    pub cert_pem: String,
    /// Its PKCS#8 private key.
    pub key_pem: String,
}

/// A certificate authority that signs certificates for local use.
#[derive(Debug)]
pub struct LocalCa {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate and key.
    pub ca: Issued,
    validity: Duration,
}

impl LocalCa {
    /// A new CA named `name`, whose certificates (and itself) are valid for `validity` from now.
    pub fn generate(name: &str, validity: Duration) -> Result<Self, Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        set_validity(&mut params, validity);
        let cert = params.self_signed(&key)?;
        let ca = Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        Ok(Self {
            issuer: Issuer::new(params, key),
            ca,
            validity,
        })
    }

    /// An existing CA from its certificate and key (PEM).
    pub fn from_pem(cert_pem: &str, key_pem: &str, validity: Duration) -> Result<Self, Error> {
        let key = KeyPair::from_pem(key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)?;
        Ok(Self {
            issuer,
            ca: Issued {
                cert_pem: cert_pem.to_string(),
                key_pem: key_pem.to_string(),
            },
            validity,
        })
    }

    /// A server certificate for `hosts` (DNS names or IP addresses).
    pub fn server(&self, hosts: &[String]) -> Result<Issued, Error> {
        let mut params = CertificateParams::new(hosts.to_vec())?;
        params.distinguished_name.push(
            DnType::CommonName,
            hosts.first().map_or("localhost", String::as_str),
        );
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate (for mTLS) whose common name is `name`.
    pub fn client(&self, name: &str) -> Result<Issued, Error> {
        self.sign(client_params(name)?)
    }

    /// A client certificate like [`LocalCa::client`]'s whose validity
    /// ended an hour ago (it began a day before): what a server that
    /// checks client certificates must refuse (tests of mTLS).
    pub fn expired_client(&self, name: &str) -> Result<Issued, Error> {
        let mut params = client_params(name)?;
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now - time::Duration::hours(1);
        self.sign_leaf(params)
    }

    /// Signs a leaf valid for the CA's validity from now.
    fn sign(&self, mut params: CertificateParams) -> Result<Issued, Error> {
        set_validity(&mut params, self.validity);
        self.sign_leaf(params)
    }

    /// Signs a leaf with the validity `params` has: not a CA (basic
    /// constraints say so), with a Subject Key Identifier and an Authority
    /// Key Identifier (the CA's SKI), which RFC 5280 asks for and strict
    /// verifiers (pyca/cryptography) require.
    fn sign_leaf(&self, mut params: CertificateParams) -> Result<Issued, Error> {
        params.is_ca = IsCa::ExplicitNoCa;
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A client certificate's fields: its common name, for client authentication.
fn client_params(name: &str) -> Result<CertificateParams, Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    Ok(params)
}

/// Valid from an hour ago (clock skew) for `validity`.
fn set_validity(params: &mut CertificateParams, validity: Duration) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::try_from(validity).unwrap_or(time::Duration::days(30));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_issues_server_and_client_certificates() {
        let ca = LocalCa::generate("test CA", Duration::from_secs(86_400)).unwrap();
        assert!(ca.ca.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(ca.ca.key_pem.contains("PRIVATE KEY"));
        let server = ca
            .server(&["localhost".into(), "127.0.0.1".into(), "::1".into()])
            .unwrap();
        assert!(server.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let client = ca.client("client-1").unwrap();
        assert_ne!(client.key_pem, server.key_pem);
        // A CA read back from its PEM files signs too.
        let again =
            LocalCa::from_pem(&ca.ca.cert_pem, &ca.ca.key_pem, Duration::from_secs(60)).unwrap();
        assert!(again.server(&["example.test".into()]).is_ok());
        assert!(LocalCa::from_pem("not a cert", &ca.ca.key_pem, Duration::from_secs(60)).is_err());
    }

    /// The Subject and Authority Key Identifiers of a PEM certificate,
    /// and whether it is a CA.
    fn key_ids(pem: &str) -> (Option<Vec<u8>>, Option<Vec<u8>>, bool) {
        use x509_parser::{extensions::ParsedExtension, pem::parse_x509_pem};
        let (_, pem) = parse_x509_pem(pem.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let (mut ski, mut aki) = (None, None);
        for ext in cert.extensions() {
            match ext.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(id) => ski = Some(id.0.to_vec()),
                ParsedExtension::AuthorityKeyIdentifier(id) => {
                    aki = id.key_identifier.as_ref().map(|id| id.0.to_vec());
                }
                _ => {}
            }
        }
        (ski, aki, cert.is_ca())
    }

    #[test]
    fn issued_certificates_carry_subject_and_authority_key_identifiers() {
        let ca = LocalCa::generate("test CA", Duration::from_secs(86_400)).unwrap();
        let (ca_ski, _, is_ca) = key_ids(&ca.ca.cert_pem);
        let ca_ski = ca_ski.expect("the CA has a Subject Key Identifier");
        assert!(is_ca);
        let server = ca.server(&["localhost".into()]).unwrap();
        let client = ca.client("c1").unwrap();
        for leaf in [&server, &client] {
            let (ski, aki, is_ca) = key_ids(&leaf.cert_pem);
            let ski = ski.expect("a leaf has a Subject Key Identifier");
            assert_ne!(ski, ca_ski);
            assert_eq!(aki.as_ref(), Some(&ca_ski), "AKI is the CA's SKI");
            assert!(!is_ca);
        }
        // A CA read back from its files signs with the same identifier.
        let again =
            LocalCa::from_pem(&ca.ca.cert_pem, &ca.ca.key_pem, Duration::from_secs(60)).unwrap();
        let (_, aki, _) = key_ids(&again.server(&["example.test".into()]).unwrap().cert_pem);
        assert_eq!(aki, Some(ca_ski));
    }
}
