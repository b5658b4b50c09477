//! The reference petstore spec (OpenAPI 3.0.3): matching, parameters,
//! bodies, options and hostile input.

use std::sync::OnceLock;

use openapi::{Headers, Outcome, Request, Spec, UnknownOperation, Validator, ValidatorOptions};

use crate::{pointers, violations};

const PETSTORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../specs/petstore.yaml");

fn petstore() -> &'static Validator {
    static VALIDATOR: OnceLock<Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| with_options(ValidatorOptions::default()))
}

fn with_options(options: ValidatorOptions) -> Validator {
    let spec = Spec::from_file(PETSTORE).expect("petstore.yaml loads");
    Validator::new(&spec, options).expect("petstore.yaml compiles")
}

pub(crate) fn get(path: &str, query: Option<&str>) -> Outcome<'static> {
    let mut request = Request::new("GET", path.as_bytes());
    request.query = query.map(str::as_bytes);
    petstore().validate(&request)
}

pub(crate) fn post(content_type: Option<&str>, body: Option<&str>) -> Outcome<'static> {
    let mut request = Request::new("POST", b"/v1/pets");
    request.content_type = content_type.map(str::as_bytes);
    request.body = body.map(str::as_bytes);
    petstore().validate(&request)
}

pub(crate) const LIST: Outcome<'static> = Outcome::Valid {
    operation_id: Some("listPets"),
};
const SHOW: Outcome<'static> = Outcome::Valid {
    operation_id: Some("showPetById"),
};
pub(crate) const CREATE: Outcome<'static> = Outcome::Valid {
    operation_id: Some("createPets"),
};

#[test]
fn the_spec_compiles_without_warnings() {
    assert!(
        petstore().warnings().is_empty(),
        "{:?}",
        petstore().warnings()
    );
}

#[test]
fn list_pets_valid() {
    assert_eq!(get("/v1/pets", None), LIST);
    assert_eq!(get("/v1/pets", Some("")), LIST);
    for limit in ["1", "10", "100", "050"] {
        assert_eq!(
            get("/v1/pets", Some(&format!("limit={limit}"))),
            LIST,
            "{limit}"
        );
    }
    // Unknown query parameters are allowed, even malformed ones.
    assert_eq!(get("/v1/pets", Some("limit=5&verbose&x=%zz&&=")), LIST);
}

#[test]
fn limit_out_of_range_or_malformed() {
    for limit in [
        "0",
        "101",
        "abc",
        "1.5",
        "",
        "-1",
        "+5",
        "1e2",
        "99999999999999999999999",
        "%31%30%31",
    ] {
        let found = violations(get("/v1/pets", Some(&format!("limit={limit}"))));
        assert_eq!(found.len(), 1, "{limit}: {found:?}");
        assert_eq!(found[0].pointer, "/query/limit", "{limit}");
    }
    let message = |q: &str| violations(get("/v1/pets", Some(q)))[0].message.clone();
    assert_eq!(message("limit=0"), r#""0" is less than the minimum of 1"#);
    assert_eq!(
        message("limit=101"),
        r#""101" is greater than the maximum of 100"#
    );
    assert_eq!(message("limit=abc"), r#""abc" is not an integer"#);
    assert_eq!(message("limit=1.5"), r#""1.5" is not an integer"#);
    assert_eq!(
        message("limit=99999999999999999999999"),
        r#""99999999999999999999999" is out of range for int32"#
    );
    assert_eq!(
        message("limit=%zz"),
        "value has an invalid percent-encoding"
    );
    assert_eq!(
        message("limit=%ff"),
        "value is not valid UTF-8 once percent-decoded"
    );
    // An encoded name is the same parameter.
    assert_eq!(
        pointers(get("/v1/pets", Some("l%69mit=0"))),
        ["/query/limit"]
    );
}

#[test]
fn show_pet_and_path_parameters() {
    assert_eq!(get("/v1/pets/1", None), SHOW);
    assert_eq!(get("/v1/pets/0", None), SHOW);
    assert_eq!(get("/v1/pets/9223372036854775807", None), SHOW);
    assert_eq!(pointers(get("/v1/pets/abc", None)), ["/path/petId"]);
    assert_eq!(pointers(get("/v1/pets/-1", None)), ["/path/petId"]);
    assert_eq!(
        pointers(get("/v1/pets/9223372036854775808", None)),
        ["/path/petId"]
    );
}

#[test]
fn percent_encoded_paths() {
    // Path parameters are decoded before they are checked.
    assert_eq!(get("/v1/pets/%31%32", None), SHOW);
    let found = violations(get("/v1/pets/%41", None));
    assert_eq!(found[0].message, r#""A" is not an integer"#);
    assert_eq!(
        violations(get("/v1/pets/%zz", None))[0].message,
        "value has an invalid percent-encoding"
    );
    assert_eq!(
        violations(get("/v1/pets/%", None))[0].pointer,
        "/path/petId"
    );
    // Literal segments compare decoded.
    assert_eq!(get("/v1/p%65ts", None), LIST);
    assert_eq!(get("/v1/p%65ts/7", None), SHOW);
    // An encoded slash stays inside its segment.
    assert_eq!(pointers(get("/v1/pets/1%2F2", None)), ["/path/petId"]);
}

#[test]
fn unknown_paths() {
    for path in [
        "/v1/nope",
        "/v1/pets/1/toys",
        "/v1/pets/",
        "/v1/pets//",
        "/v1",
        "/",
        "",
        "v1/pets",
        "/v1/pets/../pets",
        "/v1/x/../pets",
        "/v1/./pets",
        "/v1/pets/%2e%2e",
        "/V1/PETS",
    ] {
        assert_eq!(get(path, None), Outcome::NoSuchPath, "{path}");
    }
}

#[test]
fn method_not_allowed_lists_allow() {
    let delete = petstore().validate(&Request::new("DELETE", b"/v1/pets"));
    assert_eq!(delete, Outcome::MethodNotAllowed { allow: "GET, POST" });
    assert_eq!(delete.status(), 405);
    let lower = petstore().validate(&Request::new("get", b"/v1/pets"));
    assert_eq!(lower, Outcome::MethodNotAllowed { allow: "GET, POST" });
    let put = petstore().validate(&Request::new("PUT", b"/v1/pets/1"));
    assert_eq!(put, Outcome::MethodNotAllowed { allow: "GET" });
    let brew = petstore().validate(&Request::new("BREW", b"/v1/pets/1"));
    assert_eq!(brew, Outcome::MethodNotAllowed { allow: "GET" });
}

#[test]
fn create_pet_valid() {
    assert_eq!(
        post(
            Some("application/json"),
            Some(r#"{"id":1,"name":"catten","tag":"cat"}"#)
        ),
        CREATE
    );
    assert_eq!(
        post(Some("application/json"), Some(r#"{"id":2,"name":"doggy"}"#)),
        CREATE
    );
    assert_eq!(
        post(
            Some("Application/JSON; charset=utf-8"),
            Some(r#"{"id":2,"name":"doggy","extra":[1,2]}"#)
        ),
        CREATE
    );
}

#[test]
fn create_pet_invalid_bodies() {
    let missing = violations(post(Some("application/json"), Some(r#"{"id":1}"#)));
    assert_eq!(missing.len(), 1);
    assert_eq!(missing[0].pointer, "/body");
    assert_eq!(missing[0].message, r#""name" is a required property"#);

    let wrong_type = violations(post(
        Some("application/json"),
        Some(r#"{"id":"one","name":"x"}"#),
    ));
    assert_eq!(wrong_type.len(), 1);
    assert_eq!(wrong_type[0].pointer, "/body/id");
    assert_eq!(wrong_type[0].message, r#""one" is not of type "integer""#);

    let below = violations(post(
        Some("application/json"),
        Some(r#"{"id":0,"name":"x"}"#),
    ));
    assert_eq!(below[0].pointer, "/body/id");

    let empty_name = violations(post(
        Some("application/json"),
        Some(r#"{"id":1,"name":""}"#),
    ));
    assert_eq!(empty_name[0].pointer, "/body/name");

    let not_json = violations(post(
        Some("application/json"),
        Some(r#"{"id":1,"name":"x""#),
    ));
    assert_eq!(not_json.len(), 1);
    assert_eq!(not_json[0].pointer, "/body");
    assert!(
        not_json[0].message.starts_with("is not valid JSON: "),
        "{}",
        not_json[0].message
    );

    let not_object = violations(post(Some("application/json"), Some("[1,2]")));
    assert_eq!(not_object[0].pointer, "/body");
}

#[test]
fn create_pet_media_types_and_presence() {
    assert_eq!(
        post(Some("text/plain"), Some("hello")),
        Outcome::UnsupportedMediaType {
            accepted: "application/json"
        }
    );
    assert_eq!(post(Some("text/plain"), Some("hello")).status(), 415);
    // A body without a Content-Type is application/octet-stream.
    assert_eq!(
        post(None, Some(r#"{"id":1,"name":"x"}"#)),
        Outcome::UnsupportedMediaType {
            accepted: "application/json"
        }
    );
    for (content_type, body) in [
        (None, None),
        (None, Some("")),
        (Some("application/json"), Some("")),
    ] {
        let found = violations(post(content_type, body));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pointer, "/body");
        assert_eq!(found[0].message, "a request body is required");
    }
}

#[test]
fn every_violation_is_listed() {
    let found = violations(post(
        Some("application/json"),
        Some(r#"{"id":-5,"name":7,"tag":false}"#),
    ));
    let mut found: Vec<&str> = found.iter().map(|v| v.pointer.as_str()).collect();
    found.sort_unstable();
    assert_eq!(found, ["/body/id", "/body/name", "/body/tag"]);

    // Parameters and path together.
    let spec = Spec::from_str(
        r#"
openapi: 3.0.3
info: { title: t, version: "1" }
paths:
  /items/{id}:
    post:
      parameters:
        - { name: id, in: path, required: true, schema: { type: integer } }
        - { name: q, in: query, required: true, schema: { type: string } }
        - { name: n, in: query, schema: { type: integer, maximum: 3 } }
        - { name: X-Trace, in: header, required: true, schema: { type: string } }
      requestBody:
        required: true
        content:
          application/json:
            schema: { type: object, required: [a], properties: { a: { type: string } } }
      responses: { "200": { description: ok } }
"#,
        "inline.yaml",
    )
    .unwrap();
    let validator = Validator::new(&spec, ValidatorOptions::default()).unwrap();
    let request = Request::new("POST", b"/items/x")
        .with_query(b"n=9")
        .with_body(b"application/json", b"{}");
    let found: Vec<String> = violations(validator.validate(&request))
        .into_iter()
        .map(|v| v.pointer)
        .collect();
    // In request order; missing parameters after the ones present.
    assert_eq!(
        found,
        [
            "/path/id",
            "/query/n",
            "/query/q",
            "/header/x-trace",
            "/body"
        ]
    );
    // A bad Content-Type with other violations is one more violation.
    let request = Request::new("POST", b"/items/x").with_body(b"text/plain", b"{}");
    let found = violations(validator.validate(&request));
    assert_eq!(
        found.last().map(|v| v.pointer.as_str()),
        Some("/header/content-type")
    );
}

#[test]
fn two_step_api() {
    let validator = petstore();
    let matched = validator.match_operation("POST", b"/v1/pets").unwrap();
    assert!(matched.needs_body());
    assert_eq!(matched.operation_id(), Some("createPets"));
    assert_eq!(matched.template(), "/v1/pets");
    let head = Request {
        content_type: Some(b"application/json"),
        ..Request::new("POST", b"/v1/pets")
    };
    assert_eq!(matched.validate_head(&head), CREATE);
    assert_eq!(
        matched.validate_head(&Request {
            content_type: Some(b"text/xml"),
            ..head
        }),
        Outcome::UnsupportedMediaType {
            accepted: "application/json"
        }
    );
    assert_eq!(
        matched.validate_body(Some(b"application/json"), Some(br#"{"id":1,"name":"x"}"#)),
        CREATE
    );
    assert!(matches!(
        matched.validate_body(Some(b"application/json"), Some(b"{}")),
        Outcome::Invalid(_)
    ));

    let matched = validator.match_operation("GET", b"/v1/pets/12").unwrap();
    assert!(!matched.needs_body());
    assert_eq!(matched.template(), "/v1/pets/{petId}");
    assert!(!validator.needs_body("GET", b"/v1/pets"));
    assert!(validator.needs_body("POST", b"/v1/pets"));
    assert!(!validator.needs_body("POST", b"/nope"));
    assert_eq!(
        validator.match_operation("GET", b"/nope").unwrap_err(),
        Outcome::NoSuchPath
    );
}

#[test]
fn base_path_and_unknown_operations() {
    let validator = with_options(ValidatorOptions {
        base_path: Some("/api/".to_owned()),
        ..ValidatorOptions::default()
    });
    assert_eq!(
        validator.validate(&Request::new("GET", b"/api/v1/pets")),
        LIST
    );
    assert_eq!(
        validator.validate(&Request::new("GET", b"/api/v1/pets/3")),
        SHOW
    );
    assert_eq!(
        pointers(validator.validate(&Request::new("GET", b"/api/v1/pets/x"))),
        ["/path/petId"]
    );
    assert_eq!(
        validator.validate(&Request::new("GET", b"/v1/pets")),
        Outcome::NoSuchPath
    );
    assert_eq!(
        validator.validate(&Request::new("GET", b"/apiv1/pets")),
        Outcome::NoSuchPath
    );
    assert_eq!(
        validator.validate(&Request::new("GET", b"/api")),
        Outcome::NoSuchPath
    );

    let passing = with_options(ValidatorOptions {
        unknown_operation: UnknownOperation::Pass,
        ..ValidatorOptions::default()
    });
    assert_eq!(
        passing.validate(&Request::new("GET", b"/v1/nope")),
        Outcome::Unmatched
    );
    assert_eq!(
        passing.validate(&Request::new("DELETE", b"/v1/pets")),
        Outcome::Unmatched
    );
    assert!(Outcome::Unmatched.is_allowed());
    // Known operations are still validated.
    let request = Request::new("GET", b"/v1/pets").with_query(b"limit=0");
    assert_eq!(pointers(passing.validate(&request)), ["/query/limit"]);
}

#[test]
fn body_size_limit() {
    let validator = with_options(ValidatorOptions {
        max_body_bytes: 16,
        ..ValidatorOptions::default()
    });
    let request = Request::new("POST", b"/v1/pets")
        .with_body(b"application/json", br#"{"id":1,"name":"abcdefgh"}"#);
    let outcome = validator.validate(&request);
    assert_eq!(outcome, Outcome::PayloadTooLarge { limit: 16 });
    assert_eq!(outcome.status(), 413);
}

#[test]
fn headers_from_ranges() {
    let spec = Spec::from_str(
        r#"
openapi: 3.0.3
info: { title: t, version: "1" }
paths:
  /x:
    get:
      parameters:
        - { name: X-Count, in: header, required: true, schema: { type: integer, maximum: 5 } }
        - { name: Accept, in: header, required: true, schema: { type: string } }
      responses: { "200": { description: ok } }
"#,
        "inline.yaml",
    )
    .unwrap();
    let validator = Validator::new(&spec, ValidatorOptions::default()).unwrap();
    let buf = b"GET /x HTTP/1.1\r\nx-count: 9\r\n\r\n";
    let fields = [(17..24, 26..27)];
    let request = Request {
        headers: Headers::Ranges {
            buf,
            fields: &fields,
        },
        ..Request::new("GET", b"/x")
    };
    let found = violations(validator.validate(&request));
    // `Accept` parameters are ignored, as OpenAPI says.
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].pointer, "/header/x-count");
    assert_eq!(found[0].message, r#""9" is greater than the maximum of 5"#);
    // Out-of-range ranges are skipped, not a panic.
    let fields = [(17..24, 26..2700)];
    let request = Request {
        headers: Headers::Ranges {
            buf,
            fields: &fields,
        },
        ..Request::new("GET", b"/x")
    };
    assert_eq!(pointers(validator.validate(&request)), ["/header/x-count"]);
    let request = Request::new("GET", b"/x").with_headers(&[(b"X-COUNT", b" 3 ")]);
    assert_eq!(
        validator.validate(&request),
        Outcome::Valid { operation_id: None }
    );
}

#[test]
fn validator_is_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Validator>();
    assert_send_sync::<Spec>();
}
