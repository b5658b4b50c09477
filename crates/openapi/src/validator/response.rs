//! Checking a response against the `responses` of its operation.

use super::media::{bodiless_status, check_json, is_json, media_rule};
use super::model::Operation;
use crate::{ResponseOutcome, Violations};

/// A response with this `status` and `Content-Type` has a JSON schema to
/// check its body against (see [`crate::Validator::response_wants_body`]).
pub(super) fn response_wants_body(
    operation: &Operation,
    status: u16,
    content_type: Option<&[u8]>,
) -> bool {
    let Some(rule) = operation.responses.as_ref().and_then(|r| r.find(status)) else {
        return false;
    };
    if !rule.wants_body || operation.head || bodiless_status(status) {
        return false;
    }
    let content_type = content_type.unwrap_or(b"application/octet-stream");
    is_json(content_type)
        && media_rule(&rule.media, content_type).is_some_and(|m| m.check.is_some())
}

/// The verdict on a response to `operation` (see
/// [`crate::Validator::validate_response`] for the rules).
pub(super) fn validate_response<'v>(
    operation: &'v Operation,
    status: u16,
    content_type: Option<&[u8]>,
    body: Option<&[u8]>,
) -> ResponseOutcome<'v> {
    let Some(responses) = &operation.responses else {
        return ResponseOutcome::Valid;
    };
    let Some(rule) = responses.find(status) else {
        return ResponseOutcome::Undeclared {
            declared: &responses.declared,
        };
    };
    if rule.media.is_empty() {
        return ResponseOutcome::Valid;
    }
    let present = match body {
        Some(bytes) => !bytes.is_empty(),
        None => content_type.is_some(),
    };
    let mut out = Violations::default();
    if present {
        let content_type = content_type.unwrap_or(b"application/octet-stream");
        let Some(media) = media_rule(&rule.media, content_type) else {
            return ResponseOutcome::UnsupportedMediaType {
                declared: &rule.declared,
            };
        };
        if let (Some(check), Some(bytes)) = (&media.check, body) {
            if is_json(content_type) {
                check_json(check, bytes, &mut out);
            }
        }
    } else if !operation.head && !bodiless_status(status) {
        out.add(
            "/body",
            None,
            format!(
                "a response body ({}) is declared but none was sent",
                rule.declared
            ),
        );
    }
    if out.is_empty() {
        ResponseOutcome::Valid
    } else {
        ResponseOutcome::Invalid(out.into_vec())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::validator::compile::compiled_paths;
    use crate::validator::model::CompiledSpec;

    fn with_method(method: &str) -> CompiledSpec {
        compiled_paths(json!({ "/a": { method: { "responses": {
            "200": { "description": "ok", "content": {
                "application/json": { "schema": { "type": "array" } },
                "text/csv": {},
            } },
            "204": { "description": "none" },
            "5XX": { "description": "error", "content": { "application/problem+json": {} } },
        } } } }))
        .unwrap()
    }

    #[test]
    fn only_json_with_a_schema_wants_its_body() {
        let compiled = with_method("get");
        let op = &compiled.operations[0];
        let json = Some(&b"application/json"[..]);
        assert!(response_wants_body(op, 200, json));
        assert!(!response_wants_body(op, 200, None), "octet-stream");
        assert!(!response_wants_body(op, 200, Some(b"text/csv")));
        assert!(
            !response_wants_body(op, 503, Some(b"application/problem+json")),
            "no schema"
        );
        assert!(!response_wants_body(op, 404, json), "undeclared");
        let head = with_method("head");
        assert!(
            !response_wants_body(&head.operations[0], 200, json),
            "HEAD has no body"
        );
    }

    #[test]
    fn each_verdict() {
        let compiled = with_method("get");
        let op = &compiled.operations[0];
        let json = Some(&b"application/json"[..]);
        assert_eq!(
            validate_response(op, 200, json, Some(b"[1]")),
            ResponseOutcome::Valid
        );
        assert_eq!(
            validate_response(op, 404, json, Some(b"[1]")),
            ResponseOutcome::Undeclared {
                declared: "200, 204, 5XX"
            }
        );
        assert_eq!(
            validate_response(op, 200, Some(b"text/html"), Some(b"<p>")),
            ResponseOutcome::UnsupportedMediaType {
                declared: "application/json, text/csv"
            }
        );
        let ResponseOutcome::Invalid(violations) = validate_response(op, 200, json, Some(b"{}"))
        else {
            panic!("an object is not an array");
        };
        assert_eq!(violations[0].pointer, "/body");
        let ResponseOutcome::Invalid(violations) = validate_response(op, 500, None, Some(b""))
        else {
            panic!("declared content is missing");
        };
        assert_eq!(
            violations[0].message,
            "a response body (application/problem+json) is declared but none was sent"
        );
        // 204 declares nothing; a HEAD response never has a body.
        assert_eq!(
            validate_response(op, 204, None, None),
            ResponseOutcome::Valid
        );
        let head = with_method("head");
        assert_eq!(
            validate_response(&head.operations[0], 200, None, None),
            ResponseOutcome::Valid
        );
    }
}
