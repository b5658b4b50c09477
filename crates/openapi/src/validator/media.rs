//! Media types: matching a `Content-Type` to the media rules an operation
//! declares, telling JSON apart, and checking a JSON body.

use serde_json::Value;

use super::model::MediaRule;
use crate::schema::SchemaCheck;
use crate::Violations;

/// Parses a JSON body and checks it, pointers under `/body`.
pub(super) fn check_json(check: &SchemaCheck, bytes: &[u8], out: &mut Violations) {
    // serde_json stops at 128 levels of nesting ("recursion limit
    // exceeded"), so a hostile body cannot overflow the stack here, in
    // jsonschema, or when the value is dropped.
    match serde_json::from_slice::<Value>(bytes) {
        Ok(instance) => check.check(&instance, "/body", out),
        Err(e) => out.add("/body", None, format!("is not valid JSON: {e}")),
    }
}

/// Statuses whose responses have no body (RFC 9110): 1xx, 204 and 304.
pub(super) fn bodiless_status(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

/// The essence (`type/subtype`) of a `Content-Type` value, trimmed.
fn essence(content_type: &[u8]) -> (&[u8], &[u8]) {
    let end = content_type
        .iter()
        .position(|&b| b == b';')
        .unwrap_or(content_type.len());
    let essence = content_type[..end].trim_ascii();
    match essence.iter().position(|&b| b == b'/') {
        Some(slash) => (
            essence[..slash].trim_ascii(),
            essence[slash + 1..].trim_ascii(),
        ),
        None => (essence, b""),
    }
}

pub(super) fn is_json(content_type: &[u8]) -> bool {
    let (main, sub) = essence(content_type);
    main.eq_ignore_ascii_case(b"application")
        && (sub.eq_ignore_ascii_case(b"json") || ends_with_ignore_case(sub, b"+json"))
}

fn ends_with_ignore_case(text: &[u8], suffix: &[u8]) -> bool {
    text.len() > suffix.len() && text[text.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

/// The most specific media rule for a `Content-Type`.
pub(super) fn media_rule<'r>(rules: &'r [MediaRule], content_type: &[u8]) -> Option<&'r MediaRule> {
    let (main, sub) = essence(content_type);
    let mut best: Option<(u8, &MediaRule)> = None;
    for media in rules {
        let same_main = media.main.as_bytes().eq_ignore_ascii_case(main);
        let rank = if same_main && media.sub.as_bytes().eq_ignore_ascii_case(sub) {
            4
        } else if same_main
            && media.sub.starts_with("*+")
            && ends_with_ignore_case(sub, &media.sub.as_bytes()[1..])
        {
            // `application/*+json`
            3
        } else if same_main && &*media.sub == "*" {
            2
        } else if &*media.main == "*" {
            1
        } else {
            continue;
        };
        if best.is_none_or(|(r, _)| rank > r) {
            best = Some((rank, media));
        }
    }
    best.map(|(_, media)| media)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(main: &str, sub: &str) -> MediaRule {
        MediaRule {
            main: main.into(),
            sub: sub.into(),
            check: None,
        }
    }

    /// The `main/sub` of the rule `content_type` picks.
    fn picked(rules: &[MediaRule], content_type: &str) -> Option<String> {
        media_rule(rules, content_type.as_bytes()).map(|m| format!("{}/{}", m.main, m.sub))
    }

    #[test]
    fn essences_drop_parameters_and_spaces() {
        assert_eq!(
            essence(b" text / HTML ; charset=utf-8"),
            (&b"text"[..], &b"HTML"[..])
        );
        assert_eq!(essence(b"nonsense"), (&b"nonsense"[..], &b""[..]));
        assert_eq!(essence(b""), (&b""[..], &b""[..]));
    }

    #[test]
    fn json_is_application_json_or_a_json_suffix() {
        assert!(is_json(b"application/json"));
        assert!(is_json(b"Application/JSON; charset=utf-8"));
        assert!(is_json(b"application/problem+json"));
        assert!(
            !is_json(b"application/+json"),
            "a suffix needs a name before it"
        );
        assert!(!is_json(b"text/json"));
        assert!(!is_json(b"application/jsonx"));
    }

    #[test]
    fn the_most_specific_rule_wins() {
        let rules = [
            rule("*", "*"),
            rule("application", "*"),
            rule("application", "*+json"),
            rule("application", "json"),
        ];
        assert_eq!(
            picked(&rules, "application/json").as_deref(),
            Some("application/json")
        );
        assert_eq!(
            picked(&rules, "application/problem+JSON").as_deref(),
            Some("application/*+json")
        );
        assert_eq!(
            picked(&rules, "application/xml").as_deref(),
            Some("application/*")
        );
        assert_eq!(picked(&rules, "text/plain").as_deref(), Some("*/*"));
        assert_eq!(picked(&rules[1..], "text/plain"), None);
        assert_eq!(picked(&[], "text/plain"), None);
    }

    #[test]
    fn bodiless_statuses() {
        let bodiless: Vec<u16> = [99, 100, 199, 200, 204, 205, 304, 404]
            .into_iter()
            .filter(|&s| bodiless_status(s))
            .collect();
        assert_eq!(bodiless, [100, 199, 204, 304]);
    }

    #[test]
    fn a_body_that_is_not_json_is_one_violation() {
        let mut out = Violations::default();
        check_json(&SchemaCheck::Any, b"{\"a\":", &mut out);
        let found = out.into_vec();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pointer, "/body");
        assert_eq!(
            found[0].message,
            "is not valid JSON: EOF while parsing a value at line 1 column 5"
        );
    }
}
