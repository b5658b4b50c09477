//! Secrets as a type: a [`Secret`] is read like the value it holds, never
//! shown (`Debug` prints `Secret(..)`, serialising writes
//! [`redacted_marker`]) and compared in constant time. Every credential of
//! the configuration is one (`admin.token`, `sticky.key`, `api_key.keys`,
//! `oidc.client_secret` and `cookie_keys`), so `/config`, which is the
//! configuration serialised, cannot show one; server/shown/redact.rs is the
//! second net, for what is not a credential by type (`${VAR}` values, URL
//! user information, header values that `headers` sets).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use subtle::ConstantTimeEq;

/// `(redacted sha256:0123abcd)`: the first 8 hex digits of the SHA-256 of
/// `text`, unsalted, so that two values can be told apart (or found
/// equal) without being shown.
pub fn redacted_marker(text: &str) -> String {
    use std::fmt::Write as _;
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let mut out = String::from("(redacted sha256:");
    for byte in &digest.as_ref()[..4] {
        let _ = write!(out, "{byte:02x}");
    }
    out.push(')');
    out
}

/// Last words of a name that holds a secret.
const SECRET_WORDS: &[&str] = &[
    "token",
    "password",
    "passwd",
    "passphrase",
    "secret",
    "key",
    "apikey",
    "authorization",
    "credential",
    "credentials",
];

/// The last word of `name` (after `_`, `-` or `.`) is a secret-like one:
/// `x-api-key`, `client_secret`. The access log masks such headers'
/// values, and `/config`'s second net hides such keys' values.
pub fn secret_name(name: &str) -> bool {
    let last = name.rsplit(['_', '-', '.']).next().unwrap_or(name);
    SECRET_WORDS.iter().any(|w| w.eq_ignore_ascii_case(last))
}

/// A value that must not be shown. Read from the file as the value
/// itself (`"${VAR}"` welcome).
#[derive(Clone, Default)]
pub struct Secret<T = String>(T);

impl<T> Secret<T> {
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The value itself, for the code that must use it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T: AsRef<[u8]>> Secret<T> {
    /// `given` is this secret. The SHA-256 digests of both are compared
    /// in constant time, so that neither the time taken nor its
    /// dependence on length says how much of `given` was right.
    pub fn matches(&self, given: &[u8]) -> bool {
        let given = ring::digest::digest(&ring::digest::SHA256, given);
        let expected = ring::digest::digest(&ring::digest::SHA256, self.0.as_ref());
        given.as_ref().ct_eq(expected.as_ref()).into()
    }
}

/// In constant time, as [`Secret::matches`].
impl<T: AsRef<[u8]>> PartialEq for Secret<T> {
    fn eq(&self, other: &Self) -> bool {
        self.matches(other.0.as_ref())
    }
}

impl<T: AsRef<[u8]>> Eq for Secret<T> {}

impl<T> std::fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Secret<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Self)
    }
}

impl<T: AsRef<str>> Serialize for Secret<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        redacted_marker(self.0.as_ref()).serialize(serializer)
    }
}

/// As the value it holds, marked `writeOnly` (what editors and tools
/// take to mean: never shown back).
impl<T: JsonSchema> JsonSchema for Secret<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        format!("Secret_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = T::json_schema(generator);
        schema.insert("writeOnly".into(), true.into());
        schema
    }
}

/// Where the user information (`user:password`) of the URL `url` is, if
/// it has one: between `scheme://` and the last `@` of the authority.
pub fn userinfo_range(url: &str) -> Option<std::ops::Range<usize>> {
    let start = url.find("://")? + 3;
    let rest = &url[start..];
    let authority = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority].rfind('@')?;
    Some(start..start + at)
}

/// A URL whose user information is a credential
/// (`redis://user:password@host:6379`): read as written, shown (`Debug`,
/// `/config`) with the user information as its [`redacted_marker`] and
/// the rest, host included, as it is.
#[derive(Clone, PartialEq, Eq)]
pub struct CredentialUrl(String);

impl CredentialUrl {
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL itself, password included, for the client that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with its user information replaced by its marker.
    pub fn shown(&self) -> Cow<'_, str> {
        match userinfo_range(&self.0) {
            Some(range) => {
                let marker = redacted_marker(&self.0[range.clone()]);
                let (before, after) = (&self.0[..range.start], &self.0[range.end..]);
                format!("{before}{marker}{after}").into()
            }
            None => Cow::Borrowed(&self.0),
        }
    }
}

impl std::fmt::Debug for CredentialUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CredentialUrl").field(&self.shown()).finish()
    }
}

impl<'de> Deserialize<'de> for CredentialUrl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self)
    }
}

impl Serialize for CredentialUrl {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.shown().serialize(serializer)
    }
}

/// A string, as written.
impl JsonSchema for CredentialUrl {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "CredentialUrl".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        String::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn never_shown_and_compared_whole() {
        let secret: Secret = serde_json::from_value(serde_json::json!("hunter2-hunter2")).unwrap();
        assert_eq!(secret.expose(), "hunter2-hunter2");
        assert_eq!(format!("{secret:?}"), "Secret(..)");
        let shown = serde_json::to_string(&secret).unwrap();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(shown, format!("\"{}\"", redacted_marker("hunter2-hunter2")));
        assert!(redacted_marker("x").starts_with("(redacted sha256:"));
        assert!(secret.matches(b"hunter2-hunter2"));
        assert!(!secret.matches(b"hunter2-hunter"));
        assert!(!secret.matches(b"hunter2-hunter22"));
        assert!(!secret.matches(b""));
        assert_eq!(secret, Secret::new("hunter2-hunter2".to_string()));
        assert_ne!(secret, Secret::new("hunter2-hunter3".to_string()));
        // Every single-bit difference anywhere is seen.
        let token = Secret::new([0x5au8; 32]);
        for i in 0..32 {
            for bit in 0..8 {
                let mut other = [0x5au8; 32];
                other[i] ^= 1 << bit;
                assert!(!token.matches(&other), "byte {i} bit {bit}");
            }
        }
        assert!(token.matches(&[0x5au8; 32]));
    }

    #[test]
    fn secret_like_names() {
        for name in [
            "token",
            "x-api-key",
            "client_secret",
            "sticky.key",
            "Password",
        ] {
            assert!(secret_name(name), "{name}");
        }
        for name in [
            "max_token_bytes",
            "token_file",
            "keys_file",
            "credentials_mode",
        ] {
            assert!(!secret_name(name), "{name}");
        }
    }

    #[test]
    fn a_url_is_shown_without_its_password_but_with_its_host() {
        let url: CredentialUrl = serde_json::from_value(serde_json::json!(
            "rediss://app:pa55-word@redis.internal:6380/2"
        ))
        .unwrap();
        assert_eq!(url.expose(), "rediss://app:pa55-word@redis.internal:6380/2");
        let marker = redacted_marker("app:pa55-word");
        let shown = format!("rediss://{marker}@redis.internal:6380/2");
        assert_eq!(
            serde_json::to_value(&url).unwrap(),
            serde_json::json!(shown)
        );
        let debug = format!("{url:?}");
        assert!(!debug.contains("pa55-word"), "{debug}");
        assert!(debug.contains("@redis.internal:6380/2"), "{debug}");
        // A password that holds `@`: the authority's last one ends it.
        let at = CredentialUrl::new("redis://:p@ss@h:1/0?x=a@b");
        assert_eq!(
            at.shown(),
            format!("redis://{}@h:1/0?x=a@b", redacted_marker(":p@ss"))
        );
        for plain in [
            "redis://127.0.0.1:6379",
            "redis://h/0?u=a@b",
            "unix:/tmp/r.sock",
        ] {
            assert_eq!(CredentialUrl::new(plain).shown(), plain);
        }
    }
}
