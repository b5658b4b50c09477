//! Algorithm names and JWKS parsing: each unusable key refused with its
//! precise problem, encryption keys skipped, lenient mode keeping good keys.

use super::*;

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
