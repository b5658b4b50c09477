//! The verified-token cache as the verifier uses it: hits, expiry, TTL,
//! key rotation and its bound under threads.

use std::time::Duration;

use super::*;

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
