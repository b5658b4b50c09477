//! Response validation ([`ValidatorOptions::validate_responses`]): the
//! petstore (OpenAPI 3.0) and a 3.1 spec with ranges, `default`, shared
//! responses, non-JSON media types and responses without content.

use std::sync::OnceLock;

use openapi::{OperationRef, ResponseOutcome, Spec, Validator, ValidatorOptions, Violation};

const PETSTORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../specs/petstore.yaml");
const RESPONSES31: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/responses31.yaml");

pub(crate) const RESPONSES_ON: ValidatorOptions = ValidatorOptions {
    base_path: None,
    unknown_operation: openapi::UnknownOperation::NotFound,
    max_body_bytes: 1024 * 1024,
    validate_formats: true,
    validate_responses: true,
};

fn load(path: &str) -> Validator {
    let spec = Spec::from_file(path).expect("spec loads");
    let validator = Validator::new(&spec, RESPONSES_ON).expect("spec compiles");
    assert!(
        validator.warnings().is_empty(),
        "{:?}",
        validator.warnings()
    );
    validator
}

fn petstore() -> &'static Validator {
    static VALIDATOR: OnceLock<Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| load(PETSTORE))
}

fn responses31() -> &'static Validator {
    static VALIDATOR: OnceLock<Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| load(RESPONSES31))
}

fn op(validator: &Validator, method: &str, path: &str) -> OperationRef {
    validator
        .operation_ref(method, path.as_bytes())
        .expect("operation exists")
}

fn violations(outcome: ResponseOutcome<'_>) -> Vec<Violation> {
    match outcome {
        ResponseOutcome::Invalid(violations) => violations,
        other => panic!("expected violations, got {other:?}"),
    }
}

fn pointers(outcome: ResponseOutcome<'_>) -> Vec<String> {
    violations(outcome).into_iter().map(|v| v.pointer).collect()
}

const JSON: Option<&[u8]> = Some(b"application/json");
const PROBLEM: Option<&[u8]> = Some(b"application/problem+json");
const PETS: &[u8] =
    br#"[{"id":1,"name":"catten","tag":"cat"},{"id":2,"name":"doggy","tag":"dog"}]"#;

/// Validates a petstore response to `method path`.
fn pet_response(
    method: &str,
    path: &str,
    status: u16,
    content_type: Option<&[u8]>,
    body: &str,
) -> ResponseOutcome<'static> {
    let validator = petstore();
    validator.validate_response(
        op(validator, method, path),
        status,
        content_type,
        Some(body.as_bytes()),
    )
}

#[test]
fn list_pets_body_is_valid() {
    let validator = petstore();
    let list = op(validator, "GET", "/v1/pets");
    assert!(validator.response_wants_body(list, 200, JSON));
    assert!(validator.response_wants_body(list, 200, Some(b"application/json; charset=utf-8")));
    assert_eq!(
        validator.validate_response(list, 200, JSON, Some(PETS)),
        ResponseOutcome::Valid
    );
    assert!(validator
        .validate_response(list, 200, JSON, Some(b"[]"))
        .is_valid());
    assert_eq!(
        validator.validate_response(
            list,
            200,
            Some(b"Application/JSON; charset=utf-8"),
            Some(PETS)
        ),
        ResponseOutcome::Valid
    );
    // The same, through Matched.
    let matched = validator.match_operation("GET", b"/v1/pets").unwrap();
    assert_eq!(matched.operation_ref(), list);
    assert_eq!(validator.template(list), Some("/v1/pets"));
    assert_eq!(validator.operation_id(list), Some("listPets"));
    let show = op(validator, "GET", "/v1/pets/7");
    assert_ne!(show, list);
    assert_eq!(validator.template(show), Some("/v1/pets/{petId}"));
    assert_eq!(
        pet_response("GET", "/v1/pets/7", 200, JSON, r#"{"id":7,"name":"x"}"#),
        ResponseOutcome::Valid
    );
}

#[test]
fn wrong_types_in_the_body() {
    let found = violations(pet_response(
        "GET",
        "/v1/pets",
        200,
        JSON,
        r#"[{"id":"1","name":"catten"},{"id":2,"name":""},{"id":3}]"#,
    ));
    let listed: Vec<(&str, &str)> = found
        .iter()
        .map(|v| (v.pointer.as_str(), v.message.as_str()))
        .collect();
    assert_eq!(
        listed,
        [
            ("/body/0/id", r#""1" is not of type "integer""#),
            ("/body/1/name", r#""" is shorter than 1 character"#),
            ("/body/2", r#""name" is a required property"#),
        ]
    );
    // Not an array at all; int64 and `minimum` from the 3.0 translation.
    assert_eq!(
        pointers(pet_response("GET", "/v1/pets", 200, JSON, r#"{"id":1}"#)),
        ["/body"]
    );
    assert_eq!(
        pointers(pet_response(
            "GET",
            "/v1/pets",
            200,
            JSON,
            r#"[{"id":0,"name":"a"},{"id":9223372036854775808,"name":"b"}]"#
        )),
        ["/body/0/id", "/body/1/id"]
    );
}

#[test]
fn bodies_that_are_not_json() {
    for body in ["<html>oops</html>", "[{\"id\":1,", "\u{feff}[]", "[] []"] {
        let found = violations(pet_response("GET", "/v1/pets", 200, JSON, body));
        assert_eq!(found.len(), 1, "{body}");
        assert_eq!(found[0].pointer, "/body", "{body}");
        assert!(
            found[0].message.starts_with("is not valid JSON"),
            "{body}: {}",
            found[0].message
        );
    }
    // Nesting beyond the parser's limit is refused before any schema code.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(
        pointers(pet_response("GET", "/v1/pets", 200, JSON, &deep)),
        ["/body"]
    );
}

#[test]
fn undeclared_statuses() {
    let validator = petstore();
    let list = op(validator, "GET", "/v1/pets");
    for status in [201, 204, 404, 500, 0, 999] {
        assert_eq!(
            validator.validate_response(list, status, JSON, Some(PETS)),
            ResponseOutcome::Undeclared {
                declared: "200, 400"
            },
            "{status}"
        );
        assert!(!validator.response_wants_body(list, status, JSON));
    }
    assert_eq!(
        pet_response("POST", "/v1/pets", 500, JSON, "{}"),
        ResponseOutcome::Undeclared {
            declared: "201, 400, 413, 415"
        }
    );
}

#[test]
fn problem_documents_and_media_types() {
    let problem = r#"{"type":"about:blank","title":"Bad Request","status":400,"detail":"limit"}"#;
    assert_eq!(
        pet_response("GET", "/v1/pets", 400, PROBLEM, problem),
        ResponseOutcome::Valid
    );
    assert_eq!(
        pointers(pet_response(
            "GET",
            "/v1/pets/1",
            404,
            PROBLEM,
            r#"{"type":"about:blank","title":"x","status":"404","errors":[{}]}"#
        )),
        ["/body", "/body/errors/0", "/body/errors/0", "/body/status"]
    );
    // A problem document sent as plain JSON, or a non-JSON media type.
    let unsupported = ResponseOutcome::UnsupportedMediaType {
        declared: "application/problem+json",
    };
    assert_eq!(
        pet_response("GET", "/v1/pets", 400, JSON, problem),
        unsupported
    );
    assert_eq!(
        pet_response("GET", "/v1/pets", 200, Some(b"text/html"), "<p>pets</p>"),
        ResponseOutcome::UnsupportedMediaType {
            declared: "application/json"
        }
    );
    // No Content-Type is application/octet-stream.
    assert_eq!(
        pet_response("POST", "/v1/pets", 413, None, problem),
        unsupported
    );
    let validator = petstore();
    let list = op(validator, "GET", "/v1/pets");
    assert!(!validator.response_wants_body(list, 200, Some(b"text/html")));
    assert!(!validator.response_wants_body(list, 200, None));
    assert!(validator.response_wants_body(list, 400, PROBLEM));
    assert!(!validator.response_wants_body(list, 400, JSON));
}

#[test]
fn read_only_and_write_only_by_direction() {
    let spec = Spec::from_str(
        r#"
openapi: 3.0.3
info: { title: t, version: "1" }
paths:
  /users:
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: '#/components/schemas/User' }
      responses:
        "201":
          description: created
          content:
            application/json:
              schema: { $ref: '#/components/schemas/User' }
components:
  schemas:
    User:
      type: object
      required: [id, name, password]
      properties:
        id: { type: integer, readOnly: true }
        name: { type: string, nullable: true }
        password: { type: string, writeOnly: true }
"#,
        "inline.yaml",
    )
    .unwrap();
    let validator = Validator::new(&spec, RESPONSES_ON).unwrap();
    let request = openapi::Request::new("POST", b"/users")
        .with_body(b"application/json", br#"{"name":null,"password":"pw"}"#);
    assert!(validator.validate(&request).is_allowed());
    let create = op(&validator, "POST", "/users");
    let response =
        |body: &str| validator.validate_response(create, 201, JSON, Some(body.as_bytes()));
    // In a response `id` (readOnly) is required and `password` (writeOnly) is not.
    assert_eq!(response(r#"{"id":1,"name":null}"#), ResponseOutcome::Valid);
    let found = violations(response(r#"{"name":"n","password":"pw"}"#));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].pointer, "/body");
    assert_eq!(found[0].message, r#""id" is a required property"#);
}

#[test]
fn exact_statuses_ranges_and_default() {
    let validator = responses31();
    let get = op(validator, "GET", "/items/1");
    let check = |status: u16, content_type: &str, body: &str| {
        validator.validate_response(
            get,
            status,
            Some(content_type.as_bytes()),
            Some(body.as_bytes()),
        )
    };
    let item = r#"{"id":1,"name":null,"tags":["a"]}"#;
    // 200 exactly: the Item schema, not the 2XX receipt.
    assert_eq!(check(200, "application/json", item), ResponseOutcome::Valid);
    assert_eq!(
        pointers(check(200, "application/json", r#"{"accepted":true}"#)),
        ["/body", "/body"]
    );
    assert_eq!(
        pointers(check(
            200,
            "application/json",
            r#"{"id":1,"name":2,"tags":[1,"b","c","d"]}"#
        )),
        ["/body/name", "/body/tags", "/body/tags/0"]
    );
    // text/csv is declared without a schema: not inspected.
    assert_eq!(
        check(200, "text/csv", "id,name\n1,x\n"),
        ResponseOutcome::Valid
    );
    assert!(!validator.response_wants_body(get, 200, Some(b"text/csv")));
    assert_eq!(
        check(200, "text/plain", "x"),
        ResponseOutcome::UnsupportedMediaType {
            declared: "application/json, text/csv"
        }
    );
    // 201 and 299 fall to 2XX.
    for status in [201, 299] {
        assert!(validator.response_wants_body(get, status, JSON));
        assert_eq!(
            check(status, "application/json", r#"{"accepted":true}"#),
            ResponseOutcome::Valid
        );
        assert_eq!(
            pointers(check(status, "application/json", item)),
            ["/body"],
            "{status}"
        );
    }
    // 204 is declared without content, and has no body anyway.
    assert_eq!(
        validator.validate_response(get, 204, None, None),
        ResponseOutcome::Valid
    );
    assert!(!validator.response_wants_body(get, 204, JSON));
    // 4xx (written in lower case) is a shared component response.
    assert!(validator.response_wants_body(get, 404, PROBLEM));
    assert_eq!(
        check(
            404,
            "application/problem+json",
            r#"{"title":"gone","status":404}"#
        ),
        ResponseOutcome::Valid
    );
    assert_eq!(
        pointers(check(
            418,
            "application/problem+json",
            r#"{"title":"tea","status":200}"#
        )),
        ["/body/status"]
    );
    // Everything else is covered by `default` (application/*+json).
    for status in [100, 302, 500, 599, 600, 0] {
        assert_eq!(
            check(status, "application/vnd.error+json", r#"{"code":1}"#),
            ResponseOutcome::Valid,
            "{status}"
        );
    }
    assert_eq!(
        pointers(check(503, "application/vnd.error+json", r#"{"code":"x"}"#)),
        ["/body/code"]
    );
    assert!(validator.response_wants_body(get, 503, Some(b"application/vnd.error+json")));
    assert_eq!(
        check(503, "text/html", "<h1>503</h1>"),
        ResponseOutcome::UnsupportedMediaType {
            declared: "application/*+json"
        }
    );
    // Declared statuses are listed in a fixed order.
    let delete = op(validator, "DELETE", "/items/1");
    assert_eq!(
        validator.validate_response(delete, 500, None, None),
        ResponseOutcome::Undeclared {
            declared: "202, 404"
        }
    );
}

#[test]
fn missing_and_unbuffered_bodies() {
    let validator = responses31();
    let get = op(validator, "GET", "/items/1");
    // Content is declared but nothing came.
    for (content_type, body) in [(None, None), (None, Some(&b""[..])), (JSON, Some(&b""[..]))] {
        let found = violations(validator.validate_response(get, 200, content_type, body));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pointer, "/body");
        assert_eq!(
            found[0].message,
            "a response body (application/json, text/csv) is declared but none was sent"
        );
    }
    // A body that was not buffered: only its media type is checked.
    assert_eq!(
        validator.validate_response(get, 200, JSON, None),
        ResponseOutcome::Valid
    );
    assert!(matches!(
        validator.validate_response(get, 200, Some(b"image/png"), None),
        ResponseOutcome::UnsupportedMediaType { .. }
    ));
    // Responses to HEAD have no body.
    let head = op(validator, "HEAD", "/items/1");
    assert!(!validator.response_wants_body(head, 200, JSON));
    assert_eq!(
        validator.validate_response(head, 200, JSON, Some(b"")),
        ResponseOutcome::Valid
    );
    // Declared media type without a schema.
    let create = op(validator, "POST", "/items");
    assert!(!validator.response_wants_body(create, 201, Some(b"application/octet-stream")));
    assert_eq!(
        validator.validate_response(create, 201, None, Some(b"\x00\x01")),
        ResponseOutcome::Valid
    );
    // An operation without `responses` accepts any response.
    let list = op(validator, "GET", "/items");
    assert_eq!(
        validator.validate_response(list, 500, Some(b"text/html"), Some(b"<h1>")),
        ResponseOutcome::Valid
    );
    assert!(!validator.response_wants_body(list, 200, JSON));
}

#[test]
fn violations_are_capped_and_cut() {
    let items: Vec<String> = (0..100)
        .map(|i| format!(r#"{{"id":"{i}","name":"n"}}"#))
        .collect();
    let body = format!("[{}]", items.join(","));
    let found = violations(pet_response("GET", "/v1/pets", 200, JSON, &body));
    assert_eq!(found.len(), 65);
    assert_eq!(found[63].pointer, "/body/63/id");
    assert!(found[64].pointer.is_empty());
    assert!(found[64].message.contains("only the first 64"));

    let long = "x".repeat(10_000);
    let body = format!(r#"[{{"id":1,"name":"{long}"}}]"#);
    let found = violations(pet_response("GET", "/v1/pets", 200, JSON, &body));
    assert_eq!(found[0].pointer, "/body/0/name");
    assert!(
        found[0].message.chars().count() <= 256,
        "{}",
        found[0].message
    );
    assert!(found[0].message.contains('…'), "{}", found[0].message);
}

#[test]
fn off_by_default_and_handles_stay_with_their_validator() {
    let spec = Spec::from_file(PETSTORE).unwrap();
    let plain = Validator::new(&spec, ValidatorOptions::default()).unwrap();
    let list = op(&plain, "GET", "/v1/pets");
    assert!(!plain.response_wants_body(list, 200, JSON));
    assert_eq!(
        plain.validate_response(list, 500, JSON, Some(b"not json")),
        ResponseOutcome::Valid
    );
    // A handle from another validator is not honoured.
    let other = op(petstore(), "GET", "/v1/pets");
    assert_ne!(other, list);
    assert_eq!(plain.template(other), None);
    assert_eq!(plain.operation_id(other), None);
    assert!(!plain.response_wants_body(other, 200, JSON));
    assert_eq!(
        plain.validate_response(other, 500, JSON, Some(b"not json")),
        ResponseOutcome::Valid
    );
    assert!(petstore().operation_ref("GET", b"/nope").is_none());
    assert!(petstore().operation_ref("PATCH", b"/v1/pets").is_none());
}
