//! Specs that cannot be compiled: every error names the file and, where it
//! can, the JSON pointer at fault.

use openapi::{Spec, SpecError, Validator, ValidatorOptions};

fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Loads and compiles; the error it fails with.
fn error_of(yaml: &str) -> SpecError {
    match Spec::from_str(yaml, "specs/x.yaml")
        .and_then(|spec| Validator::new(&spec, ValidatorOptions::default()))
    {
        Ok(_) => panic!("compiled: {yaml}"),
        Err(e) => e,
    }
}

const HEAD: &str = "openapi: 3.0.3\ninfo: { title: t, version: \"1\" }\n";

fn spec_with(rest: &str) -> String {
    format!("{HEAD}{rest}")
}

#[test]
fn unsupported_parameter_location_names_file_and_pointer() {
    let path = data("swagger-body-param.yaml");
    let error = Spec::from_file(&path)
        .and_then(|spec| Validator::new(&spec, ValidatorOptions::default()))
        .unwrap_err();
    assert_eq!(error.origin(), path);
    assert_eq!(
        error.pointer(),
        Some("/paths/~1v1~1pets/get/parameters/1/in")
    );
    assert_eq!(
        error.to_string(),
        format!("{path}: #/paths/~1v1~1pets/get/parameters/1/in: unsupported `in: body` (Swagger 2.0; OpenAPI 3 uses `requestBody`)")
    );
}

#[test]
fn external_refs_are_refused() {
    let path = data("bad-ref.yaml");
    let error = Spec::from_file(&path)
        .and_then(|spec| Validator::new(&spec, ValidatorOptions::default()))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{path}: #/paths/~1v1~1things/post/requestBody/content/application~1json/schema/$ref: \
             external $ref `common.yaml#/Thing` is not supported (only local `#/...` references are)"
        )
    );
}

#[test]
fn ref_cycles_are_refused() {
    // A chain of references that loops.
    let error = error_of(&spec_with(
        r#"
paths:
  /a:
    post:
      requestBody:
        content:
          application/json:
            schema: { $ref: '#/components/schemas/A' }
components:
  schemas:
    A: { $ref: '#/components/schemas/B' }
    B: { $ref: '#/components/schemas/A' }
"#,
    ));
    assert!(error.message().contains("$ref cycle"), "{error}");
    assert!(
        error
            .to_string()
            .starts_with("specs/x.yaml: #/components/schemas/"),
        "{error}"
    );

    // A loop through allOf never descends into the instance.
    let error = error_of(&spec_with(
        r#"
paths:
  /a:
    post:
      requestBody:
        content:
          application/json:
            schema: { $ref: '#/components/schemas/A' }
components:
  schemas:
    A: { allOf: [ { $ref: '#/components/schemas/B' } ] }
    B: { anyOf: [ { type: string }, { $ref: '#/components/schemas/A' } ] }
"#,
    ));
    assert!(error.message().contains("cycle"), "{error}");

    // Parameters referencing each other.
    let error = error_of(&spec_with(
        r#"
paths:
  /a:
    get:
      parameters: [ { $ref: '#/components/parameters/P' } ]
components:
  parameters:
    P: { $ref: '#/components/parameters/Q' }
    Q: { $ref: '#/components/parameters/P' }
"#,
    ));
    assert!(error.message().contains("$ref cycle"), "{error}");
    assert_eq!(error.pointer(), Some("/components/parameters/Q"));

    // A request body referencing itself.
    let error = error_of(&spec_with(
        r#"
paths:
  /a:
    post:
      requestBody: { $ref: '#/components/requestBodies/B' }
components:
  requestBodies:
    B: { $ref: '#/components/requestBodies/B' }
"#,
    ));
    assert!(error.message().contains("$ref cycle"), "{error}");
}

#[test]
fn recursion_through_properties_is_fine() {
    let spec = Spec::from_str(
        &spec_with(
            r#"
paths:
  /a:
    post:
      requestBody:
        content:
          application/json:
            schema: { $ref: '#/components/schemas/Node' }
components:
  schemas:
    Node:
      type: object
      properties:
        next: { $ref: '#/components/schemas/Node' }
        all: { type: array, items: { $ref: '#/components/schemas/Node' } }
"#,
        ),
        "specs/x.yaml",
    )
    .unwrap();
    Validator::new(&spec, ValidatorOptions::default()).unwrap();
}

#[test]
fn unresolvable_and_anchor_refs() {
    let error = error_of(&spec_with(
        "paths:\n  /a:\n    get:\n      parameters: [ { $ref: '#/components/parameters/Nope' } ]\n",
    ));
    assert_eq!(
        error.to_string(),
        "specs/x.yaml: #/paths/~1a/get/parameters/0: $ref `#/components/parameters/Nope` does not resolve"
    );
    let error = error_of(&spec_with(
        "paths:\n  /a:\n    get:\n      parameters: [ { name: a, in: query, schema: { $ref: '#thing' } } ]\n",
    ));
    assert!(error.message().contains("anchor"), "{error}");
}

#[test]
fn bad_parameters() {
    let cases = [
        (
            "paths:\n  /a/{id}:\n    get:\n      parameters: [ { name: id, in: path, schema: { type: string } } ]\n",
            "/paths/~1a~1{id}/get/parameters/0/required",
            "a path parameter must be `required: true`",
        ),
        (
            "paths:\n  /a:\n    get:\n      parameters: [ { in: query, schema: { type: string } } ]\n",
            "/paths/~1a/get/parameters/0",
            "a parameter needs a string `name`",
        ),
        (
            "paths:\n  /a:\n    get:\n      parameters: [ { name: q, in: query } ]\n",
            "/paths/~1a/get/parameters/0",
            "a parameter needs `schema` or `content`",
        ),
        (
            "paths:\n  /a:\n    get:\n      parameters: [ { name: q, in: query, schema: { type: string, pattern: '(' } } ]\n",
            "/paths/~1a/get/parameters/0/schema/pattern",
            "pattern does not compile",
        ),
        (
            "paths:\n  /a:\n    get:\n      parameters: [ { name: q, in: query, schema: { type: string } }, { name: q, in: query, schema: { type: string } } ]\n",
            "/paths/~1a/get/parameters/1",
            "duplicate parameter",
        ),
        (
            "paths:\n  /a:\n    get:\n      parameters: [ { name: q, in: query, schema: { type: integer, minimum: low } } ]\n",
            "/paths/~1a/get/parameters/0/schema/minimum",
            "`minimum` must be a number",
        ),
    ];
    for (rest, pointer, message) in cases {
        let error = error_of(&spec_with(rest));
        assert_eq!(error.origin(), "specs/x.yaml");
        assert_eq!(error.pointer(), Some(pointer), "{error}");
        assert!(error.message().starts_with(message), "{error}");
    }
}

#[test]
fn bad_body_schemas_and_paths() {
    let error = error_of(&spec_with(
        r#"
paths:
  /a:
    post:
      requestBody:
        content:
          application/json:
            schema: { type: object, properties: { name: { type: string, pattern: '(?=x)' } } }
"#,
    ));
    assert!(
        error
            .to_string()
            .starts_with("specs/x.yaml: #/paths/~1a/post/requestBody/content/application~1json/schema/properties/name/pattern: invalid schema"),
        "{error}"
    );
    let error = error_of(&spec_with(
        "paths:\n  /a/{x}:\n    get: {}\n  /a/{y}:\n    get: {}\n",
    ));
    assert_eq!(error.pointer(), Some("/paths/~1a~1{y}"));
    assert!(
        error.message().contains("same path shape as `/a/{x}`"),
        "{error}"
    );
    let error = error_of(&spec_with("paths:\n  a/b:\n    get: {}\n"));
    assert_eq!(
        error.to_string(),
        "specs/x.yaml: #/paths/a~1b: a path must start with `/`"
    );
    let error = error_of(&spec_with("paths:\n  /a/{b:\n    get: {}\n"));
    assert!(error.message().contains("unclosed"), "{error}");
}

#[test]
fn bad_documents() {
    let error = Spec::from_file(data("does-not-exist.yaml")).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("does-not-exist.yaml: cannot read"),
        "{error}"
    );
    let error = Spec::from_str("openapi: 3.0.3\npaths: [\n", "specs/x.yaml").unwrap_err();
    assert!(
        error.to_string().starts_with("specs/x.yaml: invalid YAML"),
        "{error}"
    );
    let error = Spec::from_str("{\"openapi\": \"3.1.0\",", "specs/x.json").unwrap_err();
    assert!(
        error.to_string().starts_with("specs/x.json: invalid JSON"),
        "{error}"
    );
    let error = Spec::from_str("swagger: '2.0'\n", "specs/x.yaml").unwrap_err();
    assert_eq!(error.pointer(), Some("/swagger"));
    let error = Spec::from_str("openapi: 2.5.0\n", "specs/x.yaml").unwrap_err();
    assert_eq!(error.pointer(), Some("/openapi"));
    let error = Spec::from_str("info: {}\n", "specs/x.yaml").unwrap_err();
    assert_eq!(
        error.to_string(),
        "specs/x.yaml: #/openapi: missing `openapi` version field"
    );
    let error = Spec::from_str("openapi: 3.0.0\npaths: 5\n", "specs/x.yaml").unwrap_err();
    assert_eq!(error.pointer(), Some("/paths"));
    let error = Spec::from_str("openapi: 3.0.0\nopenapi: 3.0.1\n", "specs/x.yaml").unwrap_err();
    assert!(error.message().contains("duplicate"), "{error}");
    // JSON specs load too.
    let spec = Spec::from_str(
        r#"{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{}}"#,
        "x.json",
    )
    .unwrap();
    Validator::new(&spec, ValidatorOptions::default()).unwrap();
}

#[test]
fn warnings_for_what_is_only_partly_checked() {
    let spec = Spec::from_str(
        &spec_with(
            r#"
paths:
  /a/{id}:
    get:
      parameters:
        - { name: filter, in: query, style: deepObject, schema: { type: object } }
        - { name: obj, in: query, schema: { type: object } }
  /b:
    post:
      requestBody:
        content:
          multipart/form-data:
            schema: { type: object }
"#,
        ),
        "specs/x.yaml",
    )
    .unwrap();
    let validator = Validator::new(&spec, ValidatorOptions::default()).unwrap();
    let warnings = validator.warnings().join("\n");
    assert!(
        warnings.contains("#/paths/~1a~1{id}/get/parameters/0: `style: deepObject`"),
        "{warnings}"
    );
    assert!(
        warnings.contains("#/paths/~1a~1{id}/get/parameters/1/schema: object parameters"),
        "{warnings}"
    );
    assert!(
        warnings.contains("path parameter `{id}` is not declared"),
        "{warnings}"
    );
    assert!(
        warnings.contains("`multipart/form-data` bodies are not checked"),
        "{warnings}"
    );
    assert!(
        warnings.lines().all(|w| w.starts_with("specs/x.yaml: #/")),
        "{warnings}"
    );
}
