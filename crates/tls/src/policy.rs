//! What a TLS configuration allows: the oldest protocol version, and
//! allow-lists of cipher suites and key-exchange groups, as a
//! [`CryptoProvider`] made from ring's with only the listed ones.

use std::{fmt, sync::Arc};

use rustls::{
    crypto::{ring, CryptoProvider},
    version::{TLS12, TLS13},
    CipherSuite, NamedGroup, ServerConfig, SupportedCipherSuite, SupportedProtocolVersion,
};

use crate::TlsError;

/// The oldest TLS version a configuration accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum MinVersion {
    /// TLS 1.2 and 1.3.
    #[default]
    Tls12,
    /// TLS 1.3 only.
    Tls13,
}

impl MinVersion {
    /// `1.2` or `1.3`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "1.2" => Ok(Self::Tls12),
            "1.3" => Ok(Self::Tls13),
            other => Err(format!(
                "`{other}` is not a TLS version sluice offers; use \"1.2\" or \"1.3\""
            )),
        }
    }

    /// `1.2` or `1.3`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tls12 => "1.2",
            Self::Tls13 => "1.3",
        }
    }

    /// The protocol versions from this one up.
    pub fn versions(self) -> &'static [&'static SupportedProtocolVersion] {
        static FROM_TLS12: &[&SupportedProtocolVersion] = &[&TLS13, &TLS12];
        static TLS13_ONLY: &[&SupportedProtocolVersion] = &[&TLS13];
        match self {
            Self::Tls12 => FROM_TLS12,
            Self::Tls13 => TLS13_ONLY,
        }
    }
}

impl fmt::Display for MinVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Protocol versions, cipher suites and key-exchange groups allowed.
/// The default is what rustls (ring) offers: TLS 1.2 and 1.3, all its
/// suites and groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// The oldest version accepted.
    pub min_version: MinVersion,
    /// The cipher suites allowed, in order of preference; `None`: all.
    pub cipher_suites: Option<Vec<CipherSuite>>,
    /// The key-exchange groups allowed, in order of preference; `None`: all.
    pub kx_groups: Option<Vec<NamedGroup>>,
}

impl Policy {
    /// Ring's provider with only the allowed suites and groups; fails when
    /// a list is empty or leaves no suite for the allowed versions.
    pub fn provider(&self) -> Result<Arc<CryptoProvider>, TlsError> {
        let mut provider = ring::default_provider();
        if let Some(names) = &self.cipher_suites {
            provider.cipher_suites = pick(names, ring::ALL_CIPHER_SUITES, |s| s.suite())
                .map_err(|name| TlsError::setup(format!("no cipher suite {name}")))?;
        }
        if let Some(names) = &self.kx_groups {
            provider.kx_groups = pick(names, ring::ALL_KX_GROUPS, |g| g.name())
                .map_err(|name| TlsError::setup(format!("no key-exchange group {name}")))?;
        }
        if provider.cipher_suites.is_empty() {
            return Err(TlsError::setup("the cipher suite list is empty"));
        }
        if provider.kx_groups.is_empty() {
            return Err(TlsError::setup("the key-exchange group list is empty"));
        }
        if !provider
            .cipher_suites
            .iter()
            .any(|suite| self.min_version.versions().contains(&suite.version()))
        {
            return Err(TlsError::setup(format!(
                "none of the cipher suites is for TLS {} or later; the TLS 1.3 ones: {}",
                self.min_version,
                names(ring::ALL_CIPHER_SUITES, |s| (s.version() == &TLS13)
                    .then(|| s.suite().as_str())
                    .flatten())
            )));
        }
        // What rustls itself checks (suites and groups fit each other).
        ServerConfig::builder_with_provider(Arc::new(provider.clone()))
            .with_protocol_versions(self.min_version.versions())
            .map_err(TlsError::setup)?;
        Ok(Arc::new(provider))
    }
}

/// The cipher suite named `name` as rustls spells it (`TLS13_AES_128_GCM_SHA256`,
/// `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`) or, for TLS 1.3, as IANA does
/// (`TLS_AES_128_GCM_SHA256`); upper or lower case.
pub fn cipher_suite(name: &str) -> Result<CipherSuite, String> {
    let wanted = name.trim();
    ring::ALL_CIPHER_SUITES
        .iter()
        .map(SupportedCipherSuite::suite)
        .find(|suite| {
            suite.as_str().is_some_and(|known| {
                known.eq_ignore_ascii_case(wanted)
                    || known
                        .strip_prefix("TLS13_")
                        .is_some_and(|rest| iana_tls13(wanted, rest))
            })
        })
        .ok_or_else(|| {
            format!(
                "`{wanted}` is not a cipher suite sluice offers; known: {}",
                names(ring::ALL_CIPHER_SUITES, |s| s.suite().as_str())
            )
        })
}

/// `TLS_` then `rest`, as IANA names the TLS 1.3 suites.
fn iana_tls13(wanted: &str, rest: &str) -> bool {
    wanted
        .get(..4)
        .is_some_and(|tls| tls.eq_ignore_ascii_case("TLS_"))
        && wanted
            .get(4..)
            .is_some_and(|name| name.eq_ignore_ascii_case(rest))
}

/// The key-exchange group named `name` (`X25519`, `secp256r1`,
/// `secp384r1`; upper or lower case).
pub fn kx_group(name: &str) -> Result<NamedGroup, String> {
    let wanted = name.trim();
    ring::ALL_KX_GROUPS
        .iter()
        .map(|group| group.name())
        .find(|group| {
            group
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(wanted))
        })
        .ok_or_else(|| {
            format!(
                "`{wanted}` is not a key-exchange group sluice offers; known: {}",
                names(ring::ALL_KX_GROUPS, |g| g.name().as_str())
            )
        })
}

/// The items of `all` whose id is listed, in the order of `wanted`; the
/// first id that is not there otherwise.
fn pick<T: Copy, Id: PartialEq + fmt::Debug>(
    wanted: &[Id],
    all: &[T],
    id: impl Fn(&T) -> Id,
) -> Result<Vec<T>, String> {
    let mut picked: Vec<T> = Vec::with_capacity(wanted.len());
    for name in wanted {
        let item = all
            .iter()
            .find(|item| id(item) == *name)
            .ok_or_else(|| format!("{name:?}"))?;
        if !picked.iter().any(|have| id(have) == *name) {
            picked.push(*item);
        }
    }
    Ok(picked)
}

fn names<T>(all: &[T], name: impl Fn(&T) -> Option<&'static str>) -> String {
    all.iter().filter_map(name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_as_rustls_and_iana_spell_them() {
        assert_eq!(
            cipher_suite("TLS13_AES_128_GCM_SHA256"),
            Ok(CipherSuite::TLS13_AES_128_GCM_SHA256)
        );
        assert_eq!(
            cipher_suite("tls_aes_256_gcm_sha384"),
            Ok(CipherSuite::TLS13_AES_256_GCM_SHA384)
        );
        assert_eq!(
            cipher_suite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
            Ok(CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)
        );
        let err = cipher_suite("TLS_RSA_WITH_RC4_128_SHA").unwrap_err();
        assert!(err.contains("known: TLS13_AES_256_GCM_SHA384"), "{err}");
        assert_eq!(kx_group("x25519"), Ok(NamedGroup::X25519));
        assert_eq!(kx_group("secp384r1"), Ok(NamedGroup::secp384r1));
        let err = kx_group("X448").unwrap_err();
        assert!(
            err.ends_with("known: X25519, secp256r1, secp384r1"),
            "{err}"
        );
        assert_eq!(MinVersion::parse("1.3"), Ok(MinVersion::Tls13));
        assert!(MinVersion::parse("1.1").unwrap_err().contains("\"1.2\""));
    }

    #[test]
    fn a_provider_keeps_only_the_listed_suites_and_groups_in_their_order() {
        let policy = Policy {
            min_version: MinVersion::Tls13,
            cipher_suites: Some(vec![
                CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
                CipherSuite::TLS13_AES_128_GCM_SHA256,
            ]),
            kx_groups: Some(vec![NamedGroup::secp256r1, NamedGroup::X25519]),
        };
        let provider = policy.provider().unwrap();
        let suites: Vec<_> = provider.cipher_suites.iter().map(|s| s.suite()).collect();
        assert_eq!(
            suites,
            [
                CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
                CipherSuite::TLS13_AES_128_GCM_SHA256
            ]
        );
        let groups: Vec<_> = provider.kx_groups.iter().map(|g| g.name()).collect();
        assert_eq!(groups, [NamedGroup::secp256r1, NamedGroup::X25519]);
        assert_eq!(Policy::default().provider().unwrap().cipher_suites.len(), 9);

        // TLS 1.3 only with TLS 1.2 suites only: nothing to offer.
        let none = Policy {
            min_version: MinVersion::Tls13,
            cipher_suites: Some(vec![CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]),
            kx_groups: None,
        };
        let err = none.provider().unwrap_err().to_string();
        assert!(
            err.contains("none of the cipher suites is for TLS 1.3"),
            "{err}"
        );
        let empty = Policy {
            kx_groups: Some(Vec::new()),
            ..Policy::default()
        };
        assert!(empty.provider().is_err());
    }
}
