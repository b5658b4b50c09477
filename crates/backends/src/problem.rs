//! Problem details (RFC 9457, shared with the proxy through `http1`) as backend responses.

use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use http1::Rejection;

use crate::message::Response;

pub use http1::{Problem, Violation};

/// Media type of every error body.
pub const PROBLEM_JSON: HeaderValue = HeaderValue::from_static(http1::problem::PROBLEM_JSON);

/// A problem as a response.
pub trait IntoResponse {
    fn into_response(self) -> Response;
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        Response::new(self.status(), PROBLEM_JSON, Bytes::from(self.to_json()))
    }
}

/// A request the connection refused (malformed, too large, too slow).
impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        Problem::new(self.status, self.detail).into_response()
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
    fn method_not_allowed_sets_allow() {
        let response = method_not_allowed(&http::Method::PUT, "GET, HEAD");
        assert_eq!(response.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(response.header(&header::ALLOW).unwrap(), "GET, HEAD");
    }
}
