//! Time and identity claims: `exp` (with leeway), `nbf`, `iss` and `aud`.

use std::time::Duration;

use super::*;

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
