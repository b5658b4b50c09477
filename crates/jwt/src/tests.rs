//! Round trips for every algorithm, and each hostile input failing with its
//! precise error. RSA keys come from a committed test-only key file, because
//! RSA key generation is slow in debug builds; one test still generates one.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rsa::pkcs1::EncodeRsaPublicKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use serde_json::{json, Value};

use crate::*;

/// A fixed "now" so every time check is deterministic.
const NOW: u64 = 1_700_000_000;
const RSA_PEM: &str = include_str!("../tests/data/rsa2048-test-only.pem");
const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

fn rsa_signer(alg: Algorithm) -> Signer {
    Signer::from_private_pem(alg, "rsa-1", RSA_PEM).unwrap()
}

/// One signer per algorithm for the whole run (RSA from the key file).
fn signer(alg: Algorithm) -> &'static Signer {
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

fn settings(algs: &[Algorithm]) -> VerifierSettings {
    VerifierSettings::new(algs.iter().copied())
}

fn verifier_with(keys: KeySet, settings: VerifierSettings) -> JwtVerifier {
    JwtVerifier::new(settings, Arc::new(KeyStore::new(keys))).unwrap()
}

/// A verifier for `signer`'s keys allowing every algorithm, so that only the
/// check under test can refuse a token.
fn verifier_for(signer: &Signer) -> JwtVerifier {
    verifier_with(signer.key_set().unwrap(), settings(&Algorithm::ALL))
}

fn claims() -> Value {
    json!({ "sub": "alice", "exp": NOW + 600, "scope": "read write" })
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A token with any header, claims and signature bytes.
fn forge(header: &Value, claims: &Value, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes()),
        b64(signature)
    )
}

/// A correctly computed HS256 token with any header, under any secret.
fn forge_hs256(header: &Value, claims: &Value, secret: &[u8]) -> String {
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

fn hs_verifier() -> JwtVerifier {
    verifier_with(
        KeySet::from_hmac_secret(Some("hs-1"), SECRET).unwrap(),
        settings(&[Algorithm::HS256]),
    )
}

#[test]
fn every_algorithm_round_trips() {
    for alg in Algorithm::ALL {
        let signer = signer(alg);
        let token = signer.sign(&claims()).unwrap();
        let verified = verifier_for(signer)
            .verify(&token, NOW)
            .unwrap_or_else(|e| panic!("{alg}: {e}"));
        assert_eq!(Value::Object(verified.claims.clone()), claims(), "{alg}");
        assert_eq!(verified.algorithm, alg);
        assert_eq!(verified.key_id.as_deref(), Some(signer.kid()));
        assert_eq!(verified.expires_at, Some(NOW + 600));
        // And a verifier that does not allow it refuses it.
        let others: Vec<_> = Algorithm::ALL.into_iter().filter(|a| *a != alg).collect();
        let strict = verifier_with(signer.key_set().unwrap(), settings(&others));
        assert_eq!(
            strict.verify(&token, NOW),
            Err(JwtError::AlgorithmNotAllowed),
            "{alg}"
        );
    }
}

#[test]
fn generated_keys_export_usable_pem_and_jwks() {
    for alg in [
        Algorithm::ES256,
        Algorithm::ES384,
        Algorithm::EdDSA,
        Algorithm::HS256,
    ] {
        let key = generate_key(alg, "gen").unwrap();
        let jwks: Value = serde_json::from_str(&key.jwks_json()).unwrap();
        let jwk = &jwks["keys"][0];
        assert_eq!(jwk["kid"], "gen");
        assert_eq!(jwk["alg"], alg.as_str());
        assert_eq!(jwk["use"], "sig");
        assert!(jwk.get("d").is_none(), "{alg}: private part in the JWKS");
        let verifier = verifier_with(
            KeySet::from_jwks(key.jwks_json().as_bytes()).unwrap(),
            settings(&[alg]),
        );
        let token = match key.private_pem() {
            Some(pem) => Signer::from_private_pem(alg, "gen", pem)
                .unwrap()
                .sign(&claims())
                .unwrap(),
            None => key.sign(&claims()).unwrap(),
        };
        assert!(verifier.verify(&token, NOW).is_ok(), "{alg}");
    }
    let hs = generate_key(Algorithm::HS256, "hs").unwrap();
    assert!(hs.private_pem().is_none());
    let jwks: Value = serde_json::from_str(&hs.jwks_json()).unwrap();
    assert_eq!(
        URL_SAFE_NO_PAD
            .decode(jwks["keys"][0]["k"].as_str().unwrap())
            .unwrap()
            .len(),
        32
    );
}

#[test]
fn generated_rsa_key_round_trips() {
    let key = generate_key(Algorithm::RS256, "rsa-gen").unwrap();
    let pem = key.private_pem().unwrap();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    let private = rsa::RsaPrivateKey::from_pkcs8_pem(pem).unwrap();
    assert_eq!(
        rsa::traits::PublicKeyParts::n(&private).bits(),
        GENERATED_RSA_BITS
    );
    let verifier = verifier_with(key.key_set().unwrap(), settings(&[Algorithm::RS256]));
    let token = Signer::from_private_pem(Algorithm::RS256, "rsa-gen", pem)
        .unwrap()
        .sign(&claims())
        .unwrap();
    assert!(verifier.verify(&token, NOW).is_ok());
}

#[test]
fn pkcs1_rsa_pem_is_accepted_and_wrong_key_types_are_not() {
    let private = rsa::RsaPrivateKey::from_pkcs8_pem(RSA_PEM).unwrap();
    let pkcs1 = rsa::pkcs1::EncodeRsaPrivateKey::to_pkcs1_pem(&private, LineEnding::LF).unwrap();
    let signer = Signer::from_private_pem(Algorithm::RS256, "rsa-1", &pkcs1).unwrap();
    assert!(verifier_for(&signer)
        .verify(&signer.sign(&claims()).unwrap(), NOW)
        .is_ok());

    assert!(matches!(
        Signer::from_private_pem(Algorithm::ES256, "k", RSA_PEM),
        Err(KeyError::Pem(_))
    ));
    let p384 = generate_key(Algorithm::ES384, "k").unwrap();
    let p384_pem = p384.private_pem().unwrap();
    assert!(matches!(
        Signer::from_private_pem(Algorithm::ES256, "k", p384_pem),
        Err(KeyError::Pem(_))
    ));
    assert!(matches!(
        Signer::from_private_pem(Algorithm::RS256, "k", p384_pem),
        Err(KeyError::Pem(_))
    ));
    assert!(matches!(
        Signer::from_private_pem(Algorithm::HS256, "k", RSA_PEM),
        Err(KeyError::Pem(_))
    ));
    assert_eq!(
        Signer::from_hmac_secret("k", b"short").unwrap_err(),
        KeyError::WeakSecret { len: 5 }
    );
    assert_eq!(
        signer.sign(&json!(["not", "an", "object"])),
        Err(KeyError::ClaimsNotObject)
    );
}

#[test]
fn alg_none_is_refused_in_every_spelling() {
    assert!("none".parse::<Algorithm>().is_err());
    assert!(AlgorithmSet::parse(["RS256", "none"]).is_err());
    let verifier = verifier_for(signer(Algorithm::HS256));
    for none in ["none", "None", "NONE", "nOnE"] {
        for kid in [json!(null), json!("hs-1")] {
            let header = json!({ "alg": none, "typ": "JWT", "kid": kid });
            let unsigned = format!(
                "{}.{}.",
                b64(header.to_string().as_bytes()),
                b64(claims().to_string().as_bytes())
            );
            assert_eq!(
                verifier.verify(&unsigned, NOW),
                Err(JwtError::AlgorithmNotAllowed),
                "{none}"
            );
            let with_signature = forge(&header, &claims(), b"whatever");
            assert_eq!(
                verifier.verify(&with_signature, NOW),
                Err(JwtError::AlgorithmNotAllowed),
                "{none}"
            );
        }
    }
    // Case matters for real names too: "hs256" is not HS256.
    let lower = forge_hs256(&json!({ "alg": "hs256", "kid": "hs-1" }), &claims(), SECRET);
    assert_eq!(
        verifier.verify(&lower, NOW),
        Err(JwtError::AlgorithmNotAllowed)
    );
    let control = forge_hs256(&json!({ "alg": "HS256", "kid": "hs-1" }), &claims(), SECRET);
    assert!(verifier.verify(&control, NOW).is_ok());
}

#[test]
fn hs256_signed_with_the_rsa_public_key_is_refused() {
    let private = rsa::RsaPrivateKey::from_pkcs8_pem(RSA_PEM).unwrap();
    let public = private.to_public_key();
    let jwks: Value = serde_json::from_str(&signer(Algorithm::RS256).jwks_json()).unwrap();
    let n = jwks["keys"][0]["n"].as_str().unwrap().to_owned();
    let secrets: Vec<Vec<u8>> = vec![
        public
            .to_public_key_pem(LineEnding::LF)
            .unwrap()
            .into_bytes(),
        public.to_public_key_der().unwrap().as_bytes().to_vec(),
        public.to_pkcs1_pem(LineEnding::LF).unwrap().into_bytes(),
        public.to_pkcs1_der().unwrap().as_bytes().to_vec(),
        URL_SAFE_NO_PAD.decode(&n).unwrap(),
        n.into_bytes(),
    ];
    // The JWKS holds only the RSA key, without an alg pin, so only the key
    // type stands between the attacker and acceptance.
    let rsa_only = json!({ "keys": [{ "kty": "RSA", "kid": "rsa-1", "n": jwks["keys"][0]["n"], "e": "AQAB" }] }).to_string();
    let keys = KeySet::from_jwks(rsa_only.as_bytes()).unwrap();
    let lax = verifier_with(
        keys.clone(),
        settings(&[Algorithm::RS256, Algorithm::HS256]),
    );
    let strict = verifier_with(keys, settings(&[Algorithm::RS256]));
    for secret in &secrets {
        for header in [
            json!({ "alg": "HS256", "kid": "rsa-1" }),
            json!({ "alg": "HS256" }),
        ] {
            let token = forge_hs256(&header, &claims(), secret);
            assert_eq!(
                lax.verify(&token, NOW),
                Err(JwtError::KeyMismatch),
                "{header}"
            );
            assert_eq!(
                strict.verify(&token, NOW),
                Err(JwtError::AlgorithmNotAllowed),
                "{header}"
            );
        }
    }
    // The same verifier does accept the genuine RS256 token.
    assert!(lax
        .verify(&signer(Algorithm::RS256).sign(&claims()).unwrap(), NOW)
        .is_ok());
}

#[test]
fn jwk_alg_pin_limits_a_key_to_one_algorithm() {
    // The signer's JWKS pins alg RS256; a PS256 token under the same kid is refused.
    let rs = signer(Algorithm::RS256);
    let verifier = verifier_for(rs);
    let ps_token = signer(Algorithm::PS256).sign(&claims()).unwrap();
    assert_eq!(verifier.verify(&ps_token, NOW), Err(JwtError::KeyMismatch));
    assert!(verifier_for(signer(Algorithm::PS256))
        .verify(&ps_token, NOW)
        .is_ok());
}

#[test]
fn unknown_kid_and_key_selection_without_kid() {
    let verifier = hs_verifier();
    let token = forge_hs256(
        &json!({ "alg": "HS256", "kid": "other" }),
        &claims(),
        SECRET,
    );
    assert_eq!(
        verifier.verify(&token, NOW),
        Err(JwtError::UnknownKid(Some("other".into())))
    );

    // Without a kid the single fitting key is used.
    let no_kid = forge_hs256(&json!({ "alg": "HS256" }), &claims(), SECRET);
    assert!(verifier.verify(&no_kid, NOW).is_ok());

    // Two fitting keys and no kid: ambiguous.
    let two = KeySet::from_hmac_secret(Some("a"), SECRET)
        .unwrap()
        .merge(KeySet::from_hmac_secret(Some("b"), &[7; 32]).unwrap())
        .unwrap();
    let ambiguous = verifier_with(two, settings(&[Algorithm::HS256]));
    assert_eq!(
        ambiguous.verify(&no_kid, NOW),
        Err(JwtError::UnknownKid(None))
    );
    let with_kid = forge_hs256(&json!({ "alg": "HS256", "kid": "a" }), &claims(), SECRET);
    assert!(ambiguous.verify(&with_kid, NOW).is_ok());

    // No keys at all.
    let empty = verifier_with(KeySet::empty(), settings(&[Algorithm::HS256]));
    assert_eq!(empty.verify(&no_kid, NOW), Err(JwtError::UnknownKid(None)));
}

#[test]
fn bad_base64_in_each_segment_is_malformed() {
    let verifier = verifier_for(signer(Algorithm::ES256));
    let token = signer(Algorithm::ES256).sign(&claims()).unwrap();
    assert!(verifier.verify(&token, NOW).is_ok());
    let parts: Vec<&str> = token.split('.').collect();
    let reasons = [
        "the header is not base64url",
        "the payload is not base64url",
        "the signature is not base64url",
    ];
    for (i, reason) in reasons.iter().enumerate() {
        for bad in ["!", "=", "+", "/", " ", "%3D"] {
            let mut broken: Vec<String> = parts.iter().map(|p| p.to_string()).collect();
            broken[i].push_str(bad);
            let broken = broken.join(".");
            assert_eq!(
                verifier.verify(&broken, NOW),
                Err(JwtError::Malformed(reason)),
                "segment {i} + {bad:?}"
            );
        }
        // Padded (standard) base64 is not base64url without padding.
        let mut padded: Vec<String> = parts.iter().map(|p| p.to_string()).collect();
        padded[i] = base64::engine::general_purpose::URL_SAFE
            .encode(URL_SAFE_NO_PAD.decode(parts[i]).unwrap());
        if padded[i] != parts[i] {
            assert_eq!(
                verifier.verify(&padded.join("."), NOW),
                Err(JwtError::Malformed(reason)),
                "padded {i}"
            );
        }
    }
    // A header that decodes but is not a JSON object with a string alg.
    for header in [
        &b"not json"[..],
        b"[]",
        b"{}",
        b"{\"alg\":5}",
        b"{\"alg\":\"ES256\",\"alg\":\"ES256\"}",
    ] {
        let forged = format!("{}.{}.{}", b64(header), parts[1], parts[2]);
        assert_eq!(
            verifier.verify(&forged, NOW),
            Err(JwtError::Malformed(
                "the header is not a JSON object with an alg"
            )),
            "{}",
            String::from_utf8_lossy(header)
        );
    }
}

#[test]
fn wrong_segment_counts_are_malformed() {
    let verifier = hs_verifier();
    let token = forge_hs256(&json!({ "alg": "HS256", "kid": "hs-1" }), &claims(), SECRET);
    assert!(verifier.verify(&token, NOW).is_ok());
    let (message, _) = token.rsplit_once('.').unwrap();
    let (header, _) = message.split_once('.').unwrap();
    let segments = Err(JwtError::Malformed(
        "a token has three dot-separated segments",
    ));
    for broken in [
        format!("{token}.x"),
        format!("{token}."),
        message.to_owned(),
        header.to_owned(),
        String::new(),
    ] {
        assert_eq!(verifier.verify(&broken, NOW), segments, "{broken}");
    }
}

#[test]
fn oversize_tokens_are_refused_before_decoding() {
    let token = forge_hs256(&json!({ "alg": "HS256", "kid": "hs-1" }), &claims(), SECRET);
    let mut s = settings(&[Algorithm::HS256]);
    s.max_token_bytes = token.len();
    let verifier = verifier_with(
        KeySet::from_hmac_secret(Some("hs-1"), SECRET).unwrap(),
        s.clone(),
    );
    assert!(verifier.verify(&token, NOW).is_ok());
    s.max_token_bytes = token.len() - 1;
    let verifier = verifier_with(KeySet::from_hmac_secret(Some("hs-1"), SECRET).unwrap(), s);
    assert_eq!(verifier.verify(&token, NOW), Err(JwtError::TooLarge));
    assert_eq!(
        verifier.verify_cached(&token, NOW).map(|_| ()),
        Err(JwtError::TooLarge)
    );
    // Garbage that would be Malformed is TooLarge when too long: size comes first.
    let default = hs_verifier();
    assert_eq!(
        default.verify(&"!".repeat(8 * 1024 + 1), NOW),
        Err(JwtError::TooLarge)
    );
    assert_eq!(
        default.verify(&"!".repeat(8 * 1024), NOW),
        Err(JwtError::Malformed(
            "a token has three dot-separated segments"
        ))
    );
}

fn hs_token(claims: &Value) -> String {
    forge_hs256(
        &json!({ "alg": "HS256", "typ": "JWT", "kid": "hs-1" }),
        claims,
        SECRET,
    )
}

#[test]
fn exp_is_enforced_with_leeway() {
    let verifier = hs_verifier(); // default leeway 60 s
    let at = |exp: u64| {
        verifier
            .verify(&hs_token(&json!({ "exp": exp })), NOW)
            .map(|v| v.expires_at)
    };
    assert_eq!(at(NOW - 61), Err(JwtError::Expired));
    assert_eq!(at(NOW - 60), Err(JwtError::Expired));
    assert_eq!(at(NOW - 59), Ok(Some(NOW - 59)));
    assert_eq!(at(NOW - 30), Ok(Some(NOW - 30)), "within leeway");
    assert_eq!(at(NOW + 1), Ok(Some(NOW + 1)));

    let mut s = settings(&[Algorithm::HS256]);
    s.leeway = Duration::ZERO;
    let exact = verifier_with(KeySet::from_hmac_secret(Some("hs-1"), SECRET).unwrap(), s);
    assert_eq!(
        exact.verify(&hs_token(&json!({ "exp": NOW })), NOW),
        Err(JwtError::Expired)
    );
    assert!(exact
        .verify(&hs_token(&json!({ "exp": NOW + 1 })), NOW)
        .is_ok());
    // Fractional NumericDate values are allowed.
    assert_eq!(
        exact.verify(&hs_token(&json!({ "exp": NOW as f64 + 0.5 })), NOW),
        Err(JwtError::Expired)
    );
    assert!(exact
        .verify(&hs_token(&json!({ "exp": NOW as f64 + 1.5 })), NOW)
        .is_ok());
}

#[test]
fn missing_or_malformed_exp() {
    let verifier = hs_verifier();
    assert_eq!(
        verifier.verify(&hs_token(&json!({ "sub": "a" })), NOW),
        Err(JwtError::MissingClaim("exp"))
    );
    for exp in [
        json!("1900000000"),
        json!(-5),
        json!(null),
        json!([1]),
        json!(-0.5),
    ] {
        assert_eq!(
            verifier.verify(&hs_token(&json!({ "exp": exp })), NOW),
            Err(JwtError::Malformed("exp is not a non-negative number")),
            "{exp}"
        );
    }
    let mut s = settings(&[Algorithm::HS256]);
    s.require_exp = false;
    let lax = verifier_with(KeySet::from_hmac_secret(Some("hs-1"), SECRET).unwrap(), s);
    assert_eq!(
        lax.verify(&hs_token(&json!({ "sub": "a" })), NOW)
            .unwrap()
            .expires_at,
        None
    );
}

#[test]
fn nbf_in_the_future_is_refused() {
    let verifier = hs_verifier();
    let at = |nbf: u64| {
        verifier
            .verify(&hs_token(&json!({ "exp": NOW + 600, "nbf": nbf })), NOW)
            .map(|_| ())
    };
    assert_eq!(at(NOW + 61), Err(JwtError::NotYetValid));
    assert_eq!(at(NOW + 60), Ok(()), "within leeway");
    assert_eq!(at(NOW - 10), Ok(()));
    assert_eq!(
        verifier.verify(&hs_token(&json!({ "exp": NOW + 600, "nbf": "soon" })), NOW),
        Err(JwtError::Malformed("nbf is not a non-negative number"))
    );
}

#[test]
fn issuer_must_match_exactly() {
    let mut s = settings(&[Algorithm::HS256]);
    s.issuer = Some("https://issuer.example".into());
    let verifier = verifier_with(KeySet::from_hmac_secret(Some("hs-1"), SECRET).unwrap(), s);
    let with = |iss: Value| {
        verifier
            .verify(&hs_token(&json!({ "exp": NOW + 60, "iss": iss })), NOW)
            .map(|_| ())
    };
    assert_eq!(with(json!("https://issuer.example")), Ok(()));
    assert_eq!(
        with(json!("https://evil.example")),
        Err(JwtError::WrongIssuer)
    );
    assert_eq!(
        with(json!("https://issuer.example/")),
        Err(JwtError::WrongIssuer)
    );
    assert_eq!(
        with(json!(["https://issuer.example"])),
        Err(JwtError::WrongIssuer)
    );
    assert_eq!(
        verifier.verify(&hs_token(&json!({ "exp": NOW + 60 })), NOW),
        Err(JwtError::MissingClaim("iss"))
    );
}

#[test]
fn audience_string_or_array_must_contain_a_configured_one() {
    let mut s = settings(&[Algorithm::HS256]);
    s.audiences = vec!["api".into(), "admin".into()];
    let verifier = verifier_with(KeySet::from_hmac_secret(Some("hs-1"), SECRET).unwrap(), s);
    let with = |aud: Value| {
        verifier
            .verify(&hs_token(&json!({ "exp": NOW + 60, "aud": aud })), NOW)
            .map(|_| ())
    };
    assert_eq!(with(json!("api")), Ok(()));
    assert_eq!(with(json!("web")), Err(JwtError::WrongAudience));
    assert_eq!(with(json!(["web", "admin"])), Ok(()));
    assert_eq!(with(json!(["web", "mobile"])), Err(JwtError::WrongAudience));
    assert_eq!(with(json!([])), Err(JwtError::WrongAudience));
    assert_eq!(with(json!("API")), Err(JwtError::WrongAudience));
    let malformed = Err(JwtError::Malformed(
        "aud is not a string or array of strings",
    ));
    assert_eq!(with(json!(5)), malformed);
    assert_eq!(with(json!(["api", 5])), malformed);
    assert_eq!(
        verifier.verify(&hs_token(&json!({ "exp": NOW + 60 })), NOW),
        Err(JwtError::MissingClaim("aud"))
    );
    // Without configured audiences, aud is not checked.
    assert!(hs_verifier()
        .verify(&hs_token(&json!({ "exp": NOW + 60, "aud": "web" })), NOW)
        .is_ok());
}

#[test]
fn tampering_breaks_the_signature() {
    for alg in [
        Algorithm::RS256,
        Algorithm::ES256,
        Algorithm::EdDSA,
        Algorithm::HS256,
    ] {
        let signer = signer(alg);
        let verifier = verifier_for(signer);
        let token = signer.sign(&claims()).unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        let admin = json!({ "sub": "admin", "exp": NOW + 600, "scope": "read write" });
        let payload = format!(
            "{}.{}.{}",
            parts[0],
            b64(admin.to_string().as_bytes()),
            parts[2]
        );
        assert_eq!(
            verifier.verify(&payload, NOW),
            Err(JwtError::BadSignature),
            "{alg} payload"
        );
        let header = json!({ "alg": alg.as_str(), "typ": "JWS", "kid": signer.kid() });
        let header = format!(
            "{}.{}.{}",
            b64(header.to_string().as_bytes()),
            parts[1],
            parts[2]
        );
        assert_eq!(
            verifier.verify(&header, NOW),
            Err(JwtError::BadSignature),
            "{alg} header"
        );
        let mut signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        signature[0] ^= 1;
        let flipped = format!("{}.{}.{}", parts[0], parts[1], b64(&signature));
        assert_eq!(
            verifier.verify(&flipped, NOW),
            Err(JwtError::BadSignature),
            "{alg} signature"
        );
        let empty = format!("{}.{}.", parts[0], parts[1]);
        assert_eq!(
            verifier.verify(&empty, NOW),
            Err(JwtError::BadSignature),
            "{alg} empty signature"
        );
    }
}

#[test]
fn duplicate_claims_and_critical_headers_are_refused() {
    let verifier = hs_verifier();
    let header = b64(br#"{"alg":"HS256","kid":"hs-1"}"#);
    let payload = b64(br#"{"sub":"alice","exp":1700000600,"sub":"admin"}"#);
    let message = format!("{header}.{payload}");
    let key = jsonwebtoken::EncodingKey::from_secret(SECRET);
    let signer = (jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.signer_factory)(
        &jsonwebtoken::Algorithm::HS256,
        &key,
    )
    .unwrap();
    let token = format!(
        "{message}.{}",
        b64(&signer.try_sign(message.as_bytes()).unwrap())
    );
    assert_eq!(
        verifier.verify(&token, NOW),
        Err(JwtError::Malformed("the payload is not a JSON object"))
    );

    let crit = forge_hs256(
        &json!({ "alg": "HS256", "kid": "hs-1", "crit": ["b64"], "b64": false }),
        &claims(),
        SECRET,
    );
    assert_eq!(
        verifier.verify(&crit, NOW),
        Err(JwtError::Malformed(
            "critical header extensions are not supported"
        ))
    );
    let array = forge_hs256(
        &json!({ "alg": "HS256", "kid": "hs-1" }),
        &json!([1, 2]),
        SECRET,
    );
    assert_eq!(
        verifier.verify(&array, NOW),
        Err(JwtError::Malformed("the payload is not a JSON object"))
    );
}

#[test]
fn cache_hits_return_the_same_claims_and_other_tokens_never_hit() {
    let verifier = hs_verifier();
    let alice = hs_token(&json!({ "sub": "alice", "exp": NOW + 600 }));
    let bob = hs_token(&json!({ "sub": "bob", "exp": NOW + 600 }));
    let first = verifier.verify_cached(&alice, NOW).unwrap();
    let again = verifier.verify_cached(&alice, NOW + 1).unwrap();
    assert!(Arc::ptr_eq(&first, &again), "second call is a cache hit");
    assert_eq!(again.claims["sub"], "alice");
    let other = verifier.verify_cached(&bob, NOW).unwrap();
    assert!(!Arc::ptr_eq(&first, &other));
    assert_eq!(other.claims["sub"], "bob");
    assert_eq!(verifier.cache().unwrap().len(), 2);
    // A tampered variant of a cached token is verified, not served.
    let mut tampered = alice.clone();
    tampered.push('A');
    assert!(verifier.verify_cached(&tampered, NOW).is_err());
    let prefix = &alice[..alice.len() - 1];
    assert!(verifier.verify_cached(prefix, NOW).is_err());
}

#[test]
fn cache_never_serves_past_exp() {
    let verifier = hs_verifier(); // leeway 60 s
    let token = hs_token(&json!({ "sub": "alice", "exp": NOW + 10 }));
    let cached = verifier.verify_cached(&token, NOW).unwrap();
    let cache = verifier.cache().unwrap();
    let key_set = verifier.key_store().load().id();
    assert!(cache.get(&token, key_set, NOW + 9).is_some());
    assert!(
        cache.get(&token, key_set, NOW + 10).is_none(),
        "served at exp"
    );
    // Within the leeway the token is still accepted, by a full verification.
    let late = verifier.verify_cached(&token, NOW + 30).unwrap();
    assert!(!Arc::ptr_eq(&cached, &late));
    assert!(
        cache.get(&token, key_set, NOW + 30).is_none(),
        "cached past exp"
    );
    // Beyond it, the cache does not rescue it.
    assert_eq!(
        verifier.verify_cached(&token, NOW + 100).map(|_| ()),
        Err(JwtError::Expired)
    );
}

#[test]
fn cache_ttl_bounds_tokens_without_exp() {
    let mut s = settings(&[Algorithm::HS256]);
    s.require_exp = false;
    s.cache_max_ttl = Duration::from_secs(30);
    let verifier = verifier_with(KeySet::from_hmac_secret(Some("hs-1"), SECRET).unwrap(), s);
    let token = hs_token(&json!({ "sub": "alice" }));
    let first = verifier.verify_cached(&token, NOW).unwrap();
    assert!(Arc::ptr_eq(
        &first,
        &verifier.verify_cached(&token, NOW + 29).unwrap()
    ));
    assert!(!Arc::ptr_eq(
        &first,
        &verifier.verify_cached(&token, NOW + 30).unwrap()
    ));
}

#[test]
fn early_tokens_are_not_cached() {
    let verifier = hs_verifier();
    let token = hs_token(&json!({ "sub": "alice", "exp": NOW + 600, "nbf": NOW + 30 }));
    assert!(verifier.verify_cached(&token, NOW).is_ok(), "within leeway");
    assert_eq!(verifier.cache().unwrap().len(), 0);
    let token = hs_token(&json!({ "sub": "alice", "exp": NOW + 600, "nbf": NOW + 100 }));
    assert_eq!(
        verifier.verify_cached(&token, NOW).map(|_| ()),
        Err(JwtError::NotYetValid)
    );
    assert_eq!(verifier.cache().unwrap().len(), 0);
}

#[test]
fn key_rotation_invalidates_cached_tokens() {
    let verifier = hs_verifier();
    let token = hs_token(&claims());
    assert!(verifier.verify_cached(&token, NOW).is_ok());
    verifier
        .key_store()
        .replace(KeySet::from_hmac_secret(Some("hs-2"), &[9; 32]).unwrap());
    assert_eq!(
        verifier.verify_cached(&token, NOW).map(|_| ()),
        Err(JwtError::UnknownKid(Some("hs-1".into())))
    );
    verifier
        .key_store()
        .replace(KeySet::from_hmac_secret(Some("hs-1"), &[9; 32]).unwrap());
    assert_eq!(
        verifier.verify_cached(&token, NOW).map(|_| ()),
        Err(JwtError::BadSignature)
    );
}

#[test]
fn cache_is_bounded_and_shared_across_threads() {
    let mut s = settings(&[Algorithm::HS256]);
    s.cache_capacity = 32;
    let verifier = verifier_with(KeySet::from_hmac_secret(Some("hs-1"), SECRET).unwrap(), s);
    let tokens: Vec<String> = (0..200)
        .map(|i| hs_token(&json!({ "sub": i, "exp": NOW + 600 })))
        .collect();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (verifier, tokens) = (&verifier, &tokens);
            scope.spawn(move || {
                for (i, token) in tokens.iter().enumerate().skip(t) {
                    assert_eq!(
                        verifier.verify_cached(token, NOW).unwrap().claims["sub"],
                        json!(i)
                    );
                }
            });
        }
    });
    let cache = verifier.cache().unwrap();
    assert!(
        cache.len() <= cache.capacity() && cache.capacity() == 32,
        "{}",
        cache.len()
    );
    // Disabled cache still verifies.
    let mut off = settings(&[Algorithm::HS256]);
    off.cache_capacity = 0;
    let verifier = verifier_with(KeySet::from_hmac_secret(Some("hs-1"), SECRET).unwrap(), off);
    assert!(verifier.cache().is_none());
    assert!(verifier.verify_cached(&tokens[0], NOW).is_ok());
}

fn verified(claims: Value) -> Verified {
    let Value::Object(claims) = claims else {
        panic!("not an object")
    };
    Verified {
        claims,
        expires_at: None,
        not_before: None,
        algorithm: Algorithm::HS256,
        key_id: None,
    }
}

#[test]
fn scopes_from_scope_or_scp() {
    let scopes = |claims: Value| {
        verified(claims)
            .scopes()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        scopes(json!({ "scope": "read  write admin " })),
        ["read", "write", "admin"]
    );
    assert_eq!(
        scopes(json!({ "scp": ["read", "write", 5] })),
        ["read", "write"]
    );
    assert_eq!(scopes(json!({ "scp": "read write" })), ["read", "write"]);
    assert_eq!(scopes(json!({ "scope": "a", "scp": ["b"] })), ["a"]);
    assert_eq!(scopes(json!({ "scope": 5, "scp": ["b"] })), ["b"]);
    assert!(scopes(json!({ "sub": "x" })).is_empty());
    assert!(scopes(json!({ "scope": "" })).is_empty());
}

#[test]
fn claims_as_header_values_refuse_control_characters() {
    let v = verified(json!({
        "sub": "alice", "n": 42, "f": 1.5, "admin": true, "groups": ["a", "b c"],
        "obj": { "a": 1 }, "null": null, "mixed": ["a", 1],
        "crlf": "a\r\nX-Admin: true", "lf": "a\nb", "cr": "a\rb", "nul": "a\0b", "tab": "a\tb", "del": "a\u{7f}",
        "arr_crlf": ["ok", "x\r\ny"],
    }));
    assert_eq!(v.claim_as_header_value("sub").as_deref(), Some("alice"));
    assert_eq!(v.claim_as_header_value("n").as_deref(), Some("42"));
    assert_eq!(v.claim_as_header_value("f").as_deref(), Some("1.5"));
    assert_eq!(v.claim_as_header_value("admin").as_deref(), Some("true"));
    assert_eq!(v.claim_as_header_value("groups").as_deref(), Some("a,b c"));
    for refused in [
        "obj", "null", "mixed", "crlf", "lf", "cr", "nul", "tab", "del", "arr_crlf", "absent",
    ] {
        assert_eq!(v.claim_as_header_value(refused), None, "{refused}");
    }
}

#[test]
fn error_texts_are_safe_for_www_authenticate() {
    let malformed = [
        "a token has three dot-separated segments",
        "the header is not base64url",
        "the header is not a JSON object with an alg",
        "critical header extensions are not supported",
        "the payload is not base64url",
        "the signature is not base64url",
        "the payload is not a JSON object",
        "exp is not a non-negative number",
        "nbf is not a non-negative number",
        "aud is not a string or array of strings",
    ];
    let errors = malformed.map(JwtError::Malformed).into_iter().chain([
        JwtError::TooLarge,
        JwtError::AlgorithmNotAllowed,
        JwtError::UnknownKid(Some("evil\"kid\r\n".into())),
        JwtError::KeyMismatch,
        JwtError::BadSignature,
        JwtError::Expired,
        JwtError::NotYetValid,
        JwtError::WrongIssuer,
        JwtError::WrongAudience,
        JwtError::MissingClaim("exp"),
        JwtError::MissingClaim("iss"),
        JwtError::MissingClaim("aud"),
    ]);
    for error in errors {
        let text = error.to_string();
        assert!(
            !text.contains(['"', '\\']) && !text.chars().any(char::is_control),
            "{text}"
        );
        assert!(!text.contains("evil"), "{text}");
        assert_eq!(error.error_code(), "invalid_token");
        assert!(!error.label().is_empty());
    }
}

#[test]
fn algorithm_names_parse_exactly() {
    for alg in Algorithm::ALL {
        assert_eq!(alg.as_str().parse::<Algorithm>(), Ok(alg));
        assert!(alg.key_type().supports(alg));
    }
    assert!("rs256".parse::<Algorithm>().is_err());
    assert!("HS512".parse::<Algorithm>().is_err());
    assert!("none"
        .parse::<Algorithm>()
        .unwrap_err()
        .to_string()
        .contains("never"));
    let set = AlgorithmSet::parse(["RS256", "ES256"]).unwrap();
    assert!(
        set.contains(Algorithm::RS256)
            && set.contains(Algorithm::ES256)
            && !set.contains(Algorithm::HS256)
    );
    assert!(!KeyType::Rsa.supports(Algorithm::HS256) && !KeyType::Oct.supports(Algorithm::RS256));
    assert!(
        !KeyType::EcP256.supports(Algorithm::ES384) && !KeyType::EcP384.supports(Algorithm::ES256)
    );
    let err = JwtVerifier::new(
        VerifierSettings::new([]),
        Arc::new(KeyStore::new(KeySet::empty())),
    )
    .unwrap_err();
    assert_eq!(err, SettingsError::NoAlgorithms);
}

fn jwk_problem(jwks: &str) -> JwkProblem {
    match KeySet::from_jwks(jwks.as_bytes()) {
        Err(KeyError::Jwk { problem, .. }) => problem,
        other => panic!("{jwks}: {other:?}"),
    }
}

/// The public JWK of `alg`'s test signer, as an editable object.
fn jwk_of(alg: Algorithm) -> serde_json::Map<String, Value> {
    match signer(alg).jwk() {
        Value::Object(jwk) => jwk,
        _ => unreachable!(),
    }
}

fn jwks_with(jwk: serde_json::Map<String, Value>) -> String {
    json!({ "keys": [jwk] }).to_string()
}

#[test]
fn jwks_errors_are_precise() {
    assert!(matches!(
        KeySet::from_jwks(b"not json"),
        Err(KeyError::Json(_))
    ));
    assert!(matches!(
        KeySet::from_jwks(b"{\"keys\":{}}"),
        Err(KeyError::Json(_))
    ));
    assert!(matches!(KeySet::from_jwks(b"[]"), Err(KeyError::Json(_))));

    let set = |alg: Algorithm, field: &str, value: Value| {
        let mut jwk = jwk_of(alg);
        jwk.insert(field.into(), value);
        jwk_problem(&jwks_with(jwk))
    };
    let remove = |alg: Algorithm, field: &str| {
        let mut jwk = jwk_of(alg);
        jwk.remove(field);
        jwk_problem(&jwks_with(jwk))
    };
    assert_eq!(
        set(Algorithm::RS256, "kty", "XYZ".into()),
        JwkProblem::UnsupportedKeyType("XYZ".into())
    );
    assert_eq!(
        remove(Algorithm::RS256, "kty"),
        JwkProblem::MissingField("kty")
    );
    assert_eq!(remove(Algorithm::RS256, "n"), JwkProblem::MissingField("n"));
    assert_eq!(
        set(Algorithm::ES256, "crv", "P-521".into()),
        JwkProblem::UnsupportedCurve("P-521".into())
    );
    assert_eq!(
        set(Algorithm::EdDSA, "crv", "X25519".into()),
        JwkProblem::UnsupportedCurve("X25519".into())
    );
    for (alg, field) in [
        (Algorithm::RS256, "n"),
        (Algorithm::RS256, "e"),
        (Algorithm::ES256, "x"),
        (Algorithm::ES256, "y"),
        (Algorithm::EdDSA, "x"),
        (Algorithm::HS256, "k"),
    ] {
        assert_eq!(
            set(alg, field, "a!b".into()),
            JwkProblem::BadBase64(field),
            "{alg} {field}"
        );
    }
    assert_eq!(
        set(Algorithm::RS256, "d", "AQAB".into()),
        JwkProblem::PrivateKeyMaterial
    );
    assert_eq!(
        set(Algorithm::ES256, "d", "AQAB".into()),
        JwkProblem::PrivateKeyMaterial
    );
    assert_eq!(
        set(Algorithm::RS256, "alg", "ES256".into()),
        JwkProblem::AlgorithmMismatch {
            alg: Algorithm::ES256,
            key_type: KeyType::Rsa
        }
    );
    assert_eq!(
        set(Algorithm::HS256, "alg", "none".into()),
        JwkProblem::UnsupportedAlgorithm("none".into())
    );
    assert!(matches!(
        set(Algorithm::HS256, "k", b64(b"short").into()),
        JwkProblem::WeakKey(_)
    ));
    // A 1024-bit modulus.
    let small_n = b64(&[&[0xc3u8][..], &[0x5a; 126], &[0x01]].concat());
    assert!(matches!(
        set(Algorithm::RS256, "n", small_n.into()),
        JwkProblem::WeakKey(_)
    ));
    // Coordinates of the right size that are not a curve point.
    assert!(matches!(
        set(Algorithm::ES256, "y", b64(&[1; 32]).into()),
        JwkProblem::InvalidKey(_)
    ));
    assert!(matches!(
        set(Algorithm::ES384, "x", b64(&[1; 32]).into()),
        JwkProblem::InvalidKey(_)
    ));
    assert!(matches!(
        set(Algorithm::EdDSA, "x", b64(&[1; 31]).into()),
        JwkProblem::InvalidKey(_)
    ));

    // RSA exponents ring would refuse, and an even modulus.
    for e in [b64(&[1]), b64(&[2]), b64(&[1, 0, 0]), b64(&[1; 6])] {
        assert!(matches!(
            set(Algorithm::RS256, "e", e.into()),
            JwkProblem::InvalidKey(_)
        ));
    }
    let mut even = URL_SAFE_NO_PAD
        .decode(jwk_of(Algorithm::RS256)["n"].as_str().unwrap())
        .unwrap();
    *even.last_mut().unwrap() &= 0xfe;
    assert!(matches!(
        set(Algorithm::RS256, "n", b64(&even).into()),
        JwkProblem::InvalidKey(_)
    ));

    let rs = jwk_of(Algorithm::RS256);
    assert_eq!(
        jwk_problem(&json!({ "keys": [rs.clone(), rs] }).to_string()),
        JwkProblem::DuplicateKid
    );
}

#[test]
fn jwk_integers_with_leading_zeros_are_accepted() {
    let mut jwk = jwk_of(Algorithm::RS256);
    for field in ["n", "e"] {
        let bytes = URL_SAFE_NO_PAD
            .decode(jwk[field].as_str().unwrap())
            .unwrap();
        jwk.insert(field.into(), b64(&[&[0u8, 0][..], &bytes].concat()).into());
    }
    let verifier = verifier_with(
        KeySet::from_jwks(jwks_with(jwk).as_bytes()).unwrap(),
        settings(&[Algorithm::RS256]),
    );
    assert!(verifier
        .verify(&signer(Algorithm::RS256).sign(&claims()).unwrap(), NOW)
        .is_ok());
}

#[test]
fn jwks_skips_encryption_keys_and_lenient_mode_keeps_good_keys() {
    let mut enc = jwk_of(Algorithm::RS256);
    enc.insert("use".into(), "enc".into());
    enc.insert("kid".into(), "enc-1".into());
    let mut wrap = jwk_of(Algorithm::ES256);
    wrap.insert("key_ops".into(), json!(["wrapKey"]));
    let mut bad = jwk_of(Algorithm::ES384);
    bad.insert("crv".into(), "P-521".into());
    let good = jwk_of(Algorithm::EdDSA);
    let doc = json!({ "keys": [enc, wrap, good, bad] }).to_string();
    let (keys, problems) = KeySet::from_jwks_lenient(doc.as_bytes()).unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys.keys()[0].key_type(), KeyType::Ed25519);
    assert_eq!(problems.len(), 1);
    assert!(matches!(
        &problems[0],
        KeyError::Jwk {
            index: 3,
            problem: JwkProblem::UnsupportedCurve(_),
            ..
        }
    ));
    assert!(problems[0].to_string().contains("P-521"));
    assert!(matches!(
        KeySet::from_jwks(doc.as_bytes()),
        Err(KeyError::Jwk { index: 3, .. })
    ));
    assert_eq!(
        KeySet::from_hmac_secret(None, b"too short").unwrap_err(),
        KeyError::WeakSecret { len: 9 }
    );
}
