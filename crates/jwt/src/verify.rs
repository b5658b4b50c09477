//! Token verification: structure, algorithm, key, signature, then claims.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::alg::{Algorithm, AlgorithmSet};
use crate::cache::VerifiedCache;
use crate::keys::{Key, KeySet, KeyStore};
use crate::verified::Verified;

/// How a [`JwtVerifier`] judges tokens.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct VerifierSettings {
    /// The only algorithms accepted; must not be empty.
    pub algorithms: AlgorithmSet,
    /// When set, the `iss` claim must equal it exactly.
    pub issuer: Option<String>,
    /// When non-empty, the `aud` claim (a string or an array of strings)
    /// must contain one of these. When empty, `aud` is not checked.
    pub audiences: Vec<String>,
    /// Clock skew tolerated on `exp` and `nbf` (default 60 s).
    pub leeway: Duration,
    /// Longer tokens are refused before any decoding (default 8 KiB).
    pub max_token_bytes: usize,
    /// Whether a token without `exp` is refused (default true): a token that
    /// never expires cannot be contained once leaked.
    pub require_exp: bool,
    /// How many verified tokens [`JwtVerifier::verify_cached`] remembers
    /// (default 4096; 0 disables the cache).
    pub cache_capacity: usize,
    /// The longest a verified token is served from the cache, also for
    /// tokens without `exp` (default 5 min).
    pub cache_max_ttl: Duration,
}

impl VerifierSettings {
    /// Defaults for everything but the allow-list, which has no safe default.
    pub fn new(algorithms: impl IntoIterator<Item = Algorithm>) -> VerifierSettings {
        VerifierSettings {
            algorithms: algorithms.into_iter().collect(),
            issuer: None,
            audiences: Vec::new(),
            leeway: Duration::from_secs(60),
            max_token_bytes: 8 * 1024,
            require_exp: true,
            cache_capacity: 4096,
            cache_max_ttl: Duration::from_secs(300),
        }
    }
}

/// Why a [`JwtVerifier`] could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettingsError {
    /// The algorithm allow-list is empty, so no token could ever pass.
    NoAlgorithms,
    /// `max_token_bytes` is 0, so no token could ever pass.
    ZeroMaxTokenBytes,
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SettingsError::NoAlgorithms => "at least one JWT algorithm must be allowed",
            SettingsError::ZeroMaxTokenBytes => "the maximum JWT size must be above 0",
        })
    }
}

impl std::error::Error for SettingsError {}

/// Why a token was refused.
///
/// `Display` gives a short fixed text that is safe to send to the client in
/// `WWW-Authenticate: Bearer error="invalid_token", error_description="..."`:
/// it never contains the token, a claim value, a `kid` or key material, nor
/// a `"` or `\`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwtError {
    /// The token is longer than `max_token_bytes`.
    TooLarge,
    /// The token is not a well-formed compact JWS; the reason is a fixed text.
    Malformed(&'static str),
    /// The header's `alg` is not on the allow-list (this includes `none`).
    AlgorithmNotAllowed,
    /// No key has the token's `kid` (or, without a `kid`, no single key fits).
    /// The proxy refreshes its JWKS (rate-limited) on this error.
    UnknownKid(Option<String>),
    /// The selected key cannot verify the token's algorithm (e.g. an HS256
    /// token naming an RSA key): the algorithm-confusion defence.
    KeyMismatch,
    /// The signature does not verify.
    BadSignature,
    /// `exp` is in the past (beyond the leeway).
    Expired,
    /// `nbf` is in the future (beyond the leeway).
    NotYetValid,
    /// `iss` is not the configured issuer.
    WrongIssuer,
    /// `aud` contains none of the configured audiences.
    WrongAudience,
    /// A claim required by the settings is absent (`exp`, `iss` or `aud`).
    MissingClaim(&'static str),
}

impl JwtError {
    /// The RFC 6750 `error` code for a `WWW-Authenticate` challenge.
    pub fn error_code(&self) -> &'static str {
        "invalid_token"
    }

    /// A short fixed label for metrics and logs (`"expired"`, `"bad_signature"` ...).
    pub fn label(&self) -> &'static str {
        match self {
            JwtError::TooLarge => "too_large",
            JwtError::Malformed(_) => "malformed",
            JwtError::AlgorithmNotAllowed => "algorithm_not_allowed",
            JwtError::UnknownKid(_) => "unknown_kid",
            JwtError::KeyMismatch => "key_mismatch",
            JwtError::BadSignature => "bad_signature",
            JwtError::Expired => "expired",
            JwtError::NotYetValid => "not_yet_valid",
            JwtError::WrongIssuer => "wrong_issuer",
            JwtError::WrongAudience => "wrong_audience",
            JwtError::MissingClaim(_) => "missing_claim",
        }
    }
}

impl fmt::Display for JwtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JwtError::TooLarge => f.write_str("the token is too large"),
            JwtError::Malformed(reason) => write!(f, "malformed token: {reason}"),
            JwtError::AlgorithmNotAllowed => f.write_str("the token algorithm is not allowed"),
            JwtError::UnknownKid(_) => f.write_str("the token signing key is unknown"),
            JwtError::KeyMismatch => f.write_str("the token algorithm does not match its key"),
            JwtError::BadSignature => f.write_str("the token signature is invalid"),
            JwtError::Expired => f.write_str("the token has expired"),
            JwtError::NotYetValid => f.write_str("the token is not valid yet"),
            JwtError::WrongIssuer => f.write_str("the token issuer is not accepted"),
            JwtError::WrongAudience => f.write_str("the token audience is not accepted"),
            JwtError::MissingClaim(claim) => write!(f, "the token lacks the {claim} claim"),
        }
    }
}

impl std::error::Error for JwtError {}

/// Verifies compact JWS tokens against the keys in a [`KeyStore`].
///
/// Shared by all worker threads (`&self` everywhere); the key store can be
/// swapped underneath it.
#[derive(Debug)]
pub struct JwtVerifier {
    settings: VerifierSettings,
    keys: Arc<KeyStore>,
    cache: Option<VerifiedCache>,
}

/// The JOSE header members this crate reads.
#[derive(Deserialize)]
struct Header<'a> {
    #[serde(borrow)]
    alg: Cow<'a, str>,
    #[serde(borrow, default)]
    kid: Option<Cow<'a, str>>,
    #[allow(dead_code)]
    #[serde(borrow, default)]
    typ: Option<Cow<'a, str>>,
    #[serde(default)]
    crit: Option<serde::de::IgnoredAny>,
}

impl JwtVerifier {
    /// A verifier with these settings, reading keys from `keys` on every call.
    pub fn new(
        settings: VerifierSettings,
        keys: Arc<KeyStore>,
    ) -> Result<JwtVerifier, SettingsError> {
        if settings.algorithms.is_empty() {
            return Err(SettingsError::NoAlgorithms);
        }
        if settings.max_token_bytes == 0 {
            return Err(SettingsError::ZeroMaxTokenBytes);
        }
        let cache = (settings.cache_capacity > 0)
            .then(|| VerifiedCache::new(settings.cache_capacity, settings.cache_max_ttl.as_secs()));
        Ok(JwtVerifier {
            settings,
            keys,
            cache,
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &VerifierSettings {
        &self.settings
    }

    /// The key store, so a JWKS refresher can replace its keys.
    pub fn key_store(&self) -> &Arc<KeyStore> {
        &self.keys
    }

    /// The verified-token cache, if enabled (for its size in metrics).
    pub fn cache(&self) -> Option<&VerifiedCache> {
        self.cache.as_ref()
    }

    /// Fully verifies `token` at time `now_unix_secs` (Unix seconds).
    pub fn verify(&self, token: &str, now_unix_secs: u64) -> Result<Verified, JwtError> {
        if token.len() > self.settings.max_token_bytes {
            return Err(JwtError::TooLarge);
        }
        self.verify_with(token, now_unix_secs, &self.keys.load())
    }

    /// Like [`JwtVerifier::verify`], but answers from the cache when this
    /// exact token was verified before with the current keys and is still
    /// within its `exp` (no leeway is granted from the cache).
    pub fn verify_cached(
        &self,
        token: &str,
        now_unix_secs: u64,
    ) -> Result<Arc<Verified>, JwtError> {
        if token.len() > self.settings.max_token_bytes {
            return Err(JwtError::TooLarge);
        }
        let keys = self.keys.load();
        let Some(cache) = &self.cache else {
            return self.verify_with(token, now_unix_secs, &keys).map(Arc::new);
        };
        if let Some(hit) = cache.get(token, keys.id(), now_unix_secs) {
            return Ok(hit);
        }
        let verified = Arc::new(self.verify_with(token, now_unix_secs, &keys)?);
        // A token is cached only once it is fully valid without leeway: an
        // early token (nbf ahead) is verified again on each use.
        if verified.not_before.is_none_or(|nbf| nbf <= now_unix_secs) {
            cache.insert(
                token,
                keys.id(),
                Arc::clone(&verified),
                verified.expires_at,
                now_unix_secs,
            );
        }
        Ok(verified)
    }

    fn verify_with(&self, token: &str, now: u64, keys: &KeySet) -> Result<Verified, JwtError> {
        let mut segments = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) = (
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
        ) else {
            return Err(JwtError::Malformed(
                "a token has three dot-separated segments",
            ));
        };
        let header_json = URL_SAFE_NO_PAD
            .decode(header_b64)
            .map_err(|_| JwtError::Malformed("the header is not base64url"))?;
        let header: Header<'_> = serde_json::from_slice(&header_json)
            .map_err(|_| JwtError::Malformed("the header is not a JSON object with an alg"))?;
        if header.crit.is_some() {
            return Err(JwtError::Malformed(
                "critical header extensions are not supported",
            ));
        }
        let alg = Algorithm::from_jose(&header.alg)
            .filter(|alg| self.settings.algorithms.contains(*alg))
            .ok_or(JwtError::AlgorithmNotAllowed)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload_b64)
            .map_err(|_| JwtError::Malformed("the payload is not base64url"))?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature_b64)
            .map_err(|_| JwtError::Malformed("the signature is not base64url"))?;
        let key = select_key(keys, header.kid.as_deref(), alg)?;

        let signed = &token.as_bytes()[..header_b64.len() + 1 + payload_b64.len()];
        if !key.verify_signature(alg, signed, &signature) {
            return Err(JwtError::BadSignature);
        }

        let ClaimsMap(claims) = serde_json::from_slice(&payload)
            .map_err(|_| JwtError::Malformed("the payload is not a JSON object"))?;
        let leeway = self.settings.leeway.as_secs();
        let expires_at = numeric_date(&claims, "exp")?;
        match expires_at {
            Some(exp) if now >= exp.saturating_add(leeway) => return Err(JwtError::Expired),
            None if self.settings.require_exp => return Err(JwtError::MissingClaim("exp")),
            _ => {}
        }
        let not_before = numeric_date(&claims, "nbf")?;
        if not_before.is_some_and(|nbf| nbf > now.saturating_add(leeway)) {
            return Err(JwtError::NotYetValid);
        }
        if let Some(issuer) = &self.settings.issuer {
            match claims.get("iss") {
                None => return Err(JwtError::MissingClaim("iss")),
                Some(Value::String(iss)) if iss == issuer => {}
                Some(_) => return Err(JwtError::WrongIssuer),
            }
        }
        if !self.settings.audiences.is_empty() {
            let accepted = |aud: &str| self.settings.audiences.iter().any(|a| a == aud);
            let ok = match claims.get("aud") {
                None => return Err(JwtError::MissingClaim("aud")),
                Some(Value::String(aud)) => accepted(aud),
                Some(Value::Array(auds)) => {
                    let mut ok = false;
                    for aud in auds {
                        let aud = aud.as_str().ok_or(JwtError::Malformed(
                            "aud is not a string or array of strings",
                        ))?;
                        ok |= accepted(aud);
                    }
                    ok
                }
                Some(_) => {
                    return Err(JwtError::Malformed(
                        "aud is not a string or array of strings",
                    ))
                }
            };
            if !ok {
                return Err(JwtError::WrongAudience);
            }
        }
        Ok(Verified {
            claims,
            expires_at,
            not_before,
            algorithm: alg,
            key_id: key.kid().map(str::to_owned),
        })
    }
}

/// Picks the key for a token: by `kid` when it has one, else the only key
/// that can verify `alg`.
fn select_key<'k>(
    keys: &'k KeySet,
    kid: Option<&str>,
    alg: Algorithm,
) -> Result<&'k Key, JwtError> {
    match kid {
        Some(kid) => {
            let key = keys
                .get(kid)
                .ok_or_else(|| JwtError::UnknownKid(Some(kid.to_owned())))?;
            if key.allows(alg) {
                Ok(key)
            } else {
                Err(JwtError::KeyMismatch)
            }
        }
        None => {
            let mut fitting = keys.keys().iter().filter(|key| key.allows(alg));
            match (fitting.next(), fitting.next()) {
                (Some(key), None) => Ok(key),
                // Keys exist, but none of this type: refetching will not help.
                (None, _) if !keys.is_empty() => Err(JwtError::KeyMismatch),
                _ => Err(JwtError::UnknownKid(None)),
            }
        }
    }
}

/// Reads a NumericDate claim (RFC 7519 §2: seconds, possibly fractional).
fn numeric_date(claims: &Map<String, Value>, name: &'static str) -> Result<Option<u64>, JwtError> {
    let Some(value) = claims.get(name) else {
        return Ok(None);
    };
    let malformed = || {
        JwtError::Malformed(match name {
            "exp" => "exp is not a non-negative number",
            _ => "nbf is not a non-negative number",
        })
    };
    let Value::Number(n) = value else {
        return Err(malformed());
    };
    if let Some(secs) = n.as_u64() {
        return Ok(Some(secs));
    }
    match n.as_f64() {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Some(secs) if secs.is_finite() && secs >= 0.0 => Ok(Some(secs as u64)),
        _ => Err(malformed()),
    }
}

/// A claims object whose parse fails on a duplicate member name, so two
/// components can never read different values of one claim.
struct ClaimsMap(Map<String, Value>);

impl<'de> Deserialize<'de> for ClaimsMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ClaimsVisitor;
        impl<'de> Visitor<'de> for ClaimsVisitor {
            type Value = ClaimsMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<ClaimsMap, A::Error> {
                let mut claims = Map::new();
                while let Some(name) = access.next_key::<String>()? {
                    if claims.contains_key(&name) {
                        return Err(A::Error::custom("duplicate claim"));
                    }
                    let value: Value = access.next_value()?;
                    claims.insert(name, value);
                }
                Ok(ClaimsMap(claims))
            }
        }
        deserializer.deserialize_map(ClaimsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts_are_safe_for_www_authenticate() {
        let malformed = [
            "a token has three dot-separated segments",
            "the header is not base64url",
            "the header is not a JSON object with an alg",
            "critical header extensions are not supported",
            "the payload is not base64url",
            "the signature is not base64url",
            "the payload is not a JSON object",
            "exp is not a non-negative number",
            "nbf is not a non-negative number",
            "aud is not a string or array of strings",
        ];
        let errors = malformed.map(JwtError::Malformed).into_iter().chain([
            JwtError::TooLarge,
            JwtError::AlgorithmNotAllowed,
            JwtError::UnknownKid(Some("evil\"kid\r\n".into())),
            JwtError::KeyMismatch,
            JwtError::BadSignature,
            JwtError::Expired,
            JwtError::NotYetValid,
            JwtError::WrongIssuer,
            JwtError::WrongAudience,
            JwtError::MissingClaim("exp"),
            JwtError::MissingClaim("iss"),
            JwtError::MissingClaim("aud"),
        ]);
        for error in errors {
            let text = error.to_string();
            assert!(
                !text.contains(['"', '\\']) && !text.chars().any(char::is_control),
                "{text}"
            );
            assert!(!text.contains("evil"), "{text}");
            assert_eq!(error.error_code(), "invalid_token");
            assert!(!error.label().is_empty());
        }
    }
}
