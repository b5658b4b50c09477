//! JWKS parsing (crates/jwt `KeySet::from_jwks` and `from_jwks_lenient`):
//! any bytes give a key set or an error, never a panic.
//!
//! - The strict parse succeeds exactly when the lenient one reports no
//!   problem, with the same keys; the lenient one fails only when the
//!   strict one does.
//! - No more keys than the document lists, `kid`s unique, and no error
//!   text shows key material (a key's `k` or `d`).
//! - A verifier over the keys gives any token a verdict whose refusal is
//!   safe for a `WWW-Authenticate` header (as `jwt_verify` checks).

use std::sync::{Arc, OnceLock};

use jwt::{Algorithm, JwtVerifier, KeySet, KeyStore, Signer, VerifierSettings};
use serde_json::Value;

const NOW: u64 = 1_700_000_000;

/// Tokens to verify against every parsed set: HS256 under a secret a JWKS
/// may hold (`k` = base64url of it) and RS256 under the test key.
fn tokens() -> &'static [String; 2] {
    static TOKENS: OnceLock<[String; 2]> = OnceLock::new();
    TOKENS.get_or_init(|| {
        let claims = serde_json::json!({"sub": "fuzz", "exp": NOW + 60});
        let hmac = Signer::from_hmac_secret("k1", b"fuzzing-secret-fuzzing-secret-32").unwrap();
        let pem = include_str!("../../crates/jwt/tests/data/rsa2048-test-only.pem");
        let rsa = Signer::from_private_pem(Algorithm::RS256, "r1", pem).unwrap();
        [hmac.sign(&claims).unwrap(), rsa.sign(&claims).unwrap()]
    })
}

/// Every base64url string of 16 or more characters a key of the document
/// holds under `k` or `d`, unless
/// another member (a `kty`, a `kid`, which errors may quote) holds it too.
fn secrets(document: &Value) -> Vec<String> {
    let keys = document.get("keys").and_then(Value::as_array);
    let keys = || keys.into_iter().flatten().filter_map(Value::as_object);
    let public: Vec<&str> = keys()
        .flat_map(|key| key.iter())
        .filter(|(member, _)| !["k", "d"].contains(&member.as_str()))
        .filter_map(|(_, value)| value.as_str())
        .collect();
    keys()
        .flat_map(|key| ["k", "d"].map(|member| key.get(member).and_then(Value::as_str)))
        .flatten()
        .filter(|secret| {
            // Key material is base64url; shorter runs are words an error
            // may hold for other reasons.
            let base64url = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
            secret.len() >= 16
                && secret.chars().all(base64url)
                && !public.iter().any(|p| p.contains(secret))
        })
        .map(str::to_owned)
        .collect()
}

pub fn check(data: &[u8]) {
    let lenient = KeySet::from_jwks_lenient(data);
    let strict = KeySet::from_jwks(data);
    let document: Option<Value> = serde_json::from_slice(data).ok();
    let secrets = document.as_ref().map(secrets).unwrap_or_default();
    let shows_no_secret = |text: String| {
        assert!(
            !secrets.iter().any(|s| text.contains(s.as_str())),
            "key material in {text}"
        );
    };
    let (set, problems) = match lenient {
        Ok(parsed) => parsed,
        Err(error) => {
            assert_eq!(strict.err(), Some(error.clone()));
            return shows_no_secret(error.to_string());
        }
    };
    for problem in &problems {
        shows_no_secret(problem.to_string());
    }
    match strict {
        Ok(strict) => {
            assert!(problems.is_empty());
            assert_eq!(strict.len(), set.len());
        }
        Err(error) => assert_eq!(Some(&error), problems.first()),
    }
    let listed = document
        .as_ref()
        .and_then(|d| d.get("keys"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    assert!(set.len() <= listed);
    let mut kids: Vec<&str> = set.keys().iter().filter_map(|k| k.kid()).collect();
    kids.sort_unstable();
    let count = kids.len();
    kids.dedup();
    assert_eq!(kids.len(), count, "duplicate kid kept");

    let settings = VerifierSettings::new(Algorithm::ALL);
    let Ok(verifier) = JwtVerifier::new(settings, Arc::new(KeyStore::new(set))) else {
        return;
    };
    for token in tokens() {
        if let Err(error) = verifier.verify(token, NOW) {
            crate::jwt_verify::check_error(&error);
        }
    }
}
