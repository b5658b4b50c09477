//! JWKS documents: parsing each JWK into a validated [`Key`], refusing
//! private, weak or malformed keys with a precise [`JwkProblem`].

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use serde::Deserialize;

use super::{next_key_set_id, JwkProblem, Key, KeyError, KeySet, Material};
use super::{MAX_RSA_BITS, MIN_HMAC_SECRET_BYTES, MIN_RSA_BITS};
use crate::alg::{Algorithm, KeyType};

/// JWK members are base64url; padding is tolerated because some key
/// publishers emit it, but non-canonical trailing bits are not.
const JWK_B64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The JSON shape of a JWKS document.
#[derive(Deserialize)]
struct RawJwks {
    keys: Vec<serde_json::Value>,
}

/// The JWK members this crate reads; everything else is ignored.
#[derive(Deserialize)]
struct RawJwk {
    kty: Option<String>,
    kid: Option<String>,
    alg: Option<String>,
    #[serde(rename = "use")]
    use_: Option<String>,
    key_ops: Option<Vec<String>>,
    crv: Option<String>,
    n: Option<String>,
    e: Option<String>,
    x: Option<String>,
    y: Option<String>,
    k: Option<String>,
    d: Option<serde_json::Value>,
}

impl KeySet {
    /// Parses a JWKS document (`{"keys": [...]}`), refusing the whole
    /// document if any signature key in it is unusable: the strict choice
    /// for keys an operator configured by hand.
    ///
    /// Keys marked `"use": "enc"` or whose `key_ops` lack `"verify"` are
    /// skipped, as they are not meant for signatures.
    pub fn from_jwks(json: &[u8]) -> Result<KeySet, KeyError> {
        let (set, mut skipped) = KeySet::from_jwks_lenient(json)?;
        if skipped.is_empty() {
            Ok(set)
        } else {
            Err(skipped.swap_remove(0))
        }
    }

    /// Parses a JWKS document keeping every usable key and returning the
    /// problems with the others: for JWKS fetched from an identity provider,
    /// which may publish keys of types this crate does not support.
    /// Only a document that is not a JWKS at all is an error.
    pub fn from_jwks_lenient(json: &[u8]) -> Result<(KeySet, Vec<KeyError>), KeyError> {
        let raw: RawJwks =
            serde_json::from_slice(json).map_err(|e| KeyError::Json(e.to_string()))?;
        let mut keys: Vec<Key> = Vec::with_capacity(raw.keys.len());
        let mut problems = Vec::new();
        for (index, value) in raw.keys.into_iter().enumerate() {
            let jwk: RawJwk = match serde_json::from_value(value) {
                Ok(jwk) => jwk,
                Err(e) => {
                    problems.push(KeyError::Jwk {
                        index,
                        kid: None,
                        problem: JwkProblem::InvalidKey(e.to_string()),
                    });
                    continue;
                }
            };
            let kid = jwk.kid.clone();
            let problem = |problem| KeyError::Jwk {
                index,
                kid: kid.clone(),
                problem,
            };
            match parse_jwk(jwk) {
                Ok(None) => {}
                Ok(Some(key)) => {
                    if key.kid.is_some() && keys.iter().any(|other| other.kid == key.kid) {
                        problems.push(problem(JwkProblem::DuplicateKid));
                    } else {
                        keys.push(key);
                    }
                }
                Err(p) => problems.push(problem(p)),
            }
        }
        Ok((
            KeySet {
                id: next_key_set_id(),
                keys,
            },
            problems,
        ))
    }
}

fn b64_field(value: Option<&str>, field: &'static str) -> Result<Vec<u8>, JwkProblem> {
    let value = value.ok_or(JwkProblem::MissingField(field))?;
    JWK_B64
        .decode(value)
        .map_err(|_| JwkProblem::BadBase64(field))
}

/// Parses one JWK; `Ok(None)` for a key that is not for signatures.
fn parse_jwk(jwk: RawJwk) -> Result<Option<Key>, JwkProblem> {
    if jwk.use_.as_deref().is_some_and(|u| u != "sig") {
        return Ok(None);
    }
    if jwk
        .key_ops
        .as_ref()
        .is_some_and(|ops| !ops.iter().any(|op| op == "verify"))
    {
        return Ok(None);
    }
    let kty = jwk.kty.as_deref().ok_or(JwkProblem::MissingField("kty"))?;
    if jwk.d.is_some() {
        return Err(JwkProblem::PrivateKeyMaterial);
    }
    let (key_type, material) = match kty {
        "RSA" => {
            let n = b64_field(jwk.n.as_deref(), "n")?;
            let e = b64_field(jwk.e.as_deref(), "e")?;
            (KeyType::Rsa, rsa_material(&n, &e)?)
        }
        "EC" => {
            let crv = jwk.crv.as_deref().ok_or(JwkProblem::MissingField("crv"))?;
            let x = b64_field(jwk.x.as_deref(), "x")?;
            let y = b64_field(jwk.y.as_deref(), "y")?;
            let (key_type, len) = match crv {
                "P-256" => (KeyType::EcP256, 32),
                "P-384" => (KeyType::EcP384, 48),
                other => return Err(JwkProblem::UnsupportedCurve(other.to_owned())),
            };
            if x.len() != len || y.len() != len {
                return Err(JwkProblem::InvalidKey(format!(
                    "{crv} coordinates must be {len} bytes"
                )));
            }
            let mut point = Vec::with_capacity(1 + 2 * len);
            point.push(0x04);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            let on_curve = match key_type {
                KeyType::EcP256 => p256::PublicKey::from_sec1_bytes(&point).is_ok(),
                _ => p384::PublicKey::from_sec1_bytes(&point).is_ok(),
            };
            if !on_curve {
                return Err(JwkProblem::InvalidKey(format!("point is not on {crv}")));
            }
            (key_type, Material::Ec(point))
        }
        "OKP" => {
            let crv = jwk.crv.as_deref().ok_or(JwkProblem::MissingField("crv"))?;
            if crv != "Ed25519" {
                return Err(JwkProblem::UnsupportedCurve(crv.to_owned()));
            }
            let x = b64_field(jwk.x.as_deref(), "x")?;
            let bytes: [u8; 32] = x.as_slice().try_into().map_err(|_| {
                JwkProblem::InvalidKey("Ed25519 public key must be 32 bytes".into())
            })?;
            ed25519_dalek::VerifyingKey::from_bytes(&bytes)
                .map_err(|_| JwkProblem::InvalidKey("not an Ed25519 point".into()))?;
            (KeyType::Ed25519, Material::Ed25519(bytes))
        }
        "oct" => {
            let k = b64_field(jwk.k.as_deref(), "k")?;
            if k.len() < MIN_HMAC_SECRET_BYTES {
                return Err(JwkProblem::WeakKey(format!(
                    "HMAC secret is {} bytes, at least {MIN_HMAC_SECRET_BYTES} required",
                    k.len()
                )));
            }
            (
                KeyType::Oct,
                Material::Hmac(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &k)),
            )
        }
        other => return Err(JwkProblem::UnsupportedKeyType(other.to_owned())),
    };
    let alg = match jwk.alg.as_deref() {
        None => None,
        Some(name) => {
            let alg = Algorithm::from_jose(name)
                .ok_or_else(|| JwkProblem::UnsupportedAlgorithm(name.to_owned()))?;
            if !key_type.supports(alg) {
                return Err(JwkProblem::AlgorithmMismatch { alg, key_type });
            }
            Some(alg)
        }
    };
    Ok(Some(Key {
        kid: jwk.kid,
        key_type,
        alg,
        material,
    }))
}

/// Validates an RSA public key once, at load time, so verification never
/// meets a key ring would refuse (size, even modulus, bad exponent).
fn rsa_material(n: &[u8], e: &[u8]) -> Result<Material, JwkProblem> {
    let strip = |bytes: &[u8]| bytes[bytes.iter().take_while(|b| **b == 0).count()..].to_vec();
    let (n, e) = (strip(n), strip(e));
    let bits = n
        .first()
        .map_or(0, |top| n.len() * 8 - top.leading_zeros() as usize);
    if bits < MIN_RSA_BITS {
        return Err(JwkProblem::WeakKey(format!(
            "RSA modulus is {bits} bits, at least {MIN_RSA_BITS} required"
        )));
    }
    if bits > MAX_RSA_BITS {
        return Err(JwkProblem::InvalidKey(format!(
            "RSA modulus is {bits} bits, at most {MAX_RSA_BITS} supported"
        )));
    }
    if n.last().is_some_and(|low| low % 2 == 0) {
        return Err(JwkProblem::InvalidKey("RSA modulus is even".into()));
    }
    // ring accepts odd exponents from 3 to 2^33 - 1.
    let exponent = (e.len() <= 5).then(|| e.iter().fold(0u64, |acc, b| acc << 8 | u64::from(*b)));
    if !exponent.is_some_and(|e| e >= 3 && e % 2 == 1 && e < 1 << 33) {
        return Err(JwkProblem::InvalidKey(
            "RSA exponent must be odd, from 3 to 2^33-1".into(),
        ));
    }
    Ok(Material::Rsa { n, e })
}
