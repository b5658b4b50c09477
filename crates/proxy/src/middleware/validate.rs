//! `validate`: requests checked against an OpenAPI 3.0/3.1 document
//! (crates/openapi): path, method, path/query/header parameters and JSON
//! bodies. A request that breaks the spec gets 400 with every violation
//! and its JSON pointer; an operation the spec lacks gets 404/405 (or
//! passes, if configured); a body the operation does not accept, 415.

use anyhow::Context as _;
use http::{header, HeaderValue, StatusCode};
use http1::Violation;
use openapi::{Headers, Outcome, Request, Spec, UnknownOperation, Validator, ValidatorOptions};

use super::{Answer, Exchange, Flow, Handler, RequestView};
use crate::config::{self, Validate};

#[derive(Debug)]
pub(crate) struct ValidateHandler {
    validator: Validator,
    max_body: usize,
}

impl ValidateHandler {
    pub(crate) fn new(config: &Validate) -> anyhow::Result<Self> {
        let spec =
            Spec::from_file(&config.openapi.value).map_err(|err| anyhow::anyhow!("{err}"))?;
        let max_body = usize::try_from(config.max_body_bytes).unwrap_or(usize::MAX);
        let options = ValidatorOptions {
            unknown_operation: match config.unknown_operation {
                config::UnknownOperation::Reject => UnknownOperation::NotFound,
                config::UnknownOperation::Pass => UnknownOperation::Pass,
            },
            max_body_bytes: max_body,
            ..ValidatorOptions::default()
        };
        let validator = Validator::new(&spec, options)
            .map_err(|err| anyhow::anyhow!("{err}"))
            .with_context(|| format!("openapi `{}`", config.openapi.value))?;
        for warning in validator.warnings() {
            tracing::warn!(spec = %config.openapi.value, "{warning}");
        }
        Ok(Self {
            validator,
            max_body,
        })
    }
}

impl Handler for ValidateHandler {
    fn wants_body(&self, request: &RequestView<'_>) -> Option<usize> {
        self.validator
            .needs_body(request.method.as_str(), request.path.as_bytes())
            .then_some(self.max_body)
    }

    fn request(&self, request: &RequestView<'_>, _exchange: &mut Exchange) -> Flow {
        let checked = Request {
            method: request.method.as_str(),
            path: request.path.as_bytes(),
            query: request.query.map(str::as_bytes),
            headers: Headers::Ranges {
                buf: request.buf,
                fields: request.fields,
            },
            content_type: request.header("content-type"),
            body: request.body,
        };
        let answer = match self.validator.validate(&checked) {
            Outcome::Valid { .. } | Outcome::Unmatched => return Flow::Next,
            Outcome::NoSuchPath => {
                Answer::problem(StatusCode::NOT_FOUND, "the API has no such path")
            }
            Outcome::MethodNotAllowed { allow } => Answer::problem(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("the API allows {allow} here"),
            )
            .with_header(
                header::ALLOW,
                HeaderValue::from_str(allow).unwrap_or(HeaderValue::from_static("")),
            ),
            Outcome::Invalid(violations) => Answer {
                violations: violations
                    .into_iter()
                    .map(|v| Violation::new(v.pointer, v.message))
                    .collect(),
                ..Answer::problem(
                    StatusCode::BAD_REQUEST,
                    "the request does not match the API",
                )
            },
            Outcome::UnsupportedMediaType { accepted } => Answer::problem(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("the body must be {accepted}"),
            ),
            Outcome::PayloadTooLarge { limit } => Answer::problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is larger than {limit} bytes"),
            ),
        };
        Flow::Answer(answer)
    }
}
