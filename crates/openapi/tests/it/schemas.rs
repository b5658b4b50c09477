//! OpenAPI 3.1 (JSON Schema 2020-12 as written) and the OpenAPI 3.0 schema
//! translation: type arrays, `nullable`, both forms of exclusive bounds,
//! array, header, cookie and composed parameters, recursive schemas.

use std::sync::OnceLock;

use openapi::{OpenApiVersion, Outcome, Request, Spec, Validator, ValidatorOptions};

use crate::{pointers, violations};

const PETS31: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pets31.yaml");

fn pets31() -> &'static Validator {
    static VALIDATOR: OnceLock<Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let spec = Spec::from_file(PETS31).expect("pets31.yaml loads");
        assert_eq!(spec.version(), OpenApiVersion::V3_1);
        Validator::new(&spec, ValidatorOptions::default()).expect("pets31.yaml compiles")
    })
}

const REQUEST_ID: &[(&[u8], &[u8])] = &[(b"x-request-id", b"0123abcd")];

fn get_pet(path: &str, query: &str) -> Outcome<'static> {
    let request = Request::new("GET", path.as_bytes())
        .with_query(query.as_bytes())
        .with_headers(REQUEST_ID);
    pets31().validate(&request)
}

fn create(body: &str) -> Outcome<'static> {
    pets31()
        .validate(&Request::new("POST", b"/pets").with_body(b"application/json", body.as_bytes()))
}

const GET_PET: Outcome<'static> = Outcome::Valid {
    operation_id: Some("getPet"),
};
const CREATE_PET: Outcome<'static> = Outcome::Valid {
    operation_id: Some("createPet"),
};

#[test]
fn v31_numeric_exclusive_bounds() {
    assert_eq!(get_pet("/pets/1", ""), GET_PET);
    let found = violations(get_pet("/pets/0", ""));
    assert_eq!(found[0].pointer, "/path/id");
    assert_eq!(
        found[0].message,
        r#""0" is less than or equal to the exclusive minimum of 0"#
    );
    assert_eq!(get_pet("/pets/1", "weight=100.4"), GET_PET);
    assert_eq!(get_pet("/pets/1", "weight=0.001"), GET_PET);
    assert_eq!(get_pet("/pets/1", "weight=7"), GET_PET);
    for weight in ["100.5", "0", "-3", "1e3", "abc", "NaN", "inf"] {
        assert_eq!(
            pointers(get_pet("/pets/1", &format!("weight={weight}"))),
            ["/query/weight"],
            "{weight}"
        );
    }
    assert_eq!(
        violations(create(r#"{"name":"x","weight":0}"#))[0].pointer,
        "/body/weight"
    );
    assert_eq!(create(r#"{"name":"x","weight":0.5}"#), CREATE_PET);
}

#[test]
fn v31_type_arrays() {
    assert_eq!(create(r#"{"name":"x","tag":null}"#), CREATE_PET);
    assert_eq!(create(r#"{"name":"x","tag":"cat"}"#), CREATE_PET);
    let found = violations(create(r#"{"name":"x","tag":5}"#));
    assert_eq!(found[0].pointer, "/body/tag");
    assert_eq!(found[0].message, r#"5 is not of types "null", "string""#);
    let found = violations(create(r#"{"name":null}"#));
    assert_eq!(found[0].pointer, "/body/name");
    // In a query parameter `null` is just not a type a string can fail.
    assert_eq!(get_pet("/pets/1", "tag=cat"), GET_PET);
    assert_eq!(
        pointers(get_pet("/pets/1", "tag=much-too-long")),
        ["/query/tag"]
    );
}

#[test]
fn v31_recursive_schema_and_formats() {
    let body = r#"{"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]}"#;
    assert_eq!(create(body), CREATE_PET);
    let body = r#"{"name":"a","children":[{"name":"b","children":[{"tag":"c"}]}]}"#;
    assert_eq!(pointers(create(body)), ["/body/children/0/children/0"]);
    assert_eq!(create(r#"{"name":"a","born":"2020-02-29"}"#), CREATE_PET);
    let found = violations(create(r#"{"name":"a","born":"2021-02-29"}"#));
    assert_eq!(found[0].pointer, "/body/born");
    assert_eq!(found[0].message, r#""2021-02-29" is not a "date""#);
}

#[test]
fn header_parameters() {
    let request = Request::new("GET", b"/pets/1");
    let found = violations(pets31().validate(&request));
    assert_eq!(found[0].pointer, "/header/x-request-id");
    assert_eq!(found[0].message, "a required parameter is missing");
    let request = Request::new("GET", b"/pets/1").with_headers(&[(b"X-Request-ID", b"nothex!!")]);
    let found = violations(pets31().validate(&request));
    assert_eq!(found[0].pointer, "/header/x-request-id");
    assert_eq!(
        found[0].message,
        r#""nothex!!" does not match "^[0-9a-f]{8}$""#
    );
    let twice: &[(&[u8], &[u8])] = &[
        (b"x-request-id", b"0123abcd"),
        (b"x-request-id", b"0123abcd"),
    ];
    let found = violations(pets31().validate(&Request::new("GET", b"/pets/1").with_headers(twice)));
    assert_eq!(found[0].message, "must not be repeated");
    let binary: &[(&[u8], &[u8])] = &[(b"x-request-id", b"\xff\xfe")];
    let found =
        violations(pets31().validate(&Request::new("GET", b"/pets/1").with_headers(binary)));
    assert_eq!(found[0].message, "value is not valid UTF-8");
}

#[test]
fn array_parameters() {
    assert_eq!(get_pet("/pets/1", "ids=1&ids=2&ids=3"), GET_PET);
    let found = violations(get_pet("/pets/1", "ids=1&ids=x&ids=y"));
    let found: Vec<&str> = found.iter().map(|v| v.pointer.as_str()).collect();
    assert_eq!(found, ["/query/ids/1", "/query/ids/2"]);
    let found = violations(get_pet("/pets/1", "ids=1&ids=2&ids=3&ids=4"));
    assert_eq!(found[0].message, "has 4 items, more than 3");
    let found = violations(get_pet("/pets/1", "ids=1&ids=2&ids=1"));
    assert_eq!(found[0].pointer, "/query/ids");
    assert_eq!(found[0].message, r#"has non-unique items ("1" repeats)"#);
    // pipeDelimited, explode: false.
    assert_eq!(get_pet("/pets/1", "colours=red|blue"), GET_PET);
    assert_eq!(get_pet("/pets/1", "colours=red%7Cgreen"), GET_PET);
    assert_eq!(
        pointers(get_pet("/pets/1", "colours=red|pink")),
        ["/query/colours/1"]
    );
    assert_eq!(
        violations(get_pet("/pets/1", "colours=red&colours=blue"))[0].message,
        "must not be repeated"
    );
}

#[test]
fn violations_are_capped() {
    let query = "ids=x&".repeat(1000);
    let found = violations(get_pet("/pets/1", &query));
    assert_eq!(found.len(), 65);
    assert_eq!(found[64].pointer, "");
    assert!(found[64].message.starts_with("more violations were found"));
}

#[test]
fn cookie_parameters() {
    let cookies: &[(&[u8], &[u8])] = &[
        (b"x-request-id", b"0123abcd"),
        (b"Cookie", b"theme=dark; session=abcdef"),
    ];
    assert_eq!(
        pets31().validate(&Request::new("GET", b"/pets/1").with_headers(cookies)),
        GET_PET
    );
    let cookies: &[(&[u8], &[u8])] = &[(b"x-request-id", b"0123abcd"), (b"cookie", b"session=ab")];
    let found =
        violations(pets31().validate(&Request::new("GET", b"/pets/1").with_headers(cookies)));
    assert_eq!(found[0].pointer, "/cookie/session");
    assert_eq!(found[0].message, r#""ab" is shorter than 4 characters"#);
}

#[test]
fn composed_parameter_schemas_use_jsonschema() {
    assert_eq!(get_pet("/pets/1", "sort=asc"), GET_PET);
    assert_eq!(get_pet("/pets/1", "sort=5"), GET_PET);
    for sort in ["up", "0"] {
        let found = violations(get_pet("/pets/1", &format!("sort={sort}")));
        assert_eq!(found[0].pointer, "/query/sort", "{sort}");
    }
}

fn compile(yaml: &str) -> Validator {
    let spec = Spec::from_str(yaml, "inline.yaml").expect("spec loads");
    let validator = Validator::new(&spec, ValidatorOptions::default()).expect("spec compiles");
    assert!(
        validator.warnings().is_empty(),
        "{:?}",
        validator.warnings()
    );
    validator
}

const V30: &str = r#"
openapi: 3.0.3
info: { title: t, version: "1" }
paths:
  /things/{id}:
    parameters:
      - name: id
        in: path
        required: true
        schema: { type: number, minimum: 0, exclusiveMinimum: true, maximum: 10, exclusiveMaximum: false }
    post:
      parameters:
        - { name: y, in: query, schema: { type: boolean } }
        - { name: count, in: query, schema: { $ref: '#/components/schemas/Count' } }
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: '#/components/schemas/Thing' }
          application/*+json:
            schema: { $ref: '#/components/schemas/Thing' }
          text/plain: {}
      responses: { "200": { description: ok } }
components:
  schemas:
    Count: { type: integer, maximum: 5, exclusiveMaximum: true }
    Thing:
      type: object
      required: [id, note, kind]
      properties:
        id: { type: integer, readOnly: true }
        note: { type: string, nullable: true, example: "an example" }
        kind: { type: string, enum: [a, b], nullable: true }
        size: { type: integer, format: int32, minimum: 0, exclusiveMinimum: true }
        plain: { type: string }
        parent: { $ref: '#/components/schemas/Thing', nullable: true }
      x-internal: true
"#;

#[test]
fn v30_translation() {
    let validator = compile(V30);
    let post = |body: &str| {
        validator.validate(
            &Request::new("POST", b"/things/5").with_body(b"application/json", body.as_bytes()),
        )
    };
    let valid = Outcome::Valid { operation_id: None };
    // nullable, enum + nullable; readOnly `id` is not required in a request.
    assert_eq!(post(r#"{"note":null,"kind":null}"#), valid);
    assert_eq!(post(r#"{"note":"n","kind":"a","size":1}"#), valid);
    assert_eq!(pointers(post(r#"{"note":"n","kind":"c"}"#)), ["/body/kind"]);
    assert_eq!(
        pointers(post(r#"{"note":"n","kind":"a","plain":null}"#)),
        ["/body/plain"]
    );
    // Boolean exclusiveMinimum, and int32 as a range.
    assert_eq!(
        pointers(post(r#"{"note":"n","kind":"a","size":0}"#)),
        ["/body/size"]
    );
    assert_eq!(
        pointers(post(r#"{"note":"n","kind":"a","size":2147483648}"#)),
        ["/body/size"]
    );
    // Siblings of a 3.0 $ref are ignored: `parent` is not nullable.
    assert_eq!(
        pointers(post(r#"{"note":"n","kind":"a","parent":null}"#)),
        ["/body/parent"]
    );
    assert_eq!(
        post(r#"{"note":"n","kind":"a","parent":{"note":null,"kind":"b"}}"#),
        valid
    );
    // +json media types are JSON too; text/plain has no schema.
    let request =
        Request::new("POST", b"/things/5").with_body(b"application/vnd.thing+json", b"{}");
    assert_eq!(pointers(validator.validate(&request)), ["/body", "/body"]);
    let request = Request::new("POST", b"/things/5").with_body(b"text/plain", b"anything");
    assert_eq!(validator.validate(&request), valid);

    // Boolean exclusive bounds on parameters; `y` is a name, not a YAML 1.1 boolean.
    let with = |path: &[u8], query: &[u8]| {
        validator.validate(
            &Request::new("POST", path)
                .with_query(query)
                .with_body(b"application/json", br#"{"note":"n","kind":"a"}"#),
        )
    };
    assert_eq!(with(b"/things/10", b"y=true&count=4"), valid);
    assert_eq!(with(b"/things/0.5", b""), valid);
    assert_eq!(pointers(with(b"/things/0", b"")), ["/path/id"]);
    assert_eq!(pointers(with(b"/things/10.01", b"")), ["/path/id"]);
    assert_eq!(pointers(with(b"/things/1", b"y=1")), ["/query/y"]);
    assert_eq!(pointers(with(b"/things/1", b"count=5")), ["/query/count"]);
}

#[test]
fn template_priority_and_partial_segments() {
    let validator = compile(
        r#"
openapi: 3.1.0
info: { title: t, version: "1" }
paths:
  /pets/{id}:
    get: { operationId: byId, parameters: [ { name: id, in: path, required: true, schema: { type: integer } } ] }
  /pets/mine:
    get: { operationId: mine }
  /pets/{id}/toys/{toy}:
    get:
      operationId: toy
      parameters:
        - { name: id, in: path, required: true, schema: { type: integer } }
        - { name: toy, in: path, required: true, schema: { type: string, maxLength: 3 } }
  /pets/mine/toys/ball:
    get: { operationId: ball }
  /files/v{version}:
    get: { operationId: file, parameters: [ { name: version, in: path, required: true, schema: { type: string } } ] }
  /reports/{name}.{format}:
    get:
      operationId: report
      parameters:
        - { name: name, in: path, required: true, schema: { type: string } }
        - { name: format, in: path, required: true, schema: { type: string, enum: [json, csv] } }
"#,
    );
    let op = |path: &str| match validator.validate(&Request::new("GET", path.as_bytes())) {
        Outcome::Valid { operation_id } => operation_id.unwrap_or("").to_owned(),
        other => format!("{other:?}"),
    };
    assert_eq!(op("/pets/mine"), "mine");
    assert_eq!(op("/pets/7"), "byId");
    assert_eq!(op("/pets/mine/toys/ball"), "ball");
    // Backtracks from the literal `mine` to `{id}`... which then fails its integer check.
    assert!(op("/pets/mine/toys/car").contains("/path/id"));
    assert_eq!(op("/pets/7/toys/car"), "toy");
    assert!(op("/pets/7/toys/lorry").contains("/path/toy"));
    assert_eq!(op("/reports/sales.2024.csv"), "report");
    assert!(op("/reports/sales.xml").contains("/path/format"));
    assert_eq!(op("/reports/.csv"), "NoSuchPath");
    assert_eq!(op("/files/v2"), "file");
    assert_eq!(op("/files/vv"), "file");
    assert_eq!(op("/files/v"), "NoSuchPath");
    assert_eq!(op("/files/x2"), "NoSuchPath");
    assert_eq!(op("/pets"), "NoSuchPath");
}

/// Uniqueness is checked with a set, not pair by pair. Measured in a debug
/// build: the set takes 0.09 s for 50,000 items, comparing every pair
/// (1.25e9 comparisons) 15.7 s. The limit is a third of the pairwise time.
#[test]
fn many_unique_items_are_checked_quickly() {
    let query: String = (0..50_000).map(|i| format!("ids={i}&")).collect();
    let started = std::time::Instant::now();
    let found = violations(get_pet("/pets/1", &query));
    assert_eq!(found[0].message, "has 50000 items, more than 3");
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
}
