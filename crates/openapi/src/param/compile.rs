//! Compiling a Parameter Object of the spec into a [`Param`].

use serde_json::Value;

use super::keywords::{compile_scalar, declared_types, simple, Kind};
use super::model::{In, Layout, Param, Shape};
use super::scalar::Scalar;
use super::style::layout;
use super::types::Types;
use crate::schema::{Direction, SchemaCheck};
use crate::spec::{pointer_push, OpenApiVersion, Spec, SpecError};

/// What compiling a parameter gives: the parameter and maybe a warning.
pub(crate) struct Compiled {
    pub(crate) param: Param,
    pub(crate) warning: Option<String>,
}

/// Compiles the (already dereferenced) Parameter Object `param` found at `at`.
pub(crate) fn compile(
    spec: &Spec,
    param: &Value,
    at: &str,
    validate_formats: bool,
) -> Result<Compiled, SpecError> {
    let object = param
        .as_object()
        .ok_or_else(|| spec.error(at, "a parameter must be an object"))?;
    let name = object
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| spec.error(at, "a parameter needs a string `name`"))?;
    let location_text = object
        .get("in")
        .and_then(Value::as_str)
        .ok_or_else(|| spec.error(at, "a parameter needs `in` (path, query, header or cookie)"))?;
    let location = In::parse(location_text).ok_or_else(|| {
        let hint = if matches!(location_text, "body" | "formData") {
            " (Swagger 2.0; OpenAPI 3 uses `requestBody`)"
        } else {
            ""
        };
        spec.error(
            &pointer_push(at, "in"),
            format!("unsupported `in: {location_text}`{hint}"),
        )
    })?;
    let required = match object.get("required") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(spec.error(
                &pointer_push(at, "required"),
                "`required` must be a boolean",
            ))
        }
    };
    if location == In::Path && !required {
        return Err(spec.error(
            &pointer_push(at, "required"),
            "a path parameter must be `required: true`",
        ));
    }
    let allow_empty =
        location == In::Query && object.get("allowEmptyValue") == Some(&Value::Bool(true));
    let pointer_name = if location == In::Header {
        name.to_ascii_lowercase()
    } else {
        name.to_owned()
    };
    let pointer = pointer_push(&format!("/{}", location.as_str()), &pointer_name);
    let mut warning = None;
    let shape = match (object.get("schema"), object.get("content")) {
        (Some(_), Some(_)) => {
            return Err(spec.error(at, "a parameter has either `schema` or `content`, not both"));
        }
        (None, None) => return Err(spec.error(at, "a parameter needs `schema` or `content`")),
        (None, Some(content)) => compile_content(
            spec,
            content,
            &pointer_push(at, "content"),
            validate_formats,
            &mut warning,
        )?,
        (Some(schema), None) => {
            let style = object.get("style").and_then(Value::as_str);
            let explode = object.get("explode").and_then(Value::as_bool);
            let layout = match layout(location, style, explode) {
                Ok(layout) => layout,
                Err(why) => {
                    warning = Some(format!(
                        "{}: #{at}: {why}; only its presence is checked",
                        spec.origin()
                    ));
                    return Ok(Compiled {
                        param: Param {
                            name: name.into(),
                            location,
                            pointer: pointer.into(),
                            required,
                            allow_empty,
                            shape: Shape::Unchecked,
                        },
                        warning,
                    });
                }
            };
            compile_schema(
                spec,
                schema,
                &pointer_push(at, "schema"),
                layout,
                validate_formats,
                &mut warning,
            )?
        }
    };
    Ok(Compiled {
        param: Param {
            name: name.into(),
            location,
            pointer: pointer.into(),
            required,
            allow_empty,
            shape,
        },
        warning,
    })
}

fn compile_content(
    spec: &Spec,
    content: &Value,
    at: &str,
    validate_formats: bool,
    warning: &mut Option<String>,
) -> Result<Shape, SpecError> {
    let map = content
        .as_object()
        .ok_or_else(|| spec.error(at, "`content` must be an object"))?;
    let Some((media, body)) = map.iter().next() else {
        return Err(spec.error(at, "`content` must name one media type"));
    };
    let media_at = pointer_push(at, media);
    let essence = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence != "application/json" && !essence.ends_with("+json") {
        *warning = Some(format!(
            "{}: #{media_at}: `{media}` parameters are not validated; only their presence is checked",
            spec.origin()
        ));
        return Ok(Shape::Unchecked);
    }
    match body.get("schema") {
        Some(schema) => {
            let (_, target) = spec.deref(schema, &pointer_push(&media_at, "schema"))?;
            Ok(Shape::Json(SchemaCheck::compile(
                spec,
                &target,
                validate_formats,
                Direction::Request,
            )?))
        }
        None => Ok(Shape::Json(SchemaCheck::Any)),
    }
}

fn compile_schema(
    spec: &Spec,
    schema: &Value,
    at: &str,
    layout: Layout,
    validate_formats: bool,
    warning: &mut Option<String>,
) -> Result<Shape, SpecError> {
    let (resolved, resolved_at) = resolve_schema(spec, schema, at)?;
    let types = declared_types(spec, resolved, &resolved_at, 0);
    if types.1 == Kind::Object {
        *warning = Some(format!(
            "{}: #{at}: object parameters are not validated; only their presence is checked",
            spec.origin()
        ));
        return Ok(Shape::Unchecked);
    }
    if types.1 == Kind::Array {
        if let Some(object) = resolved.as_object().filter(|o| simple(o, true)) {
            let items_at = pointer_push(&resolved_at, "items");
            let items = match object.get("items") {
                Some(items) => {
                    let (items, items_at) = resolve_schema(spec, items, &items_at)?;
                    items
                        .as_object()
                        .filter(|o| simple(o, false))
                        .map(|o| compile_scalar(spec, o, &items_at))
                        .transpose()?
                }
                None => Some(Scalar::any()),
            };
            if let Some(items) = items {
                return Ok(Shape::Array {
                    items,
                    layout,
                    min_items: object.get("minItems").and_then(Value::as_u64),
                    max_items: object.get("maxItems").and_then(Value::as_u64),
                    unique: object.get("uniqueItems") == Some(&Value::Bool(true)),
                });
            }
        }
        let item_types = match resolved.get("items") {
            Some(items) => {
                let (items, items_at) =
                    resolve_schema(spec, items, &pointer_push(&resolved_at, "items"))?;
                declared_types(spec, items, &items_at, 0).0
            }
            None => Types::STRING,
        };
        return Ok(Shape::Schema {
            check: SchemaCheck::compile(spec, &resolved_at, validate_formats, Direction::Request)?,
            layout: Some(layout),
            types: item_types,
        });
    }
    if let Some(object) = resolved.as_object().filter(|o| simple(o, false)) {
        return Ok(Shape::Scalar(compile_scalar(spec, object, &resolved_at)?));
    }
    if resolved == &Value::Bool(true) {
        return Ok(Shape::Scalar(Scalar::any()));
    }
    Ok(Shape::Schema {
        check: SchemaCheck::compile(spec, &resolved_at, validate_formats, Direction::Request)?,
        layout: None,
        types: types.0,
    })
}

/// Follows `$ref`s when the schema is a pure reference (3.0 always; 3.1
/// when the `$ref` has no constraining siblings).
fn resolve_schema<'s>(
    spec: &'s Spec,
    schema: &'s Value,
    at: &str,
) -> Result<(&'s Value, String), SpecError> {
    let pure = spec.version() == OpenApiVersion::V3_0
        || schema.as_object().is_some_and(|o| {
            o.keys()
                .all(|k| matches!(k.as_str(), "$ref" | "description" | "summary" | "title"))
        });
    if pure {
        spec.deref(schema, at)
    } else {
        Ok((schema, at.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Compiles `param` where it sits in a spec, at `/p`: schemas are
    /// compiled from their pointers.
    fn compiled(param: Value) -> Result<Compiled, String> {
        let spec = Spec::from_value(json!({ "openapi": "3.0.3", "p": param }), "t.json").unwrap();
        let param = spec.lookup("/p").unwrap();
        compile(&spec, param, "/p", true).map_err(|e| e.to_string())
    }

    fn error(param: Value) -> String {
        match compiled(param) {
            Ok(c) => panic!("compiled: {:?}", c.param),
            Err(e) => e,
        }
    }

    #[test]
    fn a_bad_parameter_object_is_named() {
        assert_eq!(
            error(json!([])),
            "t.json: #/p: a parameter must be an object"
        );
        assert_eq!(
            error(json!({ "in": "query" })),
            "t.json: #/p: a parameter needs a string `name`"
        );
        assert_eq!(
            error(json!({ "name": "q", "in": "body", "schema": {} })),
            "t.json: #/p/in: unsupported `in: body` (Swagger 2.0; OpenAPI 3 uses `requestBody`)"
        );
        assert_eq!(
            error(json!({ "name": "id", "in": "path", "schema": {} })),
            "t.json: #/p/required: a path parameter must be `required: true`"
        );
        assert_eq!(
            error(json!({ "name": "q", "in": "query", "required": "yes", "schema": {} })),
            "t.json: #/p/required: `required` must be a boolean"
        );
        assert_eq!(
            error(json!({ "name": "q", "in": "query" })),
            "t.json: #/p: a parameter needs `schema` or `content`"
        );
        assert_eq!(
            error(json!({ "name": "q", "in": "query", "schema": {}, "content": {} })),
            "t.json: #/p: a parameter has either `schema` or `content`, not both"
        );
    }

    #[test]
    fn pointers_and_flags() {
        let Compiled { param, warning } = compiled(json!({
            "name": "X-Trace", "in": "header", "required": true, "schema": { "type": "string" },
        }))
        .unwrap();
        assert_eq!(warning, None);
        assert_eq!(
            (&*param.name, &*param.pointer),
            ("X-Trace", "/header/x-trace")
        );
        assert!(param.required && !param.allow_empty);
        assert!(matches!(param.shape, Shape::Scalar(_)));
        // allowEmptyValue only means something in a query.
        let query =
            compiled(json!({ "name": "q", "in": "query", "allowEmptyValue": true, "schema": {} }));
        assert!(query.unwrap().param.allow_empty);
        let cookie =
            compiled(json!({ "name": "c", "in": "cookie", "allowEmptyValue": true, "schema": {} }));
        assert_eq!(&*cookie.as_ref().unwrap().param.pointer, "/cookie/c");
        assert!(!cookie.unwrap().param.allow_empty);
    }

    #[test]
    fn schemas_pick_a_shape() {
        let shape = |schema: Value| {
            compiled(json!({ "name": "q", "in": "query", "explode": false, "schema": schema }))
                .unwrap()
        };
        let array = shape(
            json!({ "type": "array", "items": { "type": "integer" }, "maxItems": 3, "uniqueItems": true }),
        );
        let Shape::Array {
            layout,
            min_items,
            max_items,
            unique,
            ..
        } = array.param.shape
        else {
            panic!("{:?}", array.param.shape);
        };
        assert_eq!(
            (layout, min_items, max_items, unique),
            (Layout::Delimited(b','), None, Some(3), true)
        );
        let rich = shape(json!({ "type": "array", "items": { "oneOf": [{ "type": "integer" }] } }));
        let Shape::Schema { layout, types, .. } = rich.param.shape else {
            panic!("{:?}", rich.param.shape);
        };
        assert_eq!(
            (layout, types),
            (Some(Layout::Delimited(b',')), Types::INTEGER)
        );
        let object = shape(json!({ "type": "object" }));
        assert!(matches!(object.param.shape, Shape::Unchecked));
        assert_eq!(
            object.warning.as_deref(),
            Some("t.json: #/p/schema: object parameters are not validated; only their presence is checked")
        );
        assert!(matches!(shape(json!(true)).param.shape, Shape::Scalar(_)));
    }

    #[test]
    fn unsupported_styles_and_content_are_presence_only() {
        let matrix = compiled(json!({
            "name": "id", "in": "path", "required": true, "style": "matrix", "schema": {},
        }))
        .unwrap();
        assert!(matches!(matrix.param.shape, Shape::Unchecked));
        assert_eq!(
            matrix.warning.as_deref(),
            Some("t.json: #/p: `style: matrix` is not supported for path parameters; only its presence is checked")
        );
        let xml =
            compiled(json!({ "name": "q", "in": "query", "content": { "application/xml": {} } }))
                .unwrap();
        assert!(matches!(xml.param.shape, Shape::Unchecked));
        assert_eq!(
            xml.warning.as_deref(),
            Some("t.json: #/p/content/application~1xml: `application/xml` parameters are not validated; only their presence is checked")
        );
        let json =
            compiled(json!({ "name": "q", "in": "query", "content": { "application/json": {} } }))
                .unwrap();
        assert!(matches!(json.param.shape, Shape::Json(_)));
        assert_eq!(json.warning, None);
        assert_eq!(
            error(json!({ "name": "q", "in": "query", "content": {} })),
            "t.json: #/p/content: `content` must name one media type"
        );
    }
}
