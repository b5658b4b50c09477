//! A TLS listener's settings: its certificate, client verification, and
//! what it allows (the oldest TLS version, cipher suites, key-exchange
//! groups), each name read when the file is.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_saphyr::{Location, Spanned};
use tls::{
    rustls::{CipherSuite, NamedGroup},
    MinVersion, Policy,
};

use super::{
    error::Problem,
    typed::{Parsed, Setting},
    units::{duration, human},
};

/// A TLS listener's certificate, client verification and protocol policy.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListenerTlsSettings {
    /// PEM certificate chain, leaf first; re-read on SIGHUP.
    #[schemars(with = "String")]
    pub cert: Spanned<String>,
    /// PEM private key; re-read on SIGHUP.
    #[schemars(with = "String")]
    pub key: Spanned<String>,
    /// PEM CA certificates: when set, clients must present a certificate
    /// they signed (mTLS).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub client_ca: Option<Spanned<String>>,
    /// A client must finish the handshake within this.
    #[serde(
        default = "default_handshake_timeout",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub handshake_timeout: Duration,
    /// The oldest TLS version accepted: `"1.2"` or `"1.3"`.
    #[serde(default = "default_min_version")]
    pub min_version: Parsed<MinVersion>,
    /// The cipher suites allowed (IANA or rustls names); absent: all that
    /// rustls offers.
    #[serde(default)]
    pub cipher_suites: Option<Vec<Parsed<CipherSuite>>>,
    /// The key-exchange groups allowed (`X25519`, `secp256r1`,
    /// `secp384r1`); absent: all three.
    #[serde(default)]
    pub kx_groups: Option<Vec<Parsed<NamedGroup>>>,
    /// Certificates from an ACME CA (Let's Encrypt), written to `cert` and
    /// `key` and renewed before they expire.
    #[serde(default)]
    pub acme: Option<AcmeSettings>,
}

/// `tls.acme`: how a listener's certificate is obtained and renewed.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AcmeSettings {
    /// The CA's directory URL.
    pub directory: Parsed<http::Uri>,
    /// The account's contact (`mailto:` is added).
    #[serde(default)]
    pub email: Option<String>,
    /// The names the certificate is for.
    pub domains: Vec<String>,
    /// `http-01` (answered on `http_address`) or `tls-alpn-01` (on this listener).
    #[serde(default)]
    pub challenge: AcmeChallenge,
    /// Where http-01 challenges are answered (port 80 as the CA sees it).
    #[serde(default = "default_http01")]
    pub http_address: String,
    /// The account and the lock that keeps replicas from ordering at once;
    /// default: the directory of `cert`. Replicas share it (a volume).
    #[serde(default)]
    pub storage: Option<String>,
    /// PEM roots that the directory's certificate is checked against
    /// (a private or test CA); default: the system's.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// Renew when the certificate has less than this left.
    #[serde(
        default = "default_renew_before",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub renew_before: Duration,
    /// How often the certificate's expiry (and the file on disk) is checked.
    #[serde(
        default = "default_check_every",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub check_every: Duration,
    /// An ACME profile the CA offers (`shortlived`, ...).
    #[serde(default)]
    pub profile: Option<String>,
}

/// The ACME challenge a listener answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum AcmeChallenge {
    #[default]
    #[serde(rename = "http-01")]
    Http01,
    #[serde(rename = "tls-alpn-01")]
    TlsAlpn01,
}

fn default_http01() -> String {
    "0.0.0.0:80".into()
}

fn default_renew_before() -> Duration {
    Duration::from_secs(30 * 24 * 3600)
}

fn default_check_every() -> Duration {
    Duration::from_secs(12 * 3600)
}

fn default_handshake_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_min_version() -> Parsed<MinVersion> {
    Parsed(MinVersion::Tls12)
}

impl ListenerTlsSettings {
    /// What the listener's TLS configuration allows.
    pub fn policy(&self) -> Policy {
        Policy {
            min_version: self.min_version.0,
            cipher_suites: self.cipher_suites.as_deref().map(listed),
            kx_groups: self.kx_groups.as_deref().map(listed),
        }
    }

    /// The lists are not empty and leave a cipher suite for the versions
    /// allowed; `key` is the listener's `tls` key.
    pub(super) fn check(&self, key: &str) -> Result<(), Problem> {
        for (empty, name) in [
            (
                self.cipher_suites.as_ref().map(Vec::is_empty),
                "cipher_suites",
            ),
            (self.kx_groups.as_ref().map(Vec::is_empty), "kx_groups"),
        ] {
            if empty == Some(true) {
                return Err((
                    Location::UNKNOWN,
                    format!("{key}.{name}"),
                    "list at least one, or leave the key out for all".into(),
                ));
            }
        }
        self.policy().provider().map(drop).map_err(|err| {
            (
                Location::UNKNOWN,
                format!("{key}.cipher_suites"),
                err.to_string(),
            )
        })
    }
}

/// The values of a list.
fn listed<T: Copy>(list: &[Parsed<T>]) -> Vec<T> {
    list.iter().map(|parsed| parsed.0).collect()
}

impl Setting for MinVersion {
    fn parse(text: &str) -> anyhow::Result<Self> {
        MinVersion::parse(text).map_err(anyhow::Error::msg)
    }

    fn text(&self) -> String {
        self.as_str().into()
    }
}

impl Setting for CipherSuite {
    fn parse(text: &str) -> anyhow::Result<Self> {
        tls::cipher_suite(text).map_err(anyhow::Error::msg)
    }

    fn text(&self) -> String {
        self.as_str().unwrap_or_default().into()
    }
}

impl Setting for NamedGroup {
    fn parse(text: &str) -> anyhow::Result<Self> {
        tls::kx_group(text).map_err(anyhow::Error::msg)
    }

    fn text(&self) -> String {
        self.as_str().unwrap_or_default().into()
    }
}
