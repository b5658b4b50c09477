//! `sluice token`: keys written, tokens signed, and the jwt verifier
//! accepting what it signs.

use std::{process::Command, sync::Arc};

fn sluice(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

#[test]
fn keys_then_sign_gives_a_token_the_verifier_accepts() {
    let dir = std::env::temp_dir().join(format!("sluice-token-{}", std::process::id()));
    let out = dir.to_str().expect("utf-8 temp dir");
    for alg in ["ES256", "HS256"] {
        let kid = format!("test-{}", alg.to_lowercase());
        let keys = sluice(&["token", "keys", "--alg", alg, "--kid", &kid, "--out", out]);
        assert!(keys.status.success(), "{keys:?}");
        let jwks = std::fs::read(dir.join("jwks.json")).expect("jwks.json written");
        let key_file = if alg == "HS256" {
            dir.join("jwks.json")
        } else {
            let pem = dir.join(format!("{kid}.key.pem"));
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                let mode = std::fs::metadata(&pem)
                    .expect("key written")
                    .permissions()
                    .mode();
                assert_eq!(
                    mode & 0o077,
                    0,
                    "the private key is readable by its owner only"
                );
            }
            pem
        };
        let signed = sluice(&[
            "token",
            "sign",
            "--key",
            key_file.to_str().expect("utf-8"),
            "--alg",
            alg,
            "--kid",
            &kid,
            "--claim",
            "sub=alice",
            "--claim",
            "scope=pets:read pets:write",
            "--claim",
            "level:=3",
            "--expires-in",
            "10m",
        ]);
        assert!(signed.status.success(), "{signed:?}");
        let token = String::from_utf8(signed.stdout).expect("utf-8");
        let keys = jwt::KeySet::from_jwks(&jwks).expect("a valid JWKS");
        let verifier = jwt::JwtVerifier::new(
            jwt::VerifierSettings::new([alg.parse().expect("alg")]),
            Arc::new(jwt::KeyStore::new(keys)),
        )
        .expect("verifier");
        let verified = verifier
            .verify(token.trim(), jwt::unix_now())
            .expect("the token verifies");
        assert_eq!(verified.claims["sub"], "alice");
        assert_eq!(verified.claims["level"], 3);
        assert!(verified.scopes().any(|s| s == "pets:write"));
        let exp = verified.expires_at.expect("exp set");
        assert!(exp > jwt::unix_now() + 500 && exp <= jwt::unix_now() + 600);
    }

    let bad = sluice(&["token", "keys", "--alg", "none", "--out", out]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--alg"));
    let _ = std::fs::remove_dir_all(&dir);
}
