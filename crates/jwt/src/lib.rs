//! JWT verification and test-token minting for sluice.
//!
//! The verifier is built for a proxy's hot path and hostile input:
//!
//! - an [`AlgorithmSet`] allow-list that cannot express `alg: none`;
//! - keys ([`KeySet`], from a JWKS or an HMAC secret) typed by `kty`/`crv`
//!   and optionally pinned by `alg`, so a key only ever verifies the
//!   algorithms of its type (no HS256-with-an-RSA-public-key confusion);
//! - a [`KeyStore`] whose keys are swapped atomically on JWKS refresh;
//! - [`JwtVerifier::verify`], which checks size, structure, algorithm, key,
//!   signature, then `exp`/`nbf`/`iss`/`aud`, each failure a precise
//!   [`JwtError`] whose text is safe to send back to the client;
//! - [`JwtVerifier::verify_cached`], which answers repeated tokens from a
//!   bounded [`VerifiedCache`] without redoing the signature check.
//!
//! Minting ([`generate_key`], [`Signer`]) serves tests, benchmarks and the
//! `sluice token` command.
//!
//! Signatures are verified with `ring` (already linked by rustls; several
//! times faster than the pure-Rust backends on RSA and ECDSA), with every
//! key validated and decoded once at load time. Minting signs through the
//! `jsonwebtoken` crate's RustCrypto backend, called directly rather than
//! through its process-wide provider. Token and JWKS parsing are done here,
//! for precise errors.
#![warn(missing_docs)]

mod alg;
mod cache;
mod keys;
mod mint;
mod verified;
mod verify;

#[cfg(test)]
mod tests;

pub use alg::{Algorithm, AlgorithmSet, KeyType, ParseAlgorithmError};
pub use cache::VerifiedCache;
pub use keys::{
    JwkProblem, Key, KeyError, KeySet, KeyStore, MAX_RSA_BITS, MIN_HMAC_SECRET_BYTES, MIN_RSA_BITS,
};
pub use mint::{generate_key, GeneratedKey, Signer, GENERATED_RSA_BITS};
pub use verified::Verified;
pub use verify::{JwtError, JwtVerifier, SettingsError, VerifierSettings};

/// The current time in Unix seconds, the clock [`JwtVerifier::verify`] expects
/// (0 if the system clock is before 1970).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
