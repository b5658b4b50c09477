//! Why a key, a JWKS or a key file could not be used.

use std::fmt;

use super::MIN_HMAC_SECRET_BYTES;
use crate::alg::{Algorithm, KeyType};

/// Why a key (or a key file) could not be used.
///
/// Messages are meant for operators (config errors, CLI output); they may
/// name a `kid` or a field, never key material.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The document is not JSON of the form `{"keys": [...]}`.
    Json(String),
    /// One key of a JWKS is unusable; `index` is its position in `keys`.
    Jwk {
        /// Position of the key in the `keys` array.
        index: usize,
        /// The key's `kid`, when it has one.
        kid: Option<String>,
        /// What is wrong with it.
        problem: JwkProblem,
    },
    /// An HMAC secret is shorter than [`MIN_HMAC_SECRET_BYTES`].
    WeakSecret {
        /// The secret's length in bytes.
        len: usize,
    },
    /// A private key file could not be read as the requested algorithm's key.
    Pem(String),
    /// The key does not fit the requested algorithm (e.g. a P-384 key for ES256).
    AlgorithmMismatch {
        /// The algorithm asked for.
        alg: Algorithm,
        /// What the key actually is.
        found: String,
    },
    /// Key generation or signing failed.
    Crypto(String),
    /// Claims to sign were not a JSON object.
    ClaimsNotObject,
}

/// What is wrong with one JWK of a JWKS.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwkProblem {
    /// A required member (`kty`, `n`, `crv`, ...) is absent.
    MissingField(&'static str),
    /// A member is not valid base64url.
    BadBase64(&'static str),
    /// `kty` is not RSA, EC, OKP or oct.
    UnsupportedKeyType(String),
    /// `crv` is not P-256, P-384 (EC) or Ed25519 (OKP).
    UnsupportedCurve(String),
    /// `alg` names an algorithm this crate does not verify (or `none`).
    UnsupportedAlgorithm(String),
    /// `alg` does not fit the key type (e.g. `kty: RSA, alg: ES256`).
    AlgorithmMismatch {
        /// The JWK's `alg`.
        alg: Algorithm,
        /// The JWK's key type.
        key_type: KeyType,
    },
    /// The public key itself is invalid (point not on the curve, bad modulus ...).
    InvalidKey(String),
    /// The key is too weak to trust (RSA under 2048 bits, short HMAC secret).
    WeakKey(String),
    /// The JWK carries private material (`d`): a verifier must only see public keys.
    PrivateKeyMaterial,
    /// Another key in the set has the same `kid`, so tokens could not pick one.
    DuplicateKid,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Json(e) => write!(f, "JWKS is not a JSON object with a \"keys\" array: {e}"),
            KeyError::Jwk { index, kid: Some(kid), problem } => {
                write!(f, "JWKS key #{index} (kid {kid:?}): {problem}")
            }
            KeyError::Jwk { index, kid: None, problem } => write!(f, "JWKS key #{index}: {problem}"),
            KeyError::WeakSecret { len } => write!(
                f,
                "HMAC secret is {len} bytes; at least {MIN_HMAC_SECRET_BYTES} random bytes are required"
            ),
            KeyError::Pem(e) => write!(f, "private key: {e}"),
            KeyError::AlgorithmMismatch { alg, found } => write!(f, "a {found} key cannot sign {alg}"),
            KeyError::Crypto(e) => write!(f, "crypto failure: {e}"),
            KeyError::ClaimsNotObject => f.write_str("JWT claims must be a JSON object"),
        }
    }
}

impl fmt::Display for JwkProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JwkProblem::MissingField(field) => write!(f, "missing member {field:?}"),
            JwkProblem::BadBase64(field) => write!(f, "member {field:?} is not base64url"),
            JwkProblem::UnsupportedKeyType(kty) => {
                write!(f, "unsupported kty {kty:?} (supported: RSA, EC, OKP, oct)")
            }
            JwkProblem::UnsupportedCurve(crv) => {
                write!(
                    f,
                    "unsupported crv {crv:?} (supported: P-256, P-384, Ed25519)"
                )
            }
            JwkProblem::UnsupportedAlgorithm(alg) => write!(f, "unsupported alg {alg:?}"),
            JwkProblem::AlgorithmMismatch { alg, key_type } => {
                write!(f, "alg {alg} cannot be used with a {key_type} key")
            }
            JwkProblem::InvalidKey(e) => write!(f, "invalid key: {e}"),
            JwkProblem::WeakKey(e) => write!(f, "key too weak: {e}"),
            JwkProblem::PrivateKeyMaterial => {
                f.write_str("contains private key material (\"d\"); publish only the public key")
            }
            JwkProblem::DuplicateKid => f.write_str("duplicate kid"),
        }
    }
}

impl std::error::Error for KeyError {}
