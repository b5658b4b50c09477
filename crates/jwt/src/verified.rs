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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn verified(claims: Value) -> Verified {
        let Value::Object(claims) = claims else {
            panic!("not an object")
        };
        Verified {
            claims,
            expires_at: None,
            not_before: None,
            algorithm: Algorithm::HS256,
            key_id: None,
        }
    }

    #[test]
    fn scopes_from_scope_or_scp() {
        let scopes = |claims: Value| {
            verified(claims)
                .scopes()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            scopes(json!({ "scope": "read  write admin " })),
            ["read", "write", "admin"]
        );
        assert_eq!(
            scopes(json!({ "scp": ["read", "write", 5] })),
            ["read", "write"]
        );
        assert_eq!(scopes(json!({ "scp": "read write" })), ["read", "write"]);
        assert_eq!(scopes(json!({ "scope": "a", "scp": ["b"] })), ["a"]);
        assert_eq!(scopes(json!({ "scope": 5, "scp": ["b"] })), ["b"]);
        assert!(scopes(json!({ "sub": "x" })).is_empty());
        assert!(scopes(json!({ "scope": "" })).is_empty());
    }

    #[test]
    fn claims_as_header_values_refuse_control_characters() {
        let v = verified(json!({
            "sub": "alice", "n": 42, "f": 1.5, "admin": true, "groups": ["a", "b c"],
            "obj": { "a": 1 }, "null": null, "mixed": ["a", 1],
            "crlf": "a\r\nX-Admin: true", "lf": "a\nb", "cr": "a\rb", "nul": "a\0b", "tab": "a\tb", "del": "a\u{7f}",
            "arr_crlf": ["ok", "x\r\ny"],
        }));
        assert_eq!(v.claim_as_header_value("sub").as_deref(), Some("alice"));
        assert_eq!(v.claim_as_header_value("n").as_deref(), Some("42"));
        assert_eq!(v.claim_as_header_value("f").as_deref(), Some("1.5"));
        assert_eq!(v.claim_as_header_value("admin").as_deref(), Some("true"));
        assert_eq!(v.claim_as_header_value("groups").as_deref(), Some("a,b c"));
        for refused in [
            "obj", "null", "mixed", "crlf", "lf", "cr", "nul", "tab", "del", "arr_crlf", "absent",
        ] {
            assert_eq!(v.claim_as_header_value(refused), None, "{refused}");
        }
    }
}
