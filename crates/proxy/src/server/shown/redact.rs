//! What `/config` never shows, decided by the shape of the configuration
//! rather than by a list of settings, so that a setting added later is
//! covered too. A hidden value is written `(redacted sha256:0123abcd)`:
//! the first 8 hex digits of its SHA-256, unsalted, so that two proxies'
//! values can be told apart (or found equal) without being shown.
//!
//! Hidden, in every string and number of the document:
//! - the value of every key whose name ends in a secret-like word
//!   (`token`, `password`, `secret`, `key`, `authorization`, … in any
//!   case, after `_`, `-` or `.`), e.g. `sticky.key`, `x-api-key`;
//! - every header value that `set` or `add` rules give (`headers` handler);
//! - the user information of a URL (`http://user:pass@host`) and the
//!   value of a query parameter with a secret-like name;
//! - every value a `${VAR}` took from the environment, wherever it
//!   appears (values under 4 characters only under the key they were
//!   written at, being too common elsewhere).

use std::ops::Range;

use serde_json::Value;

use crate::config::{userinfo_range, FromEnv};

const PREFIX: &str = "(redacted sha256:";

/// Hides what must not be shown in `document`, in place.
pub(crate) fn redact(document: &mut Value, substituted: &[FromEnv]) {
    walk(document, &mut Vec::new(), substituted);
}

/// `(redacted sha256:…)` for `text`.
pub(crate) fn marker(text: &str) -> String {
    crate::config::redacted_marker(text)
}

fn is_marker(text: &str) -> bool {
    text.starts_with(PREFIX) && text.len() == PREFIX.len() + 9 && text.ends_with(')')
}

/// The last word of `name` is a secret-like one.
pub(crate) fn secret_name(name: &str) -> bool {
    crate::config::secret_name(name)
}

/// `path` holds the keys from the root to a value; items of a list are
/// under the list's key. Keys are looked at as values under their parent.
fn walk(value: &mut Value, path: &mut Vec<String>, substituted: &[FromEnv]) {
    match value {
        Value::Object(map) => {
            for (key, mut item) in std::mem::take(map) {
                path.push(key.clone());
                walk(&mut item, path, substituted);
                path.pop();
                // A key is a name, not a value, unless it holds a URL or a
                // value from the environment (`reload.resolved`'s host URLs).
                let key = leaf(&key, false, path, substituted).unwrap_or(key);
                map.insert(key, item);
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, path, substituted);
            }
        }
        Value::Null => {}
        Value::String(text) if is_marker(text) => {}
        Value::String(text) => {
            if let Some(hidden) = leaf(text, true, path, substituted) {
                *text = hidden;
            }
        }
        Value::Number(_) | Value::Bool(_) => {
            let text = value.to_string();
            let secret = matches!(value, Value::Number(_));
            if let Some(hidden) = leaf(&text, secret, path, substituted) {
                *value = Value::String(hidden);
            }
        }
    }
}

/// `text` as it may be shown, or `None` when all of it may. Bools (and
/// keys) are never secrets by their key's name (`credentials: true`),
/// only when the environment gave them (`secret_by_name` false).
fn leaf(text: &str, secret_by_name: bool, path: &[String], from: &[FromEnv]) -> Option<String> {
    let own = path.last().map(String::as_str).unwrap_or_default();
    let parent = path.len().checked_sub(2).map(|i| path[i].as_str());
    let grandparent = path.len().checked_sub(3).map(|i| path[i].as_str());
    let header_value = matches!(parent, Some("set" | "add"))
        && matches!(grandparent, Some("request" | "response"));
    if (secret_by_name && secret_name(own)) || header_value {
        return Some(marker(text));
    }
    let mut hidden: Vec<Range<usize>> = urls(text);
    for value in from.iter().filter(|f| !f.value.is_empty()) {
        let at_its_key = value
            .key
            .as_deref()
            .is_none_or(|key| path.iter().any(|p| p.eq_ignore_ascii_case(key)));
        if text == value.value && at_its_key {
            return Some(marker(text));
        }
        if value.value.len() >= 4 || (value.key.is_some() && at_its_key) {
            hidden.extend(
                text.match_indices(value.value.as_str())
                    .map(|(at, found)| at..at + found.len()),
            );
        }
    }
    // What an earlier pass hid stays as it is.
    let markers = markers(text);
    hidden.retain(|r| !markers.iter().any(|m| r.start < m.end && m.start < r.end));
    (!hidden.is_empty()).then(|| replace(text, hidden))
}

/// Where `text` already holds markers.
fn markers(text: &str) -> Vec<Range<usize>> {
    let length = PREFIX.len() + 9;
    text.match_indices(PREFIX)
        .map(|(at, _)| at..at + length)
        .filter(|r| text.get(r.clone()).is_some_and(is_marker))
        .collect()
}

/// In every `scheme://` URL of `text`: the user information, and the
/// values of query parameters with secret-like names.
fn urls(text: &str) -> Vec<Range<usize>> {
    let mut hidden = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("://") {
        let start = from + at + 3;
        let end = text[start..]
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'')
            .map_or(text.len(), |e| start + e);
        let url = &text[start..end];
        if let Some(userinfo) = userinfo_range(&text[from..end]) {
            hidden.push(from + userinfo.start..from + userinfo.end);
        }
        if let Some(q) = url.find('?') {
            let query_end = url[q..].find('#').map_or(url.len(), |h| q + h);
            let mut offset = start + q + 1;
            for pair in url[q + 1..query_end].split('&') {
                if let Some((name, value)) = pair.split_once('=') {
                    if secret_name(name) && !value.is_empty() {
                        let begin = offset + name.len() + 1;
                        hidden.push(begin..begin + value.len());
                    }
                }
                offset += pair.len() + 1;
            }
        }
        from = end.max(start);
    }
    hidden
}

/// `text` with each of `ranges` (merged where they overlap) replaced by
/// its marker.
fn replace(text: &str, mut ranges: Vec<Range<usize>>) -> String {
    ranges.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(text.len() + 32);
    let mut done = 0;
    let mut ranges = ranges.into_iter().peekable();
    while let Some(mut range) = ranges.next() {
        while let Some(next) = ranges.peek().filter(|n| n.start <= range.end) {
            range.end = range.end.max(next.end);
            ranges.next();
        }
        let start = range.start.max(done);
        out.push_str(&text[done..start]);
        if start < range.end {
            out.push_str(&marker(&text[start..range.end]));
        }
        done = done.max(range.end);
    }
    out.push_str(&text[done..]);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn env(key: Option<&str>, value: &str) -> FromEnv {
        FromEnv {
            key: key.map(str::to_string),
            value: value.into(),
        }
    }

    #[test]
    fn hides_by_shape_not_by_a_list() {
        let mut doc = json!({
            "middleware": {
                "auth_headers": { "headers": {
                    "request": { "set": { "authorization": "Bearer abc", "x-tenant": "acme" }, "remove": ["cookie"] },
                    "response": { "add": { "x-frame-options": "DENY" } },
                } },
                "cors": { "cors": { "credentials": true, "origins": ["https://app.example"] } },
            },
            "upstreams": { "set": { "retries": 2, "sticky": { "key": "hmac-key-material", "cookie": "srv" } } },
            "future": { "client_secret": "s3", "api_key": 12345, "x-api-key": "k", "Password": "p", "max_token_bytes": 8192, "token_file": "/run/t" },
            "urls": ["http://user:pass@db.internal:5432/x?api_key=k1&page=2", "https://example.org/?token=t#f", "http://plain:80"],
        });
        redact(&mut doc, &[]);
        let text = doc.to_string();
        for secret in [
            "Bearer abc",
            "acme",
            "DENY",
            "hmac-key-material",
            "\"s3\"",
            "12345",
            "\"k\"",
            "\"p\"",
            "user:pass",
            "k1",
            "token=t#",
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        let set = &doc["middleware"]["auth_headers"]["headers"]["request"]["set"];
        assert_eq!(set["authorization"], marker("Bearer abc"));
        assert_eq!(set["x-tenant"], marker("acme"));
        assert_eq!(
            doc["middleware"]["auth_headers"]["headers"]["request"]["remove"][0],
            "cookie"
        );
        assert_eq!(doc["middleware"]["cors"]["cors"]["credentials"], true);
        // An upstream named `set` is not a header rule.
        assert_eq!(doc["upstreams"]["set"]["retries"], 2);
        assert_eq!(doc["upstreams"]["set"]["sticky"]["cookie"], "srv");
        assert_eq!(doc["future"]["api_key"], marker("12345"));
        assert_eq!(doc["future"]["max_token_bytes"], 8192);
        assert_eq!(doc["future"]["token_file"], "/run/t");
        let url = doc["urls"][0].as_str().unwrap();
        assert_eq!(
            url,
            format!(
                "http://{}@db.internal:5432/x?api_key={}&page=2",
                marker("user:pass"),
                marker("k1")
            )
        );
        assert_eq!(
            doc["urls"][1],
            format!("https://example.org/?token={}#f", marker("t"))
        );
        assert_eq!(doc["urls"][2], "http://plain:80");
        // Markers are stable across processes (no salt) and left alone when met again.
        assert_eq!(marker("Bearer abc"), marker("Bearer abc"));
        assert_ne!(marker("Bearer abc"), marker("Bearer abd"));
        let before = doc.clone();
        redact(&mut doc, &[]);
        assert_eq!(doc, before);
    }

    #[test]
    fn hides_what_the_environment_gave() {
        let mut doc = json!({
            "workers": 2,
            "upstreams": { "a": { "retries": 2, "hosts": [{ "url": "http://10.0.0.7:8080", "weight": 1 }] } },
            "listeners": [{ "address": "0.0.0.0:80" }],
            "limits": { "max_connections": 80 },
            "log": { "level": "debug" },
            "reload": {
                "last_error": { "message": "t.yaml:3:9: bad value `0123456789-secret`" },
                "resolved": { "http://10.0.0.7:8080": ["10.0.0.7:8080"], "http://u:p@db:80": [] },
            },
        });
        let from = [
            env(Some("workers"), "2"),
            env(Some("hosts"), "http://10.0.0.7:8080"),
            env(Some("address"), "80"),
            env(None, "debug"),
            env(Some("token"), "0123456789-secret"),
        ];
        redact(&mut doc, &from);
        assert_eq!(doc["workers"], marker("2"));
        assert_eq!(
            doc["upstreams"]["a"]["retries"], 2,
            "a 2 written elsewhere stays"
        );
        assert_eq!(
            doc["upstreams"]["a"]["hosts"][0]["url"],
            marker("http://10.0.0.7:8080")
        );
        assert_eq!(
            doc["listeners"][0]["address"],
            format!("0.0.0.0:{}", marker("80"))
        );
        assert_eq!(doc["limits"]["max_connections"], 80);
        assert_eq!(doc["log"]["level"], marker("debug"));
        let message = doc["reload"]["last_error"]["message"].as_str().unwrap();
        assert_eq!(
            message,
            format!("t.yaml:3:9: bad value `{}`", marker("0123456789-secret"))
        );
        let resolved = doc["reload"]["resolved"].as_object().unwrap();
        let keys: Vec<&str> = resolved.keys().map(String::as_str).collect();
        assert!(
            keys.contains(&marker("http://10.0.0.7:8080").as_str()),
            "{keys:?}"
        );
        assert!(
            keys.contains(&format!("http://{}@db:80", marker("u:p")).as_str()),
            "{keys:?}"
        );
    }

    #[test]
    fn overlapping_ranges_are_one_marker() {
        assert_eq!(
            replace("abcdef", vec![3..5, 1..4]),
            format!("a{}f", marker("bcde"))
        );
        assert_eq!(
            replace("abcdef", vec![0..2, 2..3]),
            format!("{}def", marker("abc"))
        );
        assert_eq!(replace("abc", vec![]), "abc");
    }
}
