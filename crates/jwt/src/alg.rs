//! Signature algorithms and the key types they run on.

use std::fmt;
use std::str::FromStr;

/// A JWS signature algorithm this crate can verify and sign with.
///
/// There is deliberately no `none` variant: an unsigned token can never be
/// allowed, not even by a configuration mistake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256, the most common choice of identity providers.
    RS256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    RS384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    RS512,
    /// RSASSA-PSS with SHA-256.
    PS256,
    /// RSASSA-PSS with SHA-384.
    PS384,
    /// RSASSA-PSS with SHA-512.
    PS512,
    /// ECDSA on P-256 with SHA-256: small keys and tokens.
    ES256,
    /// ECDSA on P-384 with SHA-384.
    ES384,
    /// Ed25519 signatures (the only EdDSA curve supported).
    EdDSA,
    /// HMAC with SHA-256 and a shared secret: for tests and single-party setups.
    HS256,
}

impl Algorithm {
    /// Every supported algorithm, in a stable order: for help texts and tests.
    pub const ALL: [Algorithm; 10] = [
        Algorithm::RS256,
        Algorithm::RS384,
        Algorithm::RS512,
        Algorithm::PS256,
        Algorithm::PS384,
        Algorithm::PS512,
        Algorithm::ES256,
        Algorithm::ES384,
        Algorithm::EdDSA,
        Algorithm::HS256,
    ];

    /// The JOSE name (`"RS256"` ...), as written in token headers and JWKs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Algorithm::RS256 => "RS256",
            Algorithm::RS384 => "RS384",
            Algorithm::RS512 => "RS512",
            Algorithm::PS256 => "PS256",
            Algorithm::PS384 => "PS384",
            Algorithm::PS512 => "PS512",
            Algorithm::ES256 => "ES256",
            Algorithm::ES384 => "ES384",
            Algorithm::EdDSA => "EdDSA",
            Algorithm::HS256 => "HS256",
        }
    }

    /// Looks up a JOSE name exactly (names are case-sensitive, RFC 7515
    /// §4.1.1); `None` for `"none"` and anything unsupported.
    pub fn from_jose(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|alg| alg.as_str() == name)
    }

    /// The only key type that may verify this algorithm: what stops an
    /// RSA public key being used as an HMAC secret.
    pub const fn key_type(self) -> KeyType {
        match self {
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512 => KeyType::Rsa,
            Algorithm::ES256 => KeyType::EcP256,
            Algorithm::ES384 => KeyType::EcP384,
            Algorithm::EdDSA => KeyType::Ed25519,
            Algorithm::HS256 => KeyType::Oct,
        }
    }

    pub(crate) const fn to_jsonwebtoken(self) -> jsonwebtoken::Algorithm {
        match self {
            Algorithm::RS256 => jsonwebtoken::Algorithm::RS256,
            Algorithm::RS384 => jsonwebtoken::Algorithm::RS384,
            Algorithm::RS512 => jsonwebtoken::Algorithm::RS512,
            Algorithm::PS256 => jsonwebtoken::Algorithm::PS256,
            Algorithm::PS384 => jsonwebtoken::Algorithm::PS384,
            Algorithm::PS512 => jsonwebtoken::Algorithm::PS512,
            Algorithm::ES256 => jsonwebtoken::Algorithm::ES256,
            Algorithm::ES384 => jsonwebtoken::Algorithm::ES384,
            Algorithm::EdDSA => jsonwebtoken::Algorithm::EdDSA,
            Algorithm::HS256 => jsonwebtoken::Algorithm::HS256,
        }
    }

    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a configured algorithm name was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseAlgorithmError {
    name: String,
}

impl fmt::Display for ParseAlgorithmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name.eq_ignore_ascii_case("none") {
            return write!(
                f,
                "JWT algorithm {:?} (unsigned tokens) is never accepted",
                self.name
            );
        }
        write!(f, "unsupported JWT algorithm {:?}; supported: ", self.name)?;
        for (i, alg) in Algorithm::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(alg.as_str())?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseAlgorithmError {}

impl FromStr for Algorithm {
    type Err = ParseAlgorithmError;

    /// Parses a configuration value such as `"RS256"` (exact JOSE spelling).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algorithm::from_jose(s).ok_or_else(|| ParseAlgorithmError { name: s.to_owned() })
    }
}

/// The allow-list of algorithms a verifier accepts, as a bit set so the
/// per-token check is one AND.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AlgorithmSet(u16);

impl AlgorithmSet {
    /// The empty set (a verifier refuses to be built with it).
    pub const EMPTY: AlgorithmSet = AlgorithmSet(0);

    /// Adds one algorithm.
    pub fn insert(&mut self, alg: Algorithm) {
        self.0 |= alg.bit();
    }

    /// Whether `alg` is allowed.
    pub const fn contains(self, alg: Algorithm) -> bool {
        self.0 & alg.bit() != 0
    }

    /// Whether nothing is allowed.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The allowed algorithms, in [`Algorithm::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Algorithm> {
        Algorithm::ALL
            .into_iter()
            .filter(move |alg| self.contains(*alg))
    }

    /// Parses configuration strings such as `["RS256", "ES256"]`; the first
    /// bad name is the error.
    pub fn parse<I, S>(names: I) -> Result<AlgorithmSet, ParseAlgorithmError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        names
            .into_iter()
            .map(|name| name.as_ref().parse::<Algorithm>())
            .collect()
    }
}

impl FromIterator<Algorithm> for AlgorithmSet {
    fn from_iter<T: IntoIterator<Item = Algorithm>>(iter: T) -> Self {
        let mut set = AlgorithmSet::EMPTY;
        for alg in iter {
            set.insert(alg);
        }
        set
    }
}

impl fmt::Debug for AlgorithmSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// The kind of a verification key (JWK `kty`, plus the curve for EC/OKP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyType {
    /// `kty: "RSA"`: verifies RS256/384/512 and PS256/384/512.
    Rsa,
    /// `kty: "EC", crv: "P-256"`: verifies ES256.
    EcP256,
    /// `kty: "EC", crv: "P-384"`: verifies ES384.
    EcP384,
    /// `kty: "OKP", crv: "Ed25519"`: verifies EdDSA.
    Ed25519,
    /// `kty: "oct"`: an HMAC secret, verifies HS256.
    Oct,
}

impl KeyType {
    /// Whether a key of this type may ever be used with `alg`.
    pub const fn supports(self, alg: Algorithm) -> bool {
        alg.key_type() as u8 == self as u8
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyType::Rsa => "RSA",
            KeyType::EcP256 => "EC P-256",
            KeyType::EcP384 => "EC P-384",
            KeyType::Ed25519 => "OKP Ed25519",
            KeyType::Oct => "oct",
        })
    }
}
