//! JWT verification: any string gives a verdict, never a panic, and every
//! refusal's text is safe for a `WWW-Authenticate` header. Inputs whose first
//! byte is odd are claims instead: they are signed with the fixed HS256 key,
//! so the claim checks, the cache and the claim accessors run on arbitrary
//! JSON; such a token may only be refused for its claims.

use std::sync::{Arc, OnceLock};

use jwt::{Algorithm, JwtError, JwtVerifier, KeySet, KeyStore, Signer, VerifierSettings};
use serde_json::Value;

const NOW: u64 = 1_700_000_000;
const SECRET: &[u8] = b"fuzzing-secret-fuzzing-secret-32";
const RSA_PEM: &str = include_str!("../../crates/jwt/tests/data/rsa2048-test-only.pem");
const PUBLIC_JWKS: &str = r#"{"keys":[
 {"alg":"ES256","crv":"P-256","kid":"fuzz-es256","kty":"EC","use":"sig","x":"o6FazYVEBd46SZz11sF1VJIgrCcKz9lfxAAbXj5dzCs","y":"46oqWnoEeI62q-x-i_gx1INbOq4Mz5NX6G_YQPz8lLY"},
 {"crv":"Ed25519","kid":"fuzz-eddsa","kty":"OKP","x":"dPlzR976O0qnI7XA3vWPJcjvfM4rD69mybVeHnS4uVs"}
]}"#;

struct Fixture {
    verifier: JwtVerifier,
    signer: Signer,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let rsa = Signer::from_private_pem(Algorithm::RS256, "fuzz-rs256", RSA_PEM).unwrap();
        let signer = Signer::from_hmac_secret("fuzz-hs256", SECRET).unwrap();
        let keys = KeySet::from_jwks(PUBLIC_JWKS.as_bytes())
            .unwrap()
            .merge(rsa.key_set().unwrap())
            .unwrap()
            .merge(signer.key_set().unwrap())
            .unwrap();
        let mut settings = VerifierSettings::new(Algorithm::ALL);
        settings.issuer = Some("https://issuer.example".into());
        settings.audiences = vec!["api".into()];
        settings.cache_capacity = 64;
        let verifier = JwtVerifier::new(settings, Arc::new(KeyStore::new(keys))).unwrap();
        Fixture { verifier, signer }
    })
}

pub(crate) fn check_error(error: &JwtError) {
    let text = error.to_string();
    assert!(
        !text.contains(['"', '\\']) && !text.chars().any(char::is_control),
        "{text}"
    );
    assert_eq!(error.error_code(), "invalid_token");
}

pub fn check(data: &[u8]) {
    let fixture = fixture();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let Ok(token) = std::str::from_utf8(rest) else {
            return;
        };
        let plain = fixture.verifier.verify(token, NOW);
        let cached = fixture.verifier.verify_cached(token, NOW);
        match (&plain, &cached) {
            (Ok(plain), Ok(cached)) => assert_eq!(plain, &**cached),
            (Err(plain), Err(cached)) => {
                assert_eq!(plain, cached);
                check_error(plain);
            }
            _ => panic!("verify and verify_cached disagree: {plain:?} / {cached:?}"),
        }
        return;
    }
    let Ok(claims @ Value::Object(_)) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let token = fixture.signer.sign(&claims).unwrap();
    for _ in 0..2 {
        match fixture.verifier.verify_cached(&token, NOW) {
            Ok(verified) => {
                assert_eq!(verified.claims["iss"], "https://issuer.example");
                let _ = verified.scopes().count();
                for name in verified.claims.keys() {
                    if let Some(value) = verified.claim_as_header_value(name) {
                        assert!(!value.chars().any(char::is_control));
                    }
                }
            }
            Err(error) => {
                check_error(&error);
                assert!(
                    matches!(
                        error,
                        JwtError::TooLarge
                            | JwtError::Expired
                            | JwtError::NotYetValid
                            | JwtError::WrongIssuer
                            | JwtError::WrongAudience
                            | JwtError::MissingClaim(_)
                            | JwtError::Malformed(
                                "exp is not a non-negative number"
                                    | "nbf is not a non-negative number"
                                    | "aud is not a string or array of strings"
                            )
                    ),
                    "a correctly signed token refused: {error:?}"
                );
            }
        }
    }
}
