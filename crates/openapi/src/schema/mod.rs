//! Schemas handed to the `jsonschema` crate: request and response bodies,
//! and parameters whose schemas are too rich for the hand-written checks.
//!
//! A schema found at some pointer in the spec becomes a standalone JSON
//! Schema 2020-12 document: `{"allOf": [<schema>]}` plus, at their own
//! pointers (`/components/schemas/Pet`, ...), every schema it reaches through
//! local `$ref`s, so the references resolve unchanged. OpenAPI 3.0 schemas
//! are translated on the way (`nullable`, boolean `exclusiveMinimum` /
//! `exclusiveMaximum`, `format: int32`/`int64` ranges, `readOnly` properties
//! not required in requests, `writeOnly` ones not in responses; `example`, `discriminator`, `xml`,
//! `externalDocs`, `x-*` dropped; siblings of `$ref` ignored as 3.0 says);
//! OpenAPI 3.1 schemas are copied as written.
//!
//! `$ref` chains that loop without descending into the instance (`A: {$ref:
//! B}`, `B: {allOf: [{$ref: A}]}`) would recurse forever at validation time
//! and are rejected when the spec is compiled; recursion through
//! `properties`, `items` and the like is fine.
//!
//! Modules: `translate` (one 3.0 schema object rewritten), then `document`
//! (the standalone document, using `translate`); this file compiles and
//! runs the checks.

mod document;
mod translate;

use std::sync::Arc;

use jsonschema::{Draft, PatternOptions};
use serde_json::{Map, Value};

use crate::spec::{Spec, SpecError};
use crate::text::{truncate_chars, ECHO_CHARS};
use crate::{Violation, Violations};
use document::build_document;
pub(crate) use translate::Direction;

/// The longest message a body violation gets.
const MAX_MESSAGE_CHARS: usize = 256;

/// A compiled schema check; clones share the compiled validator.
#[derive(Clone)]
pub(crate) enum SchemaCheck {
    /// `true` or `{}`: anything goes.
    Any,
    /// A compiled `jsonschema` validator.
    Compiled(Arc<jsonschema::Validator>),
}

impl std::fmt::Debug for SchemaCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Any => f.write_str("Any"),
            Self::Compiled(_) => f.write_str("Compiled"),
        }
    }
}

impl SchemaCheck {
    /// Compiles the schema at `pointer` in `spec` for instances travelling
    /// in `direction`.
    pub(crate) fn compile(
        spec: &Spec,
        pointer: &str,
        validate_formats: bool,
        direction: Direction,
    ) -> Result<Self, SpecError> {
        let schema = spec
            .lookup(pointer)
            .ok_or_else(|| spec.error(pointer, "schema not found"))?;
        if schema == &Value::Bool(true) || schema.as_object().is_some_and(Map::is_empty) {
            return Ok(Self::Any);
        }
        let document = build_document(spec, pointer, direction)?;
        let validator = jsonschema::options()
            .with_draft(Draft::Draft202012)
            .should_validate_formats(validate_formats)
            .with_pattern_options(PatternOptions::regex())
            .build(&document)
            .map_err(|e| {
                // A schema the meta-schema rejects is the instance there:
                // `instance_path` is where it is in the document and
                // `schema_path` the meta-schema's rule. Otherwise (a
                // pattern the regex engine refuses) `schema_path` is where.
                let instance = e.instance_path().as_str();
                let at = match instance.is_empty() {
                    true => e.schema_path().as_str(),
                    false => instance,
                };
                // The document holds the schema at `/allOf/0` and each
                // `$ref` target at its own pointer in the spec.
                let at = match at.strip_prefix("/allOf/0") {
                    Some(rest) => format!("{pointer}{rest}"),
                    None if at.is_empty() => pointer.to_owned(),
                    None => at.to_owned(),
                };
                spec.error(
                    &at,
                    format!("invalid schema: {}", truncate_chars(&e.to_string(), 200)),
                )
            })?;
        Ok(Self::Compiled(Arc::new(validator)))
    }

    /// Validates `instance`, adding one violation per error, each pointer
    /// prefixed with `prefix` (`/body`, `/query/ids`).
    pub(crate) fn check(&self, instance: &Value, prefix: &str, out: &mut Violations) {
        let Self::Compiled(validator) = self else {
            return;
        };
        if validator.is_valid(instance) {
            return;
        }
        for error in validator.iter_errors(instance) {
            if out.is_full() {
                out.overflowed();
                break;
            }
            let shown = short_json(error.instance());
            let message = error.masked_with(shown).to_string();
            out.push(Violation {
                pointer: format!("{prefix}{}", error.instance_path().as_str()),
                message: truncate_chars(&message, MAX_MESSAGE_CHARS),
            });
        }
    }
}

/// `value` as compact JSON, cut after [`ECHO_CHARS`] characters with `…`;
/// never serializes more than it shows.
pub(crate) fn short_json(value: &Value) -> String {
    struct Bounded {
        buf: Vec<u8>,
    }
    impl std::io::Write for Bounded {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            let room = (ECHO_CHARS * 4 + 8).saturating_sub(self.buf.len());
            if room == 0 {
                return Err(std::io::Error::other("full"));
            }
            let n = data.len().min(room);
            self.buf.extend_from_slice(&data[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Bounded { buf: Vec::new() };
    let full = serde_json::to_writer(&mut out, value).is_ok();
    let text = String::from_utf8_lossy(&out.buf);
    let shown = truncate_chars(&text, ECHO_CHARS);
    if full || shown.ends_with('…') {
        shown
    } else {
        format!("{shown}…")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(schemas: Value) -> Spec {
        Spec::from_value(
            json!({ "openapi": "3.1.0", "components": { "schemas": schemas } }),
            "t.json",
        )
        .unwrap()
    }

    fn violations(check: &SchemaCheck, instance: Value) -> Vec<Violation> {
        let mut out = Violations::default();
        check.check(&instance, "/body", &mut out);
        out.into_vec()
    }

    #[test]
    fn empty_schemas_accept_anything_without_a_validator() {
        let spec = spec(json!({ "Empty": {}, "True": true }));
        for at in ["/components/schemas/Empty", "/components/schemas/True"] {
            let check = SchemaCheck::compile(&spec, at, true, Direction::Request).unwrap();
            assert!(matches!(check, SchemaCheck::Any), "{at}");
        }
        let err = SchemaCheck::compile(&spec, "/components/schemas/Nope", true, Direction::Request)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.json: #/components/schemas/Nope: schema not found"
        );
    }

    #[test]
    fn violations_point_under_the_prefix() {
        let spec = spec(json!({
            "Pet": {
                "type": "object",
                "required": ["name"],
                "properties": { "age": { "type": "integer" } },
            },
        }));
        let check =
            SchemaCheck::compile(&spec, "/components/schemas/Pet", true, Direction::Request)
                .unwrap();
        assert_eq!(violations(&check, json!({ "name": "x", "age": 3 })), []);
        let found = violations(&check, json!({ "age": "old" }));
        let pointers: Vec<&str> = found.iter().map(|v| v.pointer.as_str()).collect();
        assert_eq!(pointers, ["/body", "/body/age"], "{found:?}");
        assert_eq!(found[1].message, r#""old" is not of type "integer""#);
    }

    #[test]
    fn a_schema_jsonschema_rejects_names_its_pointer() {
        // Look-around is not linear-time; the `regex` engine refuses it.
        let spec = spec(json!({ "S": { "properties": { "n": { "pattern": "(?=x)" } } } }));
        let err = SchemaCheck::compile(&spec, "/components/schemas/S", true, Direction::Request)
            .unwrap_err();
        assert_eq!(
            err.pointer(),
            Some("/components/schemas/S/properties/n/pattern")
        );
        assert!(err.message().starts_with("invalid schema: "), "{err}");
    }

    #[test]
    fn a_schema_the_meta_schema_rejects_names_its_own_pointer() {
        // The meta-schema's rule (`minimum: 0`) is not where the mistake is.
        let direct = spec(json!({ "S": { "properties": { "n": { "minLength": -1 } } } }));
        let err = SchemaCheck::compile(&direct, "/components/schemas/S", true, Direction::Request)
            .unwrap_err();
        assert_eq!(
            err.pointer(),
            Some("/components/schemas/S/properties/n/minLength"),
            "{err}"
        );
        assert!(err.message().starts_with("invalid schema: "), "{err}");
        // In a `$ref` target, the pointer is the target's in the spec.
        let referring = spec(json!({
            "S": { "properties": { "n": { "$ref": "#/components/schemas/T" } } },
            "T": { "maxItems": -2 },
        }));
        let err = SchemaCheck::compile(
            &referring,
            "/components/schemas/S",
            true,
            Direction::Request,
        )
        .unwrap_err();
        assert_eq!(
            err.pointer(),
            Some("/components/schemas/T/maxItems"),
            "{err}"
        );
    }

    #[test]
    fn short_json_is_compact_and_cut() {
        assert_eq!(
            short_json(&json!({ "a": [1, true, null] })),
            r#"{"a":[1,true,null]}"#
        );
        let long = json!("y".repeat(300));
        assert_eq!(
            short_json(&long),
            format!("\"{}…", "y".repeat(ECHO_CHARS - 1))
        );
        let many = json!(vec![1; 100]);
        assert_eq!(short_json(&many), format!("[{}…", "1,".repeat(31) + "1"));
    }
}
