//! RFC 9457 problem details: every error a backend answers carries one.

use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use serde::Serialize;

use crate::http1::Response;

/// Media type of every error body.
pub const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

/// One violation inside a request, located by a JSON pointer into the body
/// (or `/query/NAME`, `/path/NAME` for parameters).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Violation {
    pub pointer: String,
    pub detail: String,
}

impl Violation {
    pub fn new(pointer: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            detail: detail.into(),
        }
    }
}

/// A problem+json document; `errors` lists violations when there are any.
#[derive(Debug, Serialize)]
pub struct Problem {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<Violation>,
}

impl Problem {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            kind: "about:blank",
            title: status.canonical_reason().unwrap_or("Error"),
            status: status.as_u16(),
            detail: detail.into(),
            errors: Vec::new(),
        }
    }

    pub fn with_errors(mut self, errors: Vec<Violation>) -> Self {
        self.errors = errors;
        self
    }

    pub fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        // Serialising a struct of strings and integers cannot fail.
        let body = serde_json::to_vec(&self).unwrap_or_default();
        Response::new(status, PROBLEM_JSON, Bytes::from(body))
    }
}

/// Shorthand for a problem response without violations.
pub fn problem(status: StatusCode, detail: impl Into<String>) -> Response {
    Problem::new(status, detail).into_response()
}

/// 404 for a path no route knows.
pub fn not_found(path: &str) -> Response {
    problem(StatusCode::NOT_FOUND, format!("no resource at {path}"))
}

/// 405 with the `Allow` header listing what the resource accepts.
pub fn method_not_allowed(method: &http::Method, allow: &'static str) -> Response {
    problem(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method {method} is not allowed here; allowed: {allow}"),
    )
    .with_header(header::ALLOW, HeaderValue::from_static(allow))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_body_names_status_and_violations() {
        let response = Problem::new(StatusCode::BAD_REQUEST, "invalid pet")
            .with_errors(vec![Violation::new("/name", "is required")])
            .into_response();
        assert_eq!(response.status, StatusCode::BAD_REQUEST);
        assert_eq!(response.content_type, PROBLEM_JSON);
        let json: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
        assert_eq!(json["status"], 400);
        assert_eq!(json["title"], "Bad Request");
        assert_eq!(json["errors"][0]["pointer"], "/name");
    }

    #[test]
    fn method_not_allowed_sets_allow() {
        let response = method_not_allowed(&http::Method::PUT, "GET, HEAD");
        assert_eq!(response.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(response.header(&header::ALLOW).unwrap(), "GET, HEAD");
    }
}
