//! Verification keys: the validated [`Key`], the immutable [`KeySet`] and
//! the hot-swappable [`KeyStore`]. JWKS parsing is in `jwk`, the errors in
//! `error`.

mod error;
mod jwk;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::signature::{self as sig, RsaPublicKeyComponents, UnparsedPublicKey};

pub use error::{JwkProblem, KeyError};

use crate::alg::{Algorithm, KeyType};

/// RSA moduli below this many bits are refused: they are breakable.
pub const MIN_RSA_BITS: usize = 2048;
/// RSA moduli above this many bits are refused: verifying them is a
/// denial-of-service lever (ring's limit too).
pub const MAX_RSA_BITS: usize = 8192;
/// HMAC secrets shorter than this are refused (RFC 7518 §3.2: at least the
/// hash size, 32 bytes for HS256).
pub const MIN_HMAC_SECRET_BYTES: usize = 32;

/// Every key set gets a distinct id so a cache can tell which keys verified
/// an entry, and drop it once those keys are rotated out.
static NEXT_KEY_SET_ID: AtomicU64 = AtomicU64::new(1);

fn next_key_set_id() -> u64 {
    NEXT_KEY_SET_ID.fetch_add(1, Ordering::Relaxed)
}

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

impl KeySet {
    /// An empty set: every token fails with `UnknownKid` until keys are loaded.
    pub fn empty() -> KeySet {
        KeySet {
            id: next_key_set_id(),
            keys: Vec::new(),
        }
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
