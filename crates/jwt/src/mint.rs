//! Key generation and token signing, for tests, benchmarks and `sluice token`.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::EncodingKey;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use rand_core::{OsRng, RngCore};
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey};
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, LineEnding};
use rsa::traits::PublicKeyParts;
use serde_json::{json, Map, Value};
use zeroize::Zeroizing;

use crate::alg::{Algorithm, KeyType};
use crate::keys::{b64url, KeyError, KeySet, MIN_HMAC_SECRET_BYTES, MIN_RSA_BITS};

/// Bits of the RSA keys [`generate_key`] makes.
pub const GENERATED_RSA_BITS: usize = 2048;

/// Signs tokens with one private key (or HMAC secret) under one `kid`.
pub struct Signer {
    alg: Algorithm,
    kid: String,
    key: EncodingKey,
    /// The public JWK (for HS256: the secret itself, as `k`).
    jwk: Map<String, Value>,
}

impl Signer {
    /// Loads a private key file: PKCS#8 (`BEGIN PRIVATE KEY`) for every
    /// algorithm, also PKCS#1 (`BEGIN RSA PRIVATE KEY`) for RSA and SEC1
    /// (`BEGIN EC PRIVATE KEY`) for ECDSA. HS256 has no PEM form: use
    /// [`Signer::from_hmac_secret`].
    pub fn from_private_pem(alg: Algorithm, kid: &str, pem: &str) -> Result<Signer, KeyError> {
        match alg.key_type() {
            KeyType::Rsa => {
                let key = rsa::RsaPrivateKey::from_pkcs8_pem(pem)
                    .or_else(|_| rsa::RsaPrivateKey::from_pkcs1_pem(pem))
                    .map_err(|_| pem_error(alg, "an RSA private key (PKCS#8 or PKCS#1 PEM)"))?;
                Signer::from_rsa(alg, kid, &key)
            }
            KeyType::EcP256 => {
                let key = p256::SecretKey::from_pkcs8_pem(pem)
                    .or_else(|_| p256::SecretKey::from_sec1_pem(pem))
                    .map_err(|_| pem_error(alg, "a P-256 private key (PKCS#8 or SEC1 PEM)"))?;
                Signer::from_p256(kid, &key)
            }
            KeyType::EcP384 => {
                let key = p384::SecretKey::from_pkcs8_pem(pem)
                    .or_else(|_| p384::SecretKey::from_sec1_pem(pem))
                    .map_err(|_| pem_error(alg, "a P-384 private key (PKCS#8 or SEC1 PEM)"))?;
                Signer::from_p384(kid, &key)
            }
            KeyType::Ed25519 => {
                let key = ed25519_dalek::SigningKey::from_pkcs8_pem(pem)
                    .map_err(|_| pem_error(alg, "an Ed25519 private key (PKCS#8 PEM)"))?;
                Signer::from_ed25519(kid, &key)
            }
            KeyType::Oct => Err(KeyError::Pem(
                "HS256 uses a shared secret, not a PEM key".into(),
            )),
        }
    }

    /// An HS256 signer with a shared secret (at least 32 bytes).
    pub fn from_hmac_secret(kid: &str, secret: &[u8]) -> Result<Signer, KeyError> {
        if secret.len() < MIN_HMAC_SECRET_BYTES {
            return Err(KeyError::WeakSecret { len: secret.len() });
        }
        let jwk = jwk_members(KeyType::Oct, [("k", b64url(secret))]);
        Ok(Signer::assemble(
            Algorithm::HS256,
            kid,
            EncodingKey::from_secret(secret),
            jwk,
        ))
    }

    fn from_rsa(alg: Algorithm, kid: &str, key: &rsa::RsaPrivateKey) -> Result<Signer, KeyError> {
        let bits = key.n().bits();
        if bits < MIN_RSA_BITS {
            return Err(KeyError::Pem(format!(
                "RSA key is {bits} bits, at least {MIN_RSA_BITS} required"
            )));
        }
        let der = key
            .to_pkcs1_der()
            .map_err(|e| KeyError::Crypto(e.to_string()))?;
        let jwk = jwk_members(
            KeyType::Rsa,
            [
                ("n", b64url(&key.n().to_bytes_be())),
                ("e", b64url(&key.e().to_bytes_be())),
            ],
        );
        Ok(Signer::assemble(
            alg,
            kid,
            EncodingKey::from_rsa_der(der.as_bytes()),
            jwk,
        ))
    }

    fn from_p256(kid: &str, key: &p256::SecretKey) -> Result<Signer, KeyError> {
        let point = key.public_key().to_encoded_point(false);
        let (x, y) = point.as_bytes()[1..].split_at(32);
        let jwk = jwk_members(
            KeyType::EcP256,
            [("crv", "P-256".into()), ("x", b64url(x)), ("y", b64url(y))],
        );
        let der = key
            .to_pkcs8_der()
            .map_err(|e| KeyError::Crypto(e.to_string()))?;
        Ok(Signer::assemble(
            Algorithm::ES256,
            kid,
            EncodingKey::from_ec_der(der.as_bytes()),
            jwk,
        ))
    }

    fn from_p384(kid: &str, key: &p384::SecretKey) -> Result<Signer, KeyError> {
        let point = key.public_key().to_encoded_point(false);
        let (x, y) = point.as_bytes()[1..].split_at(48);
        let jwk = jwk_members(
            KeyType::EcP384,
            [("crv", "P-384".into()), ("x", b64url(x)), ("y", b64url(y))],
        );
        let der = key
            .to_pkcs8_der()
            .map_err(|e| KeyError::Crypto(e.to_string()))?;
        Ok(Signer::assemble(
            Algorithm::ES384,
            kid,
            EncodingKey::from_ec_der(der.as_bytes()),
            jwk,
        ))
    }

    fn from_ed25519(kid: &str, key: &ed25519_dalek::SigningKey) -> Result<Signer, KeyError> {
        let x = b64url(key.verifying_key().as_bytes());
        let jwk = jwk_members(KeyType::Ed25519, [("crv", "Ed25519".into()), ("x", x)]);
        let der = key
            .to_pkcs8_der()
            .map_err(|e| KeyError::Crypto(e.to_string()))?;
        Ok(Signer::assemble(
            Algorithm::EdDSA,
            kid,
            EncodingKey::from_ed_der(der.as_bytes()),
            jwk,
        ))
    }

    fn assemble(
        alg: Algorithm,
        kid: &str,
        key: EncodingKey,
        mut jwk: Map<String, Value>,
    ) -> Signer {
        jwk.insert("kid".into(), kid.into());
        jwk.insert("alg".into(), alg.as_str().into());
        jwk.insert("use".into(), "sig".into());
        Signer {
            alg,
            kid: kid.to_owned(),
            key,
            jwk,
        }
    }

    /// The algorithm every token is signed with.
    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }

    /// The `kid` put in every token header.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The verification key as a JWK (`kty`, `kid`, `alg`, `use: "sig"` and
    /// the public parameters). For HS256 this holds the secret (`k`).
    pub fn jwk(&self) -> Value {
        Value::Object(self.jwk.clone())
    }

    /// A JWKS document (`{"keys":[...]}`) with this key, for a verifier.
    /// For HS256 it holds the secret, so it must be kept as private as one.
    pub fn jwks_json(&self) -> String {
        json!({ "keys": [self.jwk()] }).to_string()
    }

    /// The key set a verifier of this signer's tokens needs.
    pub fn key_set(&self) -> Result<KeySet, KeyError> {
        KeySet::from_jwks(self.jwks_json().as_bytes())
    }

    /// Signs `claims` (a JSON object) into a compact JWS with
    /// `{"alg", "typ": "JWT", "kid"}` as header.
    pub fn sign(&self, claims: &Value) -> Result<String, KeyError> {
        if !claims.is_object() {
            return Err(KeyError::ClaimsNotObject);
        }
        let header = json!({ "alg": self.alg.as_str(), "typ": "JWT", "kid": self.kid });
        let mut token = URL_SAFE_NO_PAD.encode(header.to_string());
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(claims.to_string(), &mut token);
        let signer = (jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.signer_factory)(
            &self.alg.to_jsonwebtoken(),
            &self.key,
        )
        .map_err(|e| KeyError::Crypto(e.to_string()))?;
        let signature = signer
            .try_sign(token.as_bytes())
            .map_err(|e| KeyError::Crypto(e.to_string()))?;
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(signature, &mut token);
        Ok(token)
    }
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("alg", &self.alg)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// A freshly generated key pair (or HMAC secret) with its `kid`.
pub struct GeneratedKey {
    signer: Signer,
    private_pem: Option<Zeroizing<String>>,
}

impl GeneratedKey {
    /// The signer for this key.
    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// The public JWKS document (see [`Signer::jwks_json`]; for HS256 it is
    /// the secret).
    pub fn jwks_json(&self) -> String {
        self.signer.jwks_json()
    }

    /// The private key as PKCS#8 PEM, loadable by [`Signer::from_private_pem`]
    /// and by OpenSSL; `None` for HS256, whose secret is the JWKS `k`.
    pub fn private_pem(&self) -> Option<&str> {
        self.private_pem.as_ref().map(|pem| pem.as_str())
    }

    /// Signs `claims` (see [`Signer::sign`]).
    pub fn sign(&self, claims: &Value) -> Result<String, KeyError> {
        self.signer.sign(claims)
    }

    /// The key set that verifies this key's tokens.
    pub fn key_set(&self) -> Result<KeySet, KeyError> {
        self.signer.key_set()
    }
}

impl fmt::Debug for GeneratedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeneratedKey")
            .field("signer", &self.signer)
            .finish_non_exhaustive()
    }
}

/// Generates a new key for `alg` from the OS random source: RSA 2048 for
/// RS*/PS* (slow in debug builds), P-256/P-384, Ed25519, or a 32-byte HMAC
/// secret for HS256.
pub fn generate_key(alg: Algorithm, kid: &str) -> Result<GeneratedKey, KeyError> {
    let crypto = |e: &dyn fmt::Display| KeyError::Crypto(e.to_string());
    let (signer, pem) = match alg.key_type() {
        KeyType::Rsa => {
            let key =
                rsa::RsaPrivateKey::new(&mut OsRng, GENERATED_RSA_BITS).map_err(|e| crypto(&e))?;
            let pem = key.to_pkcs8_pem(LineEnding::LF).map_err(|e| crypto(&e))?;
            (Signer::from_rsa(alg, kid, &key)?, Some(pem))
        }
        KeyType::EcP256 => {
            let key = p256::SecretKey::random(&mut OsRng);
            let pem = key.to_pkcs8_pem(LineEnding::LF).map_err(|e| crypto(&e))?;
            (Signer::from_p256(kid, &key)?, Some(pem))
        }
        KeyType::EcP384 => {
            let key = p384::SecretKey::random(&mut OsRng);
            let pem = key.to_pkcs8_pem(LineEnding::LF).map_err(|e| crypto(&e))?;
            (Signer::from_p384(kid, &key)?, Some(pem))
        }
        KeyType::Ed25519 => {
            let key = ed25519_dalek::SigningKey::generate(&mut OsRng);
            let pem = key.to_pkcs8_pem(LineEnding::LF).map_err(|e| crypto(&e))?;
            (Signer::from_ed25519(kid, &key)?, Some(pem))
        }
        KeyType::Oct => {
            let mut secret = Zeroizing::new([0u8; 32]);
            OsRng.try_fill_bytes(&mut *secret).map_err(|e| crypto(&e))?;
            (Signer::from_hmac_secret(kid, &*secret)?, None)
        }
    };
    Ok(GeneratedKey {
        signer,
        private_pem: pem,
    })
}

fn pem_error(alg: Algorithm, expected: &str) -> KeyError {
    KeyError::Pem(format!("{alg} needs {expected}"))
}

fn jwk_members<const N: usize>(
    key_type: KeyType,
    params: [(&str, String); N],
) -> Map<String, Value> {
    let kty = match key_type {
        KeyType::Rsa => "RSA",
        KeyType::EcP256 | KeyType::EcP384 => "EC",
        KeyType::Ed25519 => "OKP",
        KeyType::Oct => "oct",
    };
    let mut jwk = Map::new();
    jwk.insert("kty".into(), kty.into());
    for (name, value) in params {
        jwk.insert(name.into(), value.into());
    }
    jwk
}
