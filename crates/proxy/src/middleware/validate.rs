//! `validate`: requests checked against an OpenAPI 3.0/3.1 document
//! (crates/openapi): path, method, path/query/header parameters and JSON
//! bodies. A request that breaks the spec gets 400 with every violation
//! and its JSON pointer; an operation the spec lacks gets 404/405 (or
//! passes, if configured); a body the operation does not accept, 415.
//! With `responses: true`, upstream responses are checked too (status,
//! media type, JSON body up to `max_response_bytes`); a mismatch is logged
//! and counted, and the response still reaches the client: the proxy
//! reports a broken service rather than breaking its clients.

use std::sync::{
    atomic::{AtomicU64, Ordering::Relaxed},
    Arc,
};

use anyhow::Context as _;
use http::{header, HeaderValue, StatusCode};
use http1::Violation;
use openapi::{
    Headers, Outcome, Request, ResponseOutcome, Spec, UnknownOperation, Validator, ValidatorOptions,
};
use tracing::warn;

use super::{
    build::{Build, Builder, Keep},
    Answer, Exchange, Flow, Handler, RequestView, ResponseView,
};
use crate::config::{self, ValidateSettings};
use crate::telemetry::{Exposition, MetricKind};
use crate::wire::fields::Fields;

#[derive(Debug)]
pub(crate) struct RequestValidator {
    validator: Validator,
    max_body: usize,
    /// `None`: responses are not checked.
    max_response: Option<usize>,
    response_failures: AtomicU64,
}

impl Build for ValidateSettings {
    fn build(&self, builder: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        // Built anew at each reload: its spec file may have changed.
        builder.keep = Keep::Never;
        Ok(Arc::new(RequestValidator::new(self)?))
    }
}

/// The API operation the request matched, for checking its response
/// (per-request state).
#[derive(Debug, Default)]
struct Matched(Option<openapi::OperationRef>);

/// The operation the request matched, when responses are checked.
fn matched(exchange: &Exchange) -> Option<openapi::OperationRef> {
    exchange.state.get::<Matched>().and_then(|m| m.0)
}

impl RequestValidator {
    fn new(config: &ValidateSettings) -> anyhow::Result<Self> {
        let spec =
            Spec::from_file(&config.openapi.value).map_err(|err| anyhow::anyhow!("{err}"))?;
        let max_body = usize::try_from(config.max_body_bytes).unwrap_or(usize::MAX);
        let options = ValidatorOptions {
            unknown_operation: match config.unknown_operation {
                config::UnknownOperation::Reject => UnknownOperation::NotFound,
                config::UnknownOperation::Pass => UnknownOperation::Pass,
            },
            max_body_bytes: max_body,
            validate_responses: config.responses,
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
            max_response: config
                .responses
                .then(|| usize::try_from(config.max_response_bytes).unwrap_or(usize::MAX)),
            response_failures: AtomicU64::new(0),
        })
    }

    fn response_failed(&self, exchange: &Exchange, status: StatusCode, why: &str) {
        self.response_failures.fetch_add(1, Relaxed);
        let operation = matched(exchange)
            .and_then(|op| self.validator.template(op))
            .unwrap_or("?");
        warn!(method = %exchange.method, operation, %status, "response does not match the API spec: {why}");
    }
}

impl Handler for RequestValidator {
    /// One total over every `validate` instance.
    fn render_metrics(&self, _name: &str, out: &mut Exposition) {
        out.family(
            "sluice_validate_response_failures_total",
            MetricKind::Counter,
            "Upstream responses that did not match the API spec.",
        )
        .add(&[], self.response_failures.load(Relaxed));
    }

    fn wants_body(&self, request: &RequestView<'_>) -> Option<usize> {
        self.validator
            .needs_body(request.method.as_str(), request.path.as_bytes())
            .then_some(self.max_body)
    }

    fn wants_response_body(&self, status: StatusCode, exchange: &Exchange) -> Option<usize> {
        let max = self.max_response?;
        let op = matched(exchange)?;
        // The media type is checked with the body; any JSON schema for the status will do here.
        self.validator
            .response_wants_body(op, status.as_u16(), Some(b"application/json"))
            .then_some(max)
    }

    fn response_body(&self, response: &ResponseView<'_>, exchange: &Exchange) {
        let Some(op) = matched(exchange) else {
            return;
        };
        let outcome = self.validator.validate_response(
            op,
            response.status.as_u16(),
            response.content_type,
            Some(response.body),
        );
        match outcome {
            ResponseOutcome::Valid => {}
            ResponseOutcome::Undeclared { declared } => self.response_failed(
                exchange,
                response.status,
                &format!("the status is not declared (declared: {declared})"),
            ),
            ResponseOutcome::UnsupportedMediaType { declared } => self.response_failed(
                exchange,
                response.status,
                &format!("the media type is not declared (declared: {declared})"),
            ),
            ResponseOutcome::Invalid(violations) => {
                let listed: Vec<String> = violations
                    .iter()
                    .map(|v| format!("{}: {}", v.pointer, v.message))
                    .collect();
                self.response_failed(exchange, response.status, &listed.join("; "));
            }
        }
    }

    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        if self.max_response.is_some() {
            exchange.state.get_mut::<Matched>().0 = self
                .validator
                .operation_ref(request.method.as_str(), request.path.as_bytes());
        }
        // HTTP/2 heads are lent to the validator as pairs.
        let pairs: Vec<(&[u8], &[u8])>;
        let headers = match request.fields {
            Fields::H1 { buf, fields } => Headers::Ranges { buf, fields },
            Fields::Map(_) => {
                pairs = request.headers().collect();
                Headers::Pairs(&pairs)
            }
        };
        let checked = Request {
            method: request.method.as_str(),
            path: request.path.as_bytes(),
            query: request.query.map(str::as_bytes),
            headers,
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
