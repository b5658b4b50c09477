//! OpenAPI request validation: any method, path, query, headers and body,
//! against the petstore spec (3.0) and the 3.1 test spec, give an outcome;
//! never a panic, never an unbounded list or message, and the two-step
//! API agrees with the one-call one. The same content type and body, as a
//! response to the matched operation, get a response outcome likewise.

use std::sync::OnceLock;

use openapi::{Outcome, Request, ResponseOutcome, Spec, Validator, ValidatorOptions, Violation};

const METHODS: [&str; 6] = ["GET", "POST", "PUT", "DELETE", "get", "BREW"];
const STATUSES: [u16; 8] = [200, 201, 204, 400, 404, 413, 500, 302];

pub(crate) fn check_violations(violations: &[Violation], prefix: &str) {
    assert!(!violations.is_empty() && violations.len() <= 65);
    for violation in violations {
        assert!(violation.pointer.is_empty() || violation.pointer.starts_with(prefix));
        assert!(
            violation.message.chars().count() <= 400,
            "{}",
            violation.message
        );
    }
}

fn validators() -> &'static [Validator; 2] {
    static VALIDATORS: OnceLock<[Validator; 2]> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        let compile = |text: &str, name: &str| {
            let spec = Spec::from_str(text, name).expect("spec loads");
            let options = ValidatorOptions {
                validate_responses: true,
                ..ValidatorOptions::default()
            };
            Validator::new(&spec, options).expect("spec compiles")
        };
        [
            compile(include_str!("../../specs/petstore.yaml"), "petstore.yaml"),
            compile(
                include_str!("../../crates/openapi/tests/data/pets31.yaml"),
                "pets31.yaml",
            ),
        ]
    })
}

pub fn check(data: &[u8]) {
    let Some((&selector, data)) = data.split_first() else {
        return;
    };
    let validator = &validators()[usize::from(selector >> 7)];
    let method = METHODS[usize::from(selector & 0x7f) % METHODS.len()];
    // Parts separated by NUL: path, query, header value (as
    // x-request-id and cookie), content type, body.
    let mut parts = data.splitn(5, |&b| b == 0);
    let path = parts.next().unwrap_or_default();
    let query = parts.next();
    let header = parts.next();
    let content_type = parts.next();
    let body = parts.next();
    let headers_storage;
    let mut request = Request {
        query,
        content_type,
        body,
        ..Request::new(method, path)
    };
    if let Some(value) = header {
        headers_storage = [(&b"x-request-id"[..], value), (&b"cookie"[..], value)];
        request = request.with_headers(&headers_storage);
    }
    let outcome = validator.validate(&request);
    if let Outcome::Invalid(violations) = &outcome {
        check_violations(violations, "/");
    }
    match validator.match_operation(method, path) {
        Ok(matched) => {
            assert_eq!(matched.validate(&request), outcome);
            let _ = matched.validate_head(&request);
            let _ = matched.validate_body(content_type, body);

            let op = matched.operation_ref();
            let status = STATUSES[usize::from(selector >> 3) % STATUSES.len()];
            if let ResponseOutcome::Invalid(violations) =
                validator.validate_response(op, status, content_type, body)
            {
                check_violations(&violations, "/body");
            }
            // A body worth buffering has a declared status and media type.
            if validator.response_wants_body(op, status, content_type) {
                assert_eq!(
                    validator.validate_response(op, status, content_type, None),
                    ResponseOutcome::Valid
                );
            }
        }
        Err(early) => assert_eq!(early, outcome),
    }
}
