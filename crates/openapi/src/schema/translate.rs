//! The OpenAPI 3.0 dialect of JSON Schema rewritten as JSON Schema
//! 2020-12, one schema object at a time: 3.0's keywords mean something
//! else (or nothing) to a 2020-12 validator.

use serde_json::{Map, Value};

use crate::spec::{pointer_push, Spec, SpecError};

/// Which way a schema's instances travel: OpenAPI 3.0 makes `readOnly`
/// properties optional in requests and `writeOnly` ones in responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Direction {
    Request,
    Response,
}

impl Direction {
    /// The property flag that lifts `required` in this direction.
    fn optional_flag(self) -> &'static str {
        match self {
            Direction::Request => "readOnly",
            Direction::Response => "writeOnly",
        }
    }
}

/// The OpenAPI 3.0 keyword rewrites on one (already copied) schema object.
pub(super) fn translate_30(
    spec: &Spec,
    direction: Direction,
    original: &Map<String, Value>,
    at: &str,
    out: &mut Map<String, Value>,
) -> Result<(), SpecError> {
    // Boolean exclusiveMinimum / exclusiveMaximum modify minimum / maximum.
    for (exclusive, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        match original.get(exclusive) {
            Some(Value::Bool(true)) => {
                out.remove(exclusive);
                match out.remove(bound) {
                    Some(limit) => {
                        out.insert(exclusive.to_owned(), limit);
                    }
                    None => {
                        return Err(spec.error(
                            &pointer_push(at, exclusive),
                            format!("`{exclusive}: true` needs `{bound}`"),
                        ))
                    }
                }
            }
            Some(Value::Bool(false)) => {
                out.remove(exclusive);
            }
            _ => {}
        }
    }
    // nullable: true widens `type` (and `enum`) with null.
    if original.get("nullable") == Some(&Value::Bool(true)) {
        if let Some(Value::String(ty)) = out.get("type") {
            let ty = ty.clone();
            out.insert(
                "type".to_owned(),
                Value::Array(vec![Value::String(ty), Value::String("null".to_owned())]),
            );
        }
        if let Some(Value::Array(options)) = out.get_mut("enum") {
            if !options.contains(&Value::Null) {
                options.push(Value::Null);
            }
        }
    }
    // int32 / int64 are ranges.
    if original.get("type").and_then(Value::as_str) == Some("integer") {
        let range = match original.get("format").and_then(Value::as_str) {
            Some("int32") => Some((i64::from(i32::MIN), i64::from(i32::MAX))),
            Some("int64") => Some((i64::MIN, i64::MAX)),
            _ => None,
        };
        if let Some((min, max)) = range {
            let mut bounds = Map::new();
            bounds.insert("minimum".to_owned(), Value::from(min));
            bounds.insert("maximum".to_owned(), Value::from(max));
            let all_of = out
                .entry("allOf")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = all_of {
                list.push(Value::Object(bounds));
            }
        }
    }
    // readOnly properties are required in responses only, writeOnly
    // ones in requests only.
    if let (Some(Value::Object(properties)), Some(Value::Array(_))) =
        (original.get("properties"), out.get("required"))
    {
        let flag = direction.optional_flag();
        let mut optional: Vec<&str> = Vec::new();
        for (name, schema) in properties {
            let at = pointer_push(&pointer_push(at, "properties"), name);
            let (schema, _) = spec.deref(schema, &at)?;
            if schema.get(flag) == Some(&Value::Bool(true)) {
                optional.push(name);
            }
        }
        if let Some(Value::Array(required)) = out.get_mut("required") {
            required.retain(|name| !name.as_str().is_some_and(|n| optional.contains(&n)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `schema` translated as it sits at `/components/schemas/S` of a 3.0 spec.
    fn translated(schema: Value, direction: Direction) -> Result<Value, SpecError> {
        let spec = Spec::from_value(
            json!({
                "openapi": "3.0.3",
                "components": { "schemas": {
                    "S": schema.clone(),
                    "Id": { "type": "integer", "readOnly": true },
                } },
            }),
            "t.json",
        )?;
        let original = schema.as_object().expect("an object");
        let mut out = original.clone();
        out.remove("nullable");
        translate_30(
            &spec,
            direction,
            original,
            "/components/schemas/S",
            &mut out,
        )?;
        Ok(Value::Object(out))
    }

    #[test]
    fn nullable_widens_type_and_enum_with_null() {
        let schema = json!({ "type": "string", "nullable": true, "enum": ["a", null] });
        assert_eq!(
            translated(schema, Direction::Request).unwrap(),
            json!({ "type": ["string", "null"], "enum": ["a", null] })
        );
        let schema = json!({ "type": "string", "nullable": true, "enum": ["a"] });
        assert_eq!(
            translated(schema, Direction::Request).unwrap(),
            json!({ "type": ["string", "null"], "enum": ["a", null] })
        );
        let schema = json!({ "type": "string", "nullable": false });
        assert_eq!(
            translated(schema, Direction::Request).unwrap(),
            json!({ "type": "string" })
        );
    }

    #[test]
    fn boolean_exclusive_bounds_become_numeric() {
        let schema = json!({
            "minimum": 5, "exclusiveMinimum": true,
            "maximum": 9, "exclusiveMaximum": false,
        });
        assert_eq!(
            translated(schema, Direction::Request).unwrap(),
            json!({ "exclusiveMinimum": 5, "maximum": 9 })
        );
        let err = translated(json!({ "exclusiveMaximum": true }), Direction::Request).unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.json: #/components/schemas/S/exclusiveMaximum: `exclusiveMaximum: true` needs `maximum`"
        );
    }

    #[test]
    fn integer_formats_become_ranges() {
        assert_eq!(
            translated(
                json!({ "type": "integer", "format": "int32" }),
                Direction::Request
            )
            .unwrap(),
            json!({
                "type": "integer", "format": "int32",
                "allOf": [{ "minimum": -2147483648_i64, "maximum": 2147483647 }],
            })
        );
        assert_eq!(
            translated(
                json!({ "type": "integer", "format": "int64" }),
                Direction::Request
            )
            .unwrap(),
            json!({
                "type": "integer", "format": "int64",
                "allOf": [{ "minimum": i64::MIN, "maximum": i64::MAX }],
            })
        );
        // `format: int32` on a number is only a format.
        assert_eq!(
            translated(
                json!({ "type": "number", "format": "int32" }),
                Direction::Request
            )
            .unwrap(),
            json!({ "type": "number", "format": "int32" })
        );
    }

    #[test]
    fn read_only_is_optional_in_requests_and_write_only_in_responses() {
        let schema = json!({
            "type": "object",
            "required": ["id", "name", "password"],
            "properties": {
                "id": { "$ref": "#/components/schemas/Id" },
                "name": { "type": "string" },
                "password": { "type": "string", "writeOnly": true },
            },
        });
        let request = translated(schema.clone(), Direction::Request).unwrap();
        assert_eq!(request["required"], json!(["name", "password"]));
        let response = translated(schema, Direction::Response).unwrap();
        assert_eq!(response["required"], json!(["id", "name"]));
    }
}
