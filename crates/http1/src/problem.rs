//! RFC 9457 problem details: every error either server answers carries one.

use http::StatusCode;
use serde::Serialize;

/// Media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

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

    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The JSON document.
    pub fn to_json(&self) -> Vec<u8> {
        // Serialising a struct of strings and integers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_body_names_status_and_violations() {
        let problem = Problem::new(StatusCode::BAD_REQUEST, "invalid pet")
            .with_errors(vec![Violation::new("/name", "is required")]);
        assert_eq!(problem.status(), StatusCode::BAD_REQUEST);
        let json: serde_json::Value = serde_json::from_slice(&problem.to_json()).unwrap();
        assert_eq!(json["status"], 400);
        assert_eq!(json["title"], "Bad Request");
        assert_eq!(json["type"], "about:blank");
        assert_eq!(json["errors"][0]["pointer"], "/name");
    }
}
