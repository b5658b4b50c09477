//! What a verified token carries: its claims and how it was verified. A
//! leaf, so that the verifier and its cache both use it without using
//! each other.

use serde_json::{Map, Value};

use crate::alg::Algorithm;

/// A token that passed every check, with its claims.
#[derive(Clone, Debug, PartialEq)]
pub struct Verified {
    /// All claims of the payload (duplicate names are refused at parse time).
    pub claims: Map<String, Value>,
    /// `exp` in Unix seconds, if the token has one.
    pub expires_at: Option<u64>,
    /// `nbf` in Unix seconds, if the token has one.
    pub not_before: Option<u64>,
    /// The algorithm the signature was made with.
    pub algorithm: Algorithm,
    /// The `kid` of the key that verified it, if that key has one.
    pub key_id: Option<String>,
}

impl Verified {
    /// The granted scopes: `scope` (a space-separated string, RFC 8693) or
    /// else `scp` (an array of strings or a space-separated string).
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        let (text, list) = match (self.claims.get("scope"), self.claims.get("scp")) {
            (Some(Value::String(s)), _) | (_, Some(Value::String(s))) => (Some(s.as_str()), None),
            (_, Some(Value::Array(items))) => (None, Some(items)),
            _ => (None, None),
        };
        text.into_iter()
            .flat_map(|s| s.split(' ').filter(|scope| !scope.is_empty()))
            .chain(list.into_iter().flatten().filter_map(Value::as_str))
    }

    /// A claim rendered for an upstream request header (claim-to-header
    /// mapping): strings as they are, numbers and booleans as text, arrays
    /// of strings joined by `,`. `None` for absent, null, object or mixed
    /// array claims, and for any value with a control character (CR, LF,
    /// NUL, ...) that could split or smuggle headers.
    pub fn claim_as_header_value(&self, name: &str) -> Option<String> {
        let text = match self.claims.get(name)? {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Array(items) => {
                let mut joined = String::new();
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        joined.push(',');
                    }
                    joined.push_str(item.as_str()?);
                }
                joined
            }
            Value::Null | Value::Object(_) => return None,
        };
        if text.chars().any(char::is_control) {
            return None;
        }
        Some(text)
    }
}
