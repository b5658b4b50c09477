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

#[cfg(test)]
mod tests {
    use super::*;

    const PETSTORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../specs/petstore.yaml");

    fn validator(extra: &str) -> RequestValidator {
        let yaml = format!("openapi: \"{PETSTORE}\"\nmax_body_bytes: 64\n{extra}");
        RequestValidator::new(&serde_saphyr::from_str(&yaml).unwrap()).unwrap()
    }

    /// `method path?query` with `content_type` and `body`, through `validator`.
    fn check(
        validator: &RequestValidator,
        method: &str,
        target: &str,
        content_type: Option<&'static str>,
        body: Option<&[u8]>,
    ) -> (Flow, Exchange) {
        let mut headers = http::HeaderMap::new();
        if let Some(content_type) = content_type {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        }
        let method: http::Method = method.parse().unwrap();
        let (path, query) = target
            .split_once('?')
            .map_or((target, None), |(p, q)| (p, Some(q)));
        let request = RequestView {
            method: &method,
            path,
            query,
            body_len: body.map(<[u8]>::len),
            body,
            ..RequestView::get(&headers)
        };
        let mut exchange = Exchange {
            method: method.clone(),
            ..Exchange::default()
        };
        let flow = validator.request(&request, &mut exchange);
        (flow, exchange)
    }

    fn answer(flow: Flow) -> Answer {
        match flow {
            Flow::Answer(answer) => answer,
            other => panic!("passed: {other:?}"),
        }
    }

    #[test]
    fn a_spec_that_cannot_be_read_or_is_not_openapi_stops_the_build() {
        let settings = |path: &str| -> ValidateSettings {
            serde_saphyr::from_str(&format!("openapi: \"{path}\"\n")).unwrap()
        };
        assert!(RequestValidator::new(&settings("/nonexistent/spec.yaml")).is_err());
        let path =
            std::env::temp_dir().join(format!("sluice-validate-{}.yaml", std::process::id()));
        for (spec, why) in [
            ("swagger: \"2.0\"\npaths: {}\n", "OpenAPI 3"),
            ("openapi: 3.0.3\npaths: [", ""),
            (
                "openapi: 3.0.3\npaths:\n  /a:\n    get:\n      parameters: [{$ref: '#/components/parameters/gone'}]\n      responses: {}\n",
                "gone",
            ),
        ] {
            std::fs::write(&path, spec).unwrap();
            let err = format!(
                "{:#}",
                RequestValidator::new(&settings(path.to_str().unwrap())).unwrap_err()
            );
            assert!(err.contains(why), "{spec}: {err}");
        }
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn each_way_of_breaking_the_spec_has_its_status() {
        let v = validator("");
        let json = Some("application/json");
        assert!(matches!(
            check(&v, "GET", "/v1/pets?limit=10", None, None).0,
            Flow::Next
        ));
        let pet = br#"{"id":3,"name":"kitty"}"#;
        assert!(matches!(
            check(&v, "POST", "/v1/pets", json, Some(pet)).0,
            Flow::Next
        ));

        let bad = answer(check(&v, "GET", "/v1/pets?limit=0", None, None).0);
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        assert_eq!(bad.violations.len(), 1, "{bad:?}");
        assert!(
            format!("{:?}", bad.violations[0]).contains("/query/limit"),
            "{bad:?}"
        );
        let bad = answer(check(&v, "POST", "/v1/pets", json, Some(br#"{"id":"x","tag":7}"#)).0);
        assert!(bad.violations.len() >= 2, "every violation listed: {bad:?}");

        let not_allowed = answer(check(&v, "DELETE", "/v1/pets", None, None).0);
        assert_eq!(not_allowed.status, StatusCode::METHOD_NOT_ALLOWED);
        let allow = not_allowed
            .headers
            .iter()
            .find(|(n, _)| n == header::ALLOW)
            .unwrap();
        assert_eq!(allow.1, "GET, POST");
        assert_eq!(
            answer(check(&v, "GET", "/v1/nope", None, None).0).status,
            StatusCode::NOT_FOUND
        );
        let text = Some("text/plain");
        assert_eq!(
            answer(check(&v, "POST", "/v1/pets", text, Some(pet)).0).status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        let big = format!("{{\"id\":1,\"name\":\"{}\"}}", "x".repeat(100));
        assert_eq!(
            answer(check(&v, "POST", "/v1/pets", json, Some(big.as_bytes())).0).status,
            StatusCode::PAYLOAD_TOO_LARGE
        );
        // `unknown_operation: pass` lets what the spec lacks through, and
        // still checks what it has.
        let lenient = validator("unknown_operation: pass\n");
        assert!(matches!(
            check(&lenient, "GET", "/v1/nope", None, None).0,
            Flow::Next
        ));
        assert!(matches!(
            check(&lenient, "GET", "/v1/pets?limit=0", None, None).0,
            Flow::Answer(_)
        ));
    }

    #[test]
    fn only_operations_with_a_body_hold_it() {
        let v = validator("");
        let headers = http::HeaderMap::new();
        let post = RequestView {
            method: &http::Method::POST,
            path: "/v1/pets",
            ..RequestView::get(&headers)
        };
        assert_eq!(v.wants_body(&post), Some(64));
        let get = RequestView {
            path: "/v1/pets",
            ..RequestView::get(&headers)
        };
        assert_eq!(v.wants_body(&get), None);
    }

    fn failures(v: &RequestValidator) -> String {
        let mut out = Exposition::new();
        v.render_metrics("validate", &mut out);
        out.finish()
    }

    #[test]
    fn responses_are_checked_against_the_matched_operation_and_counted() {
        let off = validator("");
        let (_, exchange) = check(&off, "GET", "/v1/pets", None, None);
        assert!(
            matched(&exchange).is_none(),
            "nothing kept when responses are not checked"
        );
        assert_eq!(off.wants_response_body(StatusCode::OK, &exchange), None);

        let v = validator("responses: true\nmax_response_bytes: 4096\n");
        let (_, exchange) = check(&v, "GET", "/v1/pets", None, None);
        assert!(matched(&exchange).is_some());
        assert_eq!(v.wants_response_body(StatusCode::OK, &exchange), Some(4096));
        let (_, unmatched) = check(&v, "GET", "/v1/nope", None, None);
        assert_eq!(v.wants_response_body(StatusCode::OK, &unmatched), None);
        assert!(
            failures(&v).contains("sluice_validate_response_failures_total 0"),
            "{}",
            failures(&v)
        );

        let json = Some(&b"application/json"[..]);
        let respond = |status: u16, content_type: Option<&[u8]>, body: &[u8]| {
            v.response_body(
                &ResponseView {
                    status: StatusCode::from_u16(status).unwrap(),
                    content_type,
                    body,
                },
                &exchange,
            );
        };
        respond(200, json, br#"[{"id":1,"name":"catten"}]"#);
        assert!(
            failures(&v).contains("_total 0"),
            "a valid answer is no failure"
        );
        respond(200, json, br#"[{"id":"one","name":7}]"#);
        respond(418, json, b"{}");
        respond(200, Some(b"text/html"), b"<p>");
        assert!(
            failures(&v).contains("sluice_validate_response_failures_total 3"),
            "{}",
            failures(&v)
        );
        // An answer to a request no operation matched is not judged.
        v.response_body(
            &ResponseView {
                status: StatusCode::IM_A_TEAPOT,
                content_type: None,
                body: b"",
            },
            &unmatched,
        );
        assert!(failures(&v).contains("_total 3"));
    }
}
