//! Per-token cost of verification, cold (full signature check) and warm
//! (cache hit), for each algorithm: `cargo run --release -p jwt --example jwt_bench`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use jwt::{generate_key, unix_now, Algorithm, JwtVerifier, KeyStore, VerifierSettings};
use serde_json::json;

fn per_op(iterations: u32, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    start.elapsed().as_nanos() as f64 / f64::from(iterations)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let now = unix_now();
    let claims = json!({
        "iss": "https://issuer.example", "aud": "api", "sub": "user-1234567890",
        "exp": now + 3600, "iat": now, "scope": "pets:read pets:write", "tenant": "acme",
    });
    println!(
        "{:<6} {:>6} {:>12} {:>12}",
        "alg", "bytes", "verify ns", "cached ns"
    );
    for alg in Algorithm::ALL {
        let key = generate_key(alg, "bench")?;
        let token = key.sign(&claims)?;
        let mut settings = VerifierSettings::new([alg]);
        settings.issuer = Some("https://issuer.example".into());
        settings.audiences = vec!["api".into()];
        let verifier = JwtVerifier::new(settings, Arc::new(KeyStore::new(key.key_set()?)))?;
        let cold = per_op(200, || {
            black_box(verifier.verify(black_box(&token), now).is_ok());
        });
        let warm = per_op(200_000, || {
            black_box(verifier.verify_cached(black_box(&token), now).is_ok());
        });
        println!(
            "{:<6} {:>6} {:>12.0} {:>12.0}",
            alg.as_str(),
            token.len(),
            cold,
            warm
        );
    }
    Ok(())
}
