//! Hostile tokens: `alg: none`, algorithm confusion, unknown or ambiguous
//! `kid`, malformed or oversize encodings, tampering, duplicate claims and
//! critical headers, each refused with its precise error.

use rsa::pkcs1::EncodeRsaPublicKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};

use super::*;

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
