//! Minting: every algorithm round-trips, generated keys export usable PEM
//! and JWKS, and private keys of the wrong kind are refused.

use rsa::pkcs8::{DecodePrivateKey, LineEnding};

use super::*;

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
