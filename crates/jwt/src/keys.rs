//! Verification keys: JWKS parsing, HMAC secrets and the hot-swappable store.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use ring::signature::{self as sig, RsaPublicKeyComponents, UnparsedPublicKey};
use serde::Deserialize;

use crate::alg::{Algorithm, KeyType};

/// RSA moduli below this many bits are refused: they are breakable.
pub const MIN_RSA_BITS: usize = 2048;
/// RSA moduli above this many bits are refused: verifying them is a
/// denial-of-service lever (ring's limit too).
pub const MAX_RSA_BITS: usize = 8192;
/// HMAC secrets shorter than this are refused (RFC 7518 §3.2: at least the
/// hash size, 32 bytes for HS256).
pub const MIN_HMAC_SECRET_BYTES: usize = 32;

/// JWK members are base64url; padding is tolerated because some key
/// publishers emit it, but non-canonical trailing bits are not.
const JWK_B64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Every key set gets a distinct id so a cache can tell which keys verified
/// an entry, and drop it once those keys are rotated out.
static NEXT_KEY_SET_ID: AtomicU64 = AtomicU64::new(1);

fn next_key_set_id() -> u64 {
    NEXT_KEY_SET_ID.fetch_add(1, Ordering::Relaxed)
}

/// Why a key (or a key file) could not be used.
///
/// Messages are meant for operators (config errors, CLI output); they may
/// name a `kid` or a field, never key material.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The document is not JSON of the form `{"keys": [...]}`.
    Json(String),
    /// One key of a JWKS is unusable; `index` is its position in `keys`.
    Jwk {
        /// Position of the key in the `keys` array.
        index: usize,
        /// The key's `kid`, when it has one.
        kid: Option<String>,
        /// What is wrong with it.
        problem: JwkProblem,
    },
    /// An HMAC secret is shorter than [`MIN_HMAC_SECRET_BYTES`].
    WeakSecret {
        /// The secret's length in bytes.
        len: usize,
    },
    /// A private key file could not be read as the requested algorithm's key.
    Pem(String),
    /// The key does not fit the requested algorithm (e.g. a P-384 key for ES256).
    AlgorithmMismatch {
        /// The algorithm asked for.
        alg: Algorithm,
        /// What the key actually is.
        found: String,
    },
    /// Key generation or signing failed.
    Crypto(String),
    /// Claims to sign were not a JSON object.
    ClaimsNotObject,
}

/// What is wrong with one JWK of a JWKS.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwkProblem {
    /// A required member (`kty`, `n`, `crv`, ...) is absent.
    MissingField(&'static str),
    /// A member is not valid base64url.
    BadBase64(&'static str),
    /// `kty` is not RSA, EC, OKP or oct.
    UnsupportedKeyType(String),
    /// `crv` is not P-256, P-384 (EC) or Ed25519 (OKP).
    UnsupportedCurve(String),
    /// `alg` names an algorithm this crate does not verify (or `none`).
    UnsupportedAlgorithm(String),
    /// `alg` does not fit the key type (e.g. `kty: RSA, alg: ES256`).
    AlgorithmMismatch {
        /// The JWK's `alg`.
        alg: Algorithm,
        /// The JWK's key type.
        key_type: KeyType,
    },
    /// The public key itself is invalid (point not on the curve, bad modulus ...).
    InvalidKey(String),
    /// The key is too weak to trust (RSA under 2048 bits, short HMAC secret).
    WeakKey(String),
    /// The JWK carries private material (`d`): a verifier must only see public keys.
    PrivateKeyMaterial,
    /// Another key in the set has the same `kid`, so tokens could not pick one.
    DuplicateKid,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Json(e) => write!(f, "JWKS is not a JSON object with a \"keys\" array: {e}"),
            KeyError::Jwk { index, kid: Some(kid), problem } => {
                write!(f, "JWKS key #{index} (kid {kid:?}): {problem}")
            }
            KeyError::Jwk { index, kid: None, problem } => write!(f, "JWKS key #{index}: {problem}"),
            KeyError::WeakSecret { len } => write!(
                f,
                "HMAC secret is {len} bytes; at least {MIN_HMAC_SECRET_BYTES} random bytes are required"
            ),
            KeyError::Pem(e) => write!(f, "private key: {e}"),
            KeyError::AlgorithmMismatch { alg, found } => write!(f, "a {found} key cannot sign {alg}"),
            KeyError::Crypto(e) => write!(f, "crypto failure: {e}"),
            KeyError::ClaimsNotObject => f.write_str("JWT claims must be a JSON object"),
        }
    }
}

impl fmt::Display for JwkProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JwkProblem::MissingField(field) => write!(f, "missing member {field:?}"),
            JwkProblem::BadBase64(field) => write!(f, "member {field:?} is not base64url"),
            JwkProblem::UnsupportedKeyType(kty) => {
                write!(f, "unsupported kty {kty:?} (supported: RSA, EC, OKP, oct)")
            }
            JwkProblem::UnsupportedCurve(crv) => {
                write!(
                    f,
                    "unsupported crv {crv:?} (supported: P-256, P-384, Ed25519)"
                )
            }
            JwkProblem::UnsupportedAlgorithm(alg) => write!(f, "unsupported alg {alg:?}"),
            JwkProblem::AlgorithmMismatch { alg, key_type } => {
                write!(f, "alg {alg} cannot be used with a {key_type} key")
            }
            JwkProblem::InvalidKey(e) => write!(f, "invalid key: {e}"),
            JwkProblem::WeakKey(e) => write!(f, "key too weak: {e}"),
            JwkProblem::PrivateKeyMaterial => {
                f.write_str("contains private key material (\"d\"); publish only the public key")
            }
            JwkProblem::DuplicateKid => f.write_str("duplicate kid"),
        }
    }
}

impl std::error::Error for KeyError {}

/// One verification key: its id, type, optional algorithm pin and the
/// public key (or HMAC secret), validated and decoded at load time.
#[derive(Clone)]
pub struct Key {
    kid: Option<String>,
    key_type: KeyType,
    alg: Option<Algorithm>,
    material: Material,
}

/// Key bytes in the form ring verifies with.
#[derive(Clone)]
enum Material {
    /// Big-endian modulus and exponent, without leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// An uncompressed SEC1 point (P-256 or P-384, per the key type).
    Ec(Vec<u8>),
    /// An Ed25519 public key.
    Ed25519([u8; 32]),
    /// An HMAC-SHA256 secret.
    Hmac(ring::hmac::Key),
}

impl Key {
    /// The JWK `kid` tokens use to pick this key.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// The key type, which fixes the algorithms it may verify.
    pub fn key_type(&self) -> KeyType {
        self.key_type
    }

    /// The JWK `alg` pin, if the key had one: then only that algorithm is allowed.
    pub fn algorithm(&self) -> Option<Algorithm> {
        self.alg
    }

    /// Whether this key may verify a token signed with `alg`.
    pub fn allows(&self, alg: Algorithm) -> bool {
        self.key_type.supports(alg) && self.alg.is_none_or(|pinned| pinned == alg)
    }

    /// Checks `signature` over `message` with this key. Any algorithm the
    /// key type cannot do is a failure here too, whatever the caller checked.
    pub(crate) fn verify_signature(
        &self,
        alg: Algorithm,
        message: &[u8],
        signature: &[u8],
    ) -> bool {
        let rsa = |params: &'static sig::RsaParameters| match &self.material {
            Material::Rsa { n, e } => RsaPublicKeyComponents { n, e }
                .verify(params, message, signature)
                .is_ok(),
            _ => false,
        };
        match (alg, &self.key_type, &self.material) {
            (Algorithm::RS256, KeyType::Rsa, _) => rsa(&sig::RSA_PKCS1_2048_8192_SHA256),
            (Algorithm::RS384, KeyType::Rsa, _) => rsa(&sig::RSA_PKCS1_2048_8192_SHA384),
            (Algorithm::RS512, KeyType::Rsa, _) => rsa(&sig::RSA_PKCS1_2048_8192_SHA512),
            (Algorithm::PS256, KeyType::Rsa, _) => rsa(&sig::RSA_PSS_2048_8192_SHA256),
            (Algorithm::PS384, KeyType::Rsa, _) => rsa(&sig::RSA_PSS_2048_8192_SHA384),
            (Algorithm::PS512, KeyType::Rsa, _) => rsa(&sig::RSA_PSS_2048_8192_SHA512),
            (Algorithm::ES256, KeyType::EcP256, Material::Ec(point)) => {
                UnparsedPublicKey::new(&sig::ECDSA_P256_SHA256_FIXED, point)
                    .verify(message, signature)
                    .is_ok()
            }
            (Algorithm::ES384, KeyType::EcP384, Material::Ec(point)) => {
                UnparsedPublicKey::new(&sig::ECDSA_P384_SHA384_FIXED, point)
                    .verify(message, signature)
                    .is_ok()
            }
            (Algorithm::EdDSA, KeyType::Ed25519, Material::Ed25519(x)) => {
                UnparsedPublicKey::new(&sig::ED25519, x)
                    .verify(message, signature)
                    .is_ok()
            }
            (Algorithm::HS256, KeyType::Oct, Material::Hmac(key)) => {
                ring::hmac::verify(key, message, signature).is_ok()
            }
            _ => false,
        }
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("kid", &self.kid)
            .field("key_type", &self.key_type)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

/// An immutable set of verification keys, looked up by `kid`.
///
/// Built once per JWKS fetch or config load and swapped in whole through
/// [`KeyStore`], so verification never sees a half-updated set.
#[derive(Clone)]
pub struct KeySet {
    id: u64,
    keys: Vec<Key>,
}

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
    /// An empty set: every token fails with `UnknownKid` until keys are loaded.
    pub fn empty() -> KeySet {
        KeySet {
            id: next_key_set_id(),
            keys: Vec::new(),
        }
    }

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

    /// A set holding one HMAC (HS256) secret, optionally with a `kid`.
    ///
    /// The secret must be at least [`MIN_HMAC_SECRET_BYTES`] long.
    pub fn from_hmac_secret(kid: Option<&str>, secret: &[u8]) -> Result<KeySet, KeyError> {
        if secret.len() < MIN_HMAC_SECRET_BYTES {
            return Err(KeyError::WeakSecret { len: secret.len() });
        }
        let key = Key {
            kid: kid.map(str::to_owned),
            key_type: KeyType::Oct,
            alg: Some(Algorithm::HS256),
            material: Material::Hmac(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret)),
        };
        Ok(KeySet {
            id: next_key_set_id(),
            keys: vec![key],
        })
    }

    /// Both sets' keys in one (e.g. a JWKS plus a configured HMAC secret);
    /// a `kid` present in both is an error.
    pub fn merge(self, other: KeySet) -> Result<KeySet, KeyError> {
        let mut keys = self.keys;
        for (index, key) in other.keys.into_iter().enumerate() {
            if key.kid.is_some() && keys.iter().any(|k| k.kid == key.kid) {
                return Err(KeyError::Jwk {
                    index,
                    kid: key.kid,
                    problem: JwkProblem::DuplicateKid,
                });
            }
            keys.push(key);
        }
        Ok(KeySet {
            id: next_key_set_id(),
            keys,
        })
    }

    /// A process-unique id of this set, so caches can tell rotated keys apart.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The number of usable keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the set has no keys.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys, for diagnostics (`/ready`, logs).
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// The key with this `kid`, whatever its type.
    pub fn get(&self, kid: &str) -> Option<&Key> {
        self.keys.iter().find(|key| key.kid.as_deref() == Some(kid))
    }
}

impl fmt::Debug for KeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeySet")
            .field("id", &self.id)
            .field("keys", &self.keys)
            .finish()
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

pub(crate) fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The current [`KeySet`], replaceable at run time (JWKS refresh, config
/// reload) without blocking or restarting verification.
pub struct KeyStore {
    current: ArcSwap<KeySet>,
}

impl KeyStore {
    /// A store starting with `keys`.
    pub fn new(keys: KeySet) -> KeyStore {
        KeyStore {
            current: ArcSwap::from_pointee(keys),
        }
    }

    /// A cheap snapshot of the current keys (no reference-count traffic on
    /// the hot path); hold it only for one verification.
    pub fn load(&self) -> Guard<Arc<KeySet>> {
        self.current.load()
    }

    /// Swaps in a new key set; verifications already running finish with
    /// the old one, and cached verifications made with it stop being served.
    pub fn replace(&self, keys: KeySet) {
        self.current.store(Arc::new(keys));
    }
}

impl fmt::Debug for KeyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyStore")
            .field("current", &**self.current.load())
            .finish()
    }
}
