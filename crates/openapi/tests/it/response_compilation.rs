//! Compiling the responses of a spec: their faults fail
//! [`Validator::new`] only when responses are validated, and a shared
//! response's warning is given once.

use openapi::{Spec, SpecError, Validator, ValidatorOptions};

use crate::responses::RESPONSES_ON;

fn error_with_responses(responses: &str) -> (SpecError, Result<Validator, SpecError>) {
    let yaml = format!(
        "openapi: 3.0.3\ninfo: {{ title: t, version: \"1\" }}\npaths:\n  /a:\n    get:\n      responses:\n{responses}"
    );
    let spec = Spec::from_str(&yaml, "specs/x.yaml").expect("spec loads");
    let error = Validator::new(&spec, RESPONSES_ON).expect_err("fails with responses");
    // Without response validation the same spec compiles.
    (error, Validator::new(&spec, ValidatorOptions::default()))
}

#[test]
fn bad_responses_fail_only_when_validated() {
    let (error, plain) = error_with_responses("        \"2X0\": { description: x }\n");
    assert!(plain.is_ok());
    assert_eq!(error.pointer(), Some("/paths/~1a/get/responses/2X0"));
    assert!(error.message().contains("not a status code"), "{error}");

    let (error, plain) = error_with_responses("        \"600\": { description: x }\n");
    assert!(plain.is_ok());
    assert_eq!(error.pointer(), Some("/paths/~1a/get/responses/600"));

    let (error, plain) = error_with_responses(
        "        \"200\": { description: x, content: { application/json: { schema: { $ref: '#/nope' } } } }\n",
    );
    assert!(plain.is_ok());
    assert_eq!(
        error.to_string(),
        "specs/x.yaml: #/paths/~1a/get/responses/200/content/application~1json/schema/$ref: $ref `#/nope` does not resolve"
    );

    let (error, plain) = error_with_responses(
        "        \"200\": { description: x, content: { application/json: { schema: { type: string, pattern: '(?=x)' } } } }\n",
    );
    assert!(plain.is_ok());
    assert!(
        error
            .to_string()
            .starts_with("specs/x.yaml: #/paths/~1a/get/responses/200/content/application~1json/schema/pattern: invalid schema"),
        "{error}"
    );

    let (error, plain) =
        error_with_responses("        2XX: { description: x }\n        2xx: { description: y }\n");
    assert!(plain.is_ok());
    assert!(error.message().contains("declared twice"), "{error}");
}

#[test]
fn non_json_response_schemas_are_warned_about_once() {
    let spec = Spec::from_str(
        r#"
openapi: 3.1.0
info: { title: t, version: "1" }
paths:
  /a:
    get:
      responses:
        "200": { $ref: '#/components/responses/Xml' }
        "201": { $ref: '#/components/responses/Xml' }
components:
  responses:
    Xml:
      description: xml
      content:
        application/xml:
          schema: { type: object }
"#,
        "specs/x.yaml",
    )
    .unwrap();
    let validator = Validator::new(&spec, RESPONSES_ON).unwrap();
    assert_eq!(
        validator.warnings(),
        ["specs/x.yaml: #/components/responses/Xml/content/application~1xml: `application/xml` response bodies are not checked against their schema"]
    );
    assert!(Validator::new(&spec, ValidatorOptions::default())
        .unwrap()
        .warnings()
        .is_empty());
}
