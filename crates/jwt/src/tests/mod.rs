//! Round trips for every algorithm, and each hostile input failing with its
//! precise error, grouped by concern; the fixtures all of them share are
//! here. RSA keys come from a committed test-only key file, because RSA key
//! generation is slow in debug builds; one test still generates one.

mod attacks;
mod cache;
mod claims;
mod keys;
mod mint;

use std::sync::{Arc, OnceLock};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

use crate::*;

/// A fixed "now" so every time check is deterministic.
pub(super) const NOW: u64 = 1_700_000_000;
pub(super) const RSA_PEM: &str = include_str!("../../tests/data/rsa2048-test-only.pem");
pub(super) const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

pub(super) fn rsa_signer(alg: Algorithm) -> Signer {
    Signer::from_private_pem(alg, "rsa-1", RSA_PEM).unwrap()
}

/// One signer per algorithm for the whole run (RSA from the key file).
pub(super) fn signer(alg: Algorithm) -> &'static Signer {
    static SIGNERS: OnceLock<Vec<Signer>> = OnceLock::new();
    let signers = SIGNERS.get_or_init(|| {
        Algorithm::ALL
            .iter()
            .map(|&alg| match alg.key_type() {
                KeyType::Rsa => rsa_signer(alg),
                KeyType::Oct => Signer::from_hmac_secret("hs-1", SECRET).unwrap(),
                _ => {
                    // Through the PEM, so loading what generate_key writes is covered too.
                    let key = generate_key(alg, &format!("{alg}-1")).unwrap();
                    Signer::from_private_pem(alg, key.signer().kid(), key.private_pem().unwrap())
                        .unwrap()
                }
            })
            .collect()
    });
    &signers[Algorithm::ALL.iter().position(|a| *a == alg).unwrap()]
}

pub(super) fn settings(algs: &[Algorithm]) -> VerifierSettings {
    VerifierSettings::new(algs.iter().copied())
}

pub(super) fn verifier_with(keys: KeySet, settings: VerifierSettings) -> JwtVerifier {
    JwtVerifier::new(settings, Arc::new(KeyStore::new(keys))).unwrap()
}

/// A verifier for `signer`'s keys allowing every algorithm, so that only the
/// check under test can refuse a token.
pub(super) fn verifier_for(signer: &Signer) -> JwtVerifier {
    verifier_with(signer.key_set().unwrap(), settings(&Algorithm::ALL))
}

pub(super) fn claims() -> Value {
    json!({ "sub": "alice", "exp": NOW + 600, "scope": "read write" })
}

pub(super) fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A token with any header, claims and signature bytes.
pub(super) fn forge(header: &Value, claims: &Value, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes()),
        b64(signature)
    )
}

/// A correctly computed HS256 token with any header, under any secret.
pub(super) fn forge_hs256(header: &Value, claims: &Value, secret: &[u8]) -> String {
    let message = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let key = jsonwebtoken::EncodingKey::from_secret(secret);
    let signer = (jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.signer_factory)(
        &jsonwebtoken::Algorithm::HS256,
        &key,
    )
    .unwrap();
    let signature = signer.try_sign(message.as_bytes()).unwrap();
    format!("{message}.{}", b64(&signature))
}

pub(super) fn hs_verifier() -> JwtVerifier {
    verifier_with(
        KeySet::from_hmac_secret(Some("hs-1"), SECRET).unwrap(),
        settings(&[Algorithm::HS256]),
    )
}

pub(super) fn hs_token(claims: &Value) -> String {
    forge_hs256(
        &json!({ "alg": "HS256", "typ": "JWT", "kid": "hs-1" }),
        claims,
        SECRET,
    )
}
