//! The certificate side of ACME (`acme.rs` orders them): the self-signed
//! placeholder a listener serves until its first certificate, the
//! resolver that answers tls-alpn-01 on the listener itself, and writing
//! and reading the certificate files. The listener uses these; it does
//! not need the ordering.

use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, SystemTime},
};

use anyhow::Context as _;
use tls::rustls::{
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
};

use crate::config::AcmeSettings;

/// The ALPN id of tls-alpn-01 (RFC 8737).
pub(crate) const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";
/// The subject of the placeholder served until the first certificate.
const PLACEHOLDER: &str = "sluice ACME placeholder";
/// tls-alpn-01 certificates by domain, while a challenge is under way.
#[derive(Debug, Default)]
pub(crate) struct AlpnChallenges(Mutex<HashMap<String, Arc<CertifiedKey>>>);

impl AlpnChallenges {
    /// Answers `domain`'s challenge with `certified` until [`Self::clear`].
    pub(super) fn insert(&self, domain: String, certified: Arc<CertifiedKey>) {
        let mut challenges = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        challenges.insert(domain, certified);
    }

    /// The order is over: no challenge is answered any more.
    pub(super) fn clear(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// The listener's certificates, and the challenge one for a CA that asks
/// with `acme-tls/1`.
#[derive(Debug)]
pub(crate) struct AcmeResolver {
    pub inner: Arc<dyn ResolvesServerCert>,
    pub challenges: Arc<AlpnChallenges>,
}

impl ResolvesServerCert for AcmeResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let acme = hello
            .alpn()
            .is_some_and(|mut ids| ids.any(|id| id == ACME_TLS_ALPN));
        if acme {
            let name = hello.server_name()?;
            let challenges = self
                .challenges
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            return challenges.get(name).cloned();
        }
        self.inner.resolve(hello)
    }
}

/// Writes a self-signed placeholder to `cert` and `key` when `cert` does
/// not exist yet, so that the listener can start before the first order.
pub(crate) fn placeholder(settings: &AcmeSettings, cert: &Path, key: &Path) -> anyhow::Result<()> {
    if !needs_placeholder(cert, key) {
        return Ok(());
    }
    let (chain, key_pem) = placeholder_pems(settings)?;
    write_pair(cert, key, &chain, &key_pem)
}

/// Whether the listener's files are still to be made (the first start).
pub(crate) fn needs_placeholder(cert: &Path, key: &Path) -> bool {
    !(cert.exists() && key.exists())
}

/// The placeholder's chain and key (PEM), for `settings.domains`; made
/// in memory only by `sluice proxy --check`, which writes no file.
pub(crate) fn placeholder_pems(settings: &AcmeSettings) -> anyhow::Result<(String, String)> {
    let ca = tls::LocalCa::generate(PLACEHOLDER, Duration::from_secs(24 * 3600))?;
    let issued = ca.server(&settings.domains)?;
    Ok((
        format!("{}{}", issued.cert_pem, ca.ca.cert_pem),
        issued.key_pem,
    ))
}

/// Writes both files (each through a temporary file and a rename, so a
/// reader never sees half of one).
pub(super) fn write_pair(
    cert: &Path,
    key: &Path,
    chain: &str,
    key_pem: &str,
) -> anyhow::Result<()> {
    for (path, text) in [(key, key_pem), (cert, chain)] {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
        restrict(&tmp);
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Owner-only permissions for a key file.
pub(super) fn restrict(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
}

/// When the leaf of the PEM chain at `cert` expires, and whether it is the placeholder.
pub(super) fn expiry(cert: &Path) -> Option<(SystemTime, bool)> {
    let pem = std::fs::read(cert).ok()?;
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    let parsed = block.parse_x509().ok()?;
    let not_after = u64::try_from(parsed.validity().not_after.timestamp()).ok()?;
    let placeholder = parsed.issuer().to_string().contains(PLACEHOLDER);
    Some((
        SystemTime::UNIX_EPOCH + Duration::from_secs(not_after),
        placeholder,
    ))
}
