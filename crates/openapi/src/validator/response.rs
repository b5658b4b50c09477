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
