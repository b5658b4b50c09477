//! Reading a parameter schema's keywords: whether the hand checks can
//! take it, the types it admits, and the [`Scalar`] rules it gives.

use regex::Regex;
use serde_json::{Map, Value};

use super::scalar::{Bound, Scalar};
use super::types::{types_of, Types};
use crate::spec::{pointer_push, Spec, SpecError};
use crate::text::truncate_chars;

/// Schema keywords the hand checks understand (or may ignore).
const SCALAR_KEYS: &[&str] = &[
    "type",
    "format",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "nullable",
    "default",
    "description",
    "title",
    "example",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "xml",
    "externalDocs",
];
const ARRAY_KEYS: &[&str] = &["items", "minItems", "maxItems", "uniqueItems"];

/// Only keywords the hand checks handle.
pub(super) fn simple(object: &Map<String, Value>, array: bool) -> bool {
    object.keys().all(|k| {
        SCALAR_KEYS.contains(&k.as_str())
            || (array && ARRAY_KEYS.contains(&k.as_str()))
            || k.starts_with("x-")
    }) && match object.get("type") {
        None => !array,
        Some(Value::String(t)) => (t == "array") == array,
        Some(Value::Array(list)) => list.iter().all(|t| {
            matches!(
                t.as_str(),
                Some("integer" | "number" | "string" | "boolean" | "null")
            ) || (array && t.as_str() == Some("array"))
        }),
        Some(_) => false,
    } && match object.get("pattern") {
        None => true,
        Some(p) => p.is_string(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Primitive,
    Array,
    Object,
}

/// The primitive types a schema admits (for coercion) and its kind,
/// looking through `allOf`/`anyOf`/`oneOf` a few levels deep.
pub(super) fn declared_types(spec: &Spec, schema: &Value, at: &str, depth: usize) -> (Types, Kind) {
    let mut types = Types::NONE;
    let mut kind = Kind::Primitive;
    let mut add = |name: &str, types: &mut Types| match name {
        "integer" => *types = *types | Types::INTEGER,
        "number" => *types = *types | Types::NUMBER,
        "string" => *types = *types | Types::STRING,
        "boolean" => *types = *types | Types::BOOLEAN,
        "array" => kind = Kind::Array,
        "object" => kind = Kind::Object,
        _ => {}
    };
    match schema.get("type") {
        Some(Value::String(t)) => add(t, &mut types),
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .for_each(|t| add(t, &mut types)),
        _ => {}
    }
    if depth < 4 {
        for key in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(list)) = schema.get(key) {
                for (i, member) in list.iter().enumerate() {
                    let member_at = pointer_push(&pointer_push(at, key), &i.to_string());
                    if let Ok((member, member_at)) = spec.deref(member, &member_at) {
                        let (t, k) = declared_types(spec, member, &member_at, depth + 1);
                        types = types | t;
                        if k != Kind::Primitive {
                            kind = k;
                        }
                    }
                }
            }
        }
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            if let Ok(target_at) = spec.ref_target(reference, at) {
                if let Some(target) = spec.lookup(&target_at) {
                    let (t, k) = declared_types(spec, target, &target_at, depth + 1);
                    types = types | t;
                    if k != Kind::Primitive {
                        kind = k;
                    }
                }
            }
        }
    }
    if types == Types::NONE {
        types = Types::STRING;
    }
    (types, kind)
}

/// Compiles a simple schema object into hand checks.
pub(super) fn compile_scalar(
    spec: &Spec,
    object: &Map<String, Value>,
    at: &str,
) -> Result<Scalar, SpecError> {
    let mut types = Types::NONE;
    match object.get("type") {
        None => types = Types::ANY,
        Some(Value::String(t)) => types = types_of(t),
        Some(Value::Array(list)) => {
            for t in list.iter().filter_map(Value::as_str) {
                types = types | types_of(t);
            }
        }
        Some(_) => {}
    }
    let number = |key: &str| -> Result<Option<f64>, SpecError> {
        match object.get(key) {
            None | Some(Value::Bool(_)) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(_) => Err(spec.error(&pointer_push(at, key), format!("`{key}` must be a number"))),
        }
    };
    let count = |key: &str| -> Result<Option<u64>, SpecError> {
        match object.get(key) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                spec.error(
                    &pointer_push(at, key),
                    format!("`{key}` must be a non-negative integer"),
                )
            }),
        }
    };
    // minimum with 3.0's boolean exclusiveMinimum, or 3.1's numeric one; the stricter wins.
    let bound = |inclusive_key: &str,
                 exclusive_key: &str,
                 lower: bool|
     -> Result<Option<Bound>, SpecError> {
        let inclusive = number(inclusive_key)?;
        let flag = object
            .get(exclusive_key)
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let first = inclusive.map(|limit| Bound {
            limit,
            exclusive: flag,
        });
        let second = number(exclusive_key)?.map(|limit| Bound {
            limit,
            exclusive: true,
        });
        Ok(match (first, second) {
            (Some(a), Some(b)) => {
                let b_stricter = if lower {
                    b.limit >= a.limit
                } else {
                    b.limit <= a.limit
                };
                Some(if b_stricter { b } else { a })
            }
            (a, b) => a.or(b),
        })
    };
    let pattern = match object.get("pattern").and_then(Value::as_str) {
        None => None,
        Some(p) => Some(Regex::new(p).map_err(|e| {
            spec.error(
                &pointer_push(at, "pattern"),
                format!(
                    "pattern does not compile: {}",
                    truncate_chars(&e.to_string(), 200)
                ),
            )
        })?),
    };
    let options = match (object.get("enum"), object.get("const")) {
        (Some(Value::Array(list)), _) => Some(list.clone().into_boxed_slice()),
        (Some(_), _) => {
            return Err(spec.error(&pointer_push(at, "enum"), "`enum` must be an array"))
        }
        (None, Some(value)) => Some(vec![value.clone()].into_boxed_slice()),
        (None, None) => None,
    };
    Ok(Scalar {
        types,
        int_bits: match object.get("format").and_then(Value::as_str) {
            Some("int32") => 32,
            Some("int64") => 64,
            _ => 0,
        },
        lower: bound("minimum", "exclusiveMinimum", true)?,
        upper: bound("maximum", "exclusiveMaximum", false)?,
        multiple_of: number("multipleOf")?,
        min_length: count("minLength")?,
        max_length: count("maxLength")?,
        pattern,
        options,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(version: &str) -> Spec {
        Spec::from_value(
            json!({
                "openapi": version,
                "components": { "schemas": {
                    "Id": { "type": "integer" },
                    "Tags": { "type": "array" },
                } },
            }),
            "t.json",
        )
        .unwrap()
    }

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn only_known_keywords_are_simple() {
        assert!(simple(
            &object(json!({ "type": "integer", "minimum": 1, "x-a": 1 })),
            false
        ));
        assert!(simple(
            &object(json!({ "type": ["string", "null"] })),
            false
        ));
        assert!(simple(&object(json!({})), false));
        assert!(
            !simple(&object(json!({})), true),
            "an array needs `type: array`"
        );
        assert!(!simple(
            &object(json!({ "type": "integer", "oneOf": [] })),
            false
        ));
        assert!(!simple(&object(json!({ "type": "array" })), false));
        assert!(simple(
            &object(json!({ "type": "array", "minItems": 1 })),
            true
        ));
        assert!(!simple(
            &object(json!({ "type": "string", "minItems": 1 })),
            false
        ));
        assert!(!simple(
            &object(json!({ "type": "string", "pattern": 5 })),
            false
        ));
        // Object schemas pass here: `declared_types` has set them aside already.
        assert!(simple(&object(json!({ "type": "object" })), false));
    }

    #[test]
    fn declared_types_look_through_composition_and_refs() {
        let spec = spec("3.1.0");
        let types = |schema: Value| declared_types(&spec, &schema, "/s", 0);
        assert_eq!(types(json!({})), (Types::STRING, Kind::Primitive));
        assert_eq!(
            types(json!({ "type": ["integer", "boolean"] })),
            (Types::INTEGER | Types::BOOLEAN, Kind::Primitive)
        );
        assert_eq!(
            types(
                json!({ "oneOf": [{ "$ref": "#/components/schemas/Id" }, { "type": "string" }] })
            ),
            (Types::INTEGER | Types::STRING, Kind::Primitive)
        );
        assert_eq!(
            types(json!({ "$ref": "#/components/schemas/Tags" })),
            (Types::STRING, Kind::Array)
        );
        assert_eq!(
            types(json!({ "allOf": [{ "type": "object" }] })),
            (Types::STRING, Kind::Object)
        );
    }

    #[test]
    fn the_stricter_of_both_bound_forms_wins() {
        let spec = spec("3.1.0");
        let scalar = compile_scalar(
            &spec,
            &object(json!({ "minimum": 5, "exclusiveMinimum": 5, "maximum": 9, "exclusiveMaximum": 10 })),
            "/s",
        )
        .unwrap();
        let lower = scalar.lower.unwrap();
        let upper = scalar.upper.unwrap();
        assert_eq!((lower.limit, lower.exclusive), (5.0, true));
        assert_eq!((upper.limit, upper.exclusive), (9.0, false));
        // 3.0: a boolean flag makes `minimum` exclusive.
        let scalar = compile_scalar(
            &spec,
            &object(json!({ "type": "number", "minimum": 0, "exclusiveMinimum": true, "format": "int32" })),
            "/s",
        )
        .unwrap();
        let lower = scalar.lower.unwrap();
        assert_eq!((lower.limit, lower.exclusive), (0.0, true));
        assert_eq!(scalar.types, Types::NUMBER | Types::INTEGER);
        assert_eq!(scalar.int_bits, 32);
    }

    #[test]
    fn bad_keyword_values_are_spec_errors() {
        let spec = spec("3.0.3");
        let error = |schema: Value| {
            compile_scalar(&spec, &object(schema), "/p/schema")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            error(json!({ "minLength": -1 })),
            "t.json: #/p/schema/minLength: `minLength` must be a non-negative integer"
        );
        assert_eq!(
            error(json!({ "maximum": "9" })),
            "t.json: #/p/schema/maximum: `maximum` must be a number"
        );
        assert_eq!(
            error(json!({ "enum": "a" })),
            "t.json: #/p/schema/enum: `enum` must be an array"
        );
        assert!(error(json!({ "pattern": "(" }))
            .starts_with("t.json: #/p/schema/pattern: pattern does not compile: "),);
        let scalar = compile_scalar(&spec, &object(json!({ "const": 3 })), "/p").unwrap();
        assert_eq!(scalar.options.as_deref(), Some(&[json!(3)][..]));
        assert_eq!(scalar.types, Types::ANY);
    }
}
