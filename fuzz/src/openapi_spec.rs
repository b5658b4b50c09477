//! OpenAPI spec loading (crates/openapi: `Spec::from_str`, then
//! `Validator::new`): any bytes as a spec give a validator or an error,
//! never a panic. An error names the spec, points (when it points) at a
//! JSON pointer, and says what is wrong. A spec that compiles validates a
//! request to each of its paths (templates filled in) with an outcome
//! whose violations are bounded, as `openapi_request` checks them.

use openapi::{Outcome, Request, Spec, SpecError, Validator, ValidatorOptions};

const ORIGIN: &str = "fuzz.yaml";

fn check_error(error: &SpecError) {
    assert_eq!(error.origin(), ORIGIN);
    assert!(!error.message().is_empty(), "{error}");
    if let Some(pointer) = error.pointer() {
        assert!(pointer.is_empty() || pointer.starts_with('/'), "{error}");
    }
    assert!(error.to_string().starts_with(ORIGIN));
}

/// A path of `template` with each `{name}` filled in.
fn filled(template: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in template.chars() {
        match c {
            '{' => inside = true,
            '}' if inside => {
                inside = false;
                out.push('1');
            }
            c if !inside => out.push(c),
            _ => {}
        }
    }
    out
}

pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let spec = match Spec::from_str(text, ORIGIN) {
        Ok(spec) => spec,
        Err(error) => return check_error(&error),
    };
    assert_eq!(spec.origin(), ORIGIN);
    let options = ValidatorOptions {
        validate_responses: true,
        ..ValidatorOptions::default()
    };
    let validator = match Validator::new(&spec, options) {
        Ok(validator) => validator,
        Err(error) => return check_error(&error),
    };
    let paths = spec.document().get("paths").and_then(|p| p.as_object());
    for template in paths.into_iter().flat_map(|p| p.keys()).take(8) {
        let path = filled(template);
        for (method, body) in [("GET", None), ("POST", Some(&b"{\"id\":1}"[..]))] {
            let mut request = Request::new(method, path.as_bytes()).with_query(b"limit=1");
            if let Some(body) = body {
                request = request.with_body(b"application/json", body);
            }
            let outcome = validator.validate(&request);
            if let Outcome::Invalid(violations) = &outcome {
                crate::openapi_request::check_violations(violations, "/");
            }
            if let Ok(matched) = validator.match_operation(method, path.as_bytes()) {
                assert_eq!(matched.validate(&request), outcome);
            }
        }
    }
}
