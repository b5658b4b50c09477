//! Compiling a spec's paths and operations: the router over the path
//! templates, each operation's parameters, and (through [`BodyCompiler`])
//! its request body and responses.

use serde_json::Value;

mod bodies;

use super::model::{CompiledSpec, Operation, PathEntry, METHODS};
use crate::param::{self, In};
use crate::router::parse_template;
use crate::spec::{pointer_push, Spec, SpecError};
use bodies::BodyCompiler;

/// Compiles every path of `spec` (keys of `paths` starting with `x-` are
/// extensions, not paths).
pub(super) fn compile(
    spec: &Spec,
    validate_formats: bool,
    validate_responses: bool,
) -> Result<CompiledSpec, SpecError> {
    let mut compiler = Compiler {
        bodies: BodyCompiler::new(spec, validate_formats),
        validate_responses,
    };
    let mut compiled = CompiledSpec::default();
    if let Some(Value::Object(paths)) = spec.document().get("paths") {
        for (template, item) in paths {
            if template.starts_with("x-") {
                continue;
            }
            compiler.path_item(&mut compiled, template, item)?;
        }
    }
    compiled.warnings = compiler.bodies.warnings;
    Ok(compiled)
}

struct Compiler<'s> {
    bodies: BodyCompiler<'s>,
    /// Compile `responses` too ([`crate::ValidatorOptions::validate_responses`]).
    validate_responses: bool,
}

impl Compiler<'_> {
    fn path_item(
        &mut self,
        compiled: &mut CompiledSpec,
        template: &str,
        item: &Value,
    ) -> Result<(), SpecError> {
        let spec = self.bodies.spec;
        let at = pointer_push("/paths", template);
        let parsed = parse_template(template).map_err(|e| spec.error(&at, e))?;
        let (item, item_at) = spec.deref(item, &at)?;
        let item_object = item
            .as_object()
            .ok_or_else(|| spec.error(&item_at, "a path item must be an object"))?;
        let common = param_list(
            spec,
            item_object.get("parameters"),
            &pointer_push(&item_at, "parameters"),
        )?;
        let mut entry = PathEntry {
            template: template.into(),
            operations: [None; 8],
            allow: Box::default(),
        };
        let mut allow: Vec<&str> = Vec::new();
        for (m, (key, upper)) in METHODS.iter().enumerate() {
            let Some(operation) = item_object.get(*key) else {
                continue;
            };
            let op_at = pointer_push(&item_at, key);
            let op = self.operation(template, key, &parsed.names, operation, &op_at, &common)?;
            entry.operations[m] = Some(compiled.operations.len());
            compiled.operations.push(op);
            allow.push(upper);
        }
        if allow.is_empty() {
            return Ok(());
        }
        entry.allow = allow.join(", ").into();
        let route = compiled.paths.len();
        compiled.router.insert(&parsed, route).map_err(|other| {
            spec.error(
                &at,
                format!("same path shape as `{}` (templated paths that differ only in names are identical)", compiled.paths[other].template),
            )
        })?;
        compiled.paths.push(entry);
        Ok(())
    }

    fn operation(
        &mut self,
        template: &str,
        method: &str,
        names: &[String],
        operation: &Value,
        at: &str,
        common: &[(&Value, String)],
    ) -> Result<Operation, SpecError> {
        let spec = self.bodies.spec;
        let object = operation
            .as_object()
            .ok_or_else(|| spec.error(at, "an operation must be an object"))?;
        let own = param_list(
            spec,
            object.get("parameters"),
            &pointer_push(at, "parameters"),
        )?;
        // Operation parameters override path-item ones with the same name and location.
        let mut all: Vec<(&Value, String)> = own.clone();
        for (param, param_at) in common {
            if !own.iter().any(|(p, _)| same_param(p, param)) {
                all.push((param, param_at.clone()));
            }
        }
        let mut compiled = Operation {
            template: template.into(),
            operation_id: object
                .get("operationId")
                .and_then(Value::as_str)
                .map(Into::into),
            path: names.iter().map(|_| None).collect(),
            query: Vec::new(),
            query_collects: false,
            headers: Vec::new(),
            cookies: Vec::new(),
            body: None,
            head: method == "head",
            responses: None,
        };
        for (param, param_at) in &all {
            let param::Compiled { param, warning } =
                param::compile(spec, param, param_at, self.bodies.validate_formats)?;
            if let Some(warning) = warning {
                self.bodies.warnings.push(warning);
            }
            match param.location {
                In::Path => match names.iter().position(|n| **n == *param.name) {
                    Some(i) => compiled.path[i] = Some(param),
                    None => self.bodies.warn(
                        param_at,
                        format!(
                            "path parameter `{}` is not in the path template; ignored",
                            param.name
                        ),
                    ),
                },
                In::Query => {
                    compiled.query_collects |= param.shape.collects();
                    compiled.query.push(param);
                }
                In::Header => {
                    if !["accept", "content-type", "authorization"]
                        .iter()
                        .any(|n| n.eq_ignore_ascii_case(&param.name))
                    {
                        compiled.headers.push(param);
                    }
                }
                In::Cookie => compiled.cookies.push(param),
            }
        }
        for (name, slot) in names.iter().zip(&compiled.path) {
            if slot.is_none() {
                self.bodies.warn(at, format!("path parameter `{{{name}}}` is not declared; any non-empty value is accepted"));
            }
        }
        if let Some(body) = object.get("requestBody") {
            compiled.body = Some(
                self.bodies
                    .request_body(body, &pointer_push(at, "requestBody"))?,
            );
        }
        if self.validate_responses {
            if let Some(responses) = object.get("responses") {
                compiled.responses = self
                    .bodies
                    .responses(responses, &pointer_push(at, "responses"))?;
            }
        }
        Ok(compiled)
    }
}

/// The dereferenced Parameter Objects of a `parameters` list, with their pointers.
fn param_list<'s>(
    spec: &'s Spec,
    list: Option<&'s Value>,
    at: &str,
) -> Result<Vec<(&'s Value, String)>, SpecError> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let items = list
        .as_array()
        .ok_or_else(|| spec.error(at, "`parameters` must be an array"))?;
    let mut out: Vec<(&Value, String)> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let (param, param_at) = spec.deref(item, &pointer_push(at, &i.to_string()))?;
        if let Some((_, first)) = out.iter().find(|(p, _)| same_param(p, param)) {
            return Err(spec.error(&param_at, format!("duplicate parameter (also at #{first})")));
        }
        out.push((param, param_at));
    }
    Ok(out)
}

fn same_param(a: &Value, b: &Value) -> bool {
    let key = |p: &Value| {
        (
            p.get("name")
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase),
            p.get("in").and_then(Value::as_str).map(str::to_owned),
        )
    };
    let (name_a, in_a) = key(a);
    let (name_b, in_b) = key(b);
    in_a == in_b
        && match in_a.as_deref() {
            Some("header") => name_a == name_b,
            _ => a.get("name") == b.get("name"),
        }
}

/// Compiles a 3.0 spec with these `paths` (JSON), responses too.
#[cfg(test)]
pub(super) fn compiled_paths(paths: Value) -> Result<CompiledSpec, String> {
    let document = serde_json::json!({ "openapi": "3.0.3", "paths": paths });
    let spec = Spec::from_value(document, "t.json").map_err(|e| e.to_string())?;
    compile(&spec, true, true).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn error(paths: Value) -> String {
        match compiled_paths(paths) {
            Ok(compiled) => panic!("compiled: {:?}", compiled.paths),
            Err(e) => e,
        }
    }

    fn get(parameters: Value) -> Value {
        json!({ "get": { "parameters": parameters, "responses": { "200": { "description": "ok" } } } })
    }

    #[test]
    fn paths_route_to_their_operations_in_allow_order() {
        let compiled = compiled_paths(json!({
            "/pets/{id}": {
                "post": {},
                "get": { "operationId": "show" },
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "integer" } }],
            },
            "x-extension": { "get": {} },
        }))
        .unwrap();
        assert_eq!(compiled.paths.len(), 1);
        let entry = &compiled.paths[0];
        assert_eq!(&*entry.template, "/pets/{id}");
        assert_eq!(&*entry.allow, "GET, POST");
        let get = &compiled.operations[entry.operations[0].unwrap()];
        assert_eq!(get.operation_id.as_deref(), Some("show"));
        assert_eq!(get.path[0].as_ref().map(|p| &*p.pointer), Some("/path/id"));
        assert!(entry.operations[2].is_some() && entry.operations[1].is_none());
        assert_eq!(compiled.warnings, Vec::<String>::new());
    }

    #[test]
    fn a_bad_spec_is_rejected_with_its_pointer() {
        assert_eq!(
            error(json!({ "/a/{x}": { "get": {} }, "/a/{y}": { "get": {} } })),
            "t.json: #/paths/~1a~1{y}: same path shape as `/a/{x}` (templated paths that differ only in names are identical)"
        );
        assert_eq!(
            error(json!({ "/a": [] })),
            "t.json: #/paths/~1a: a path item must be an object"
        );
        assert_eq!(
            error(json!({ "/a": { "get": 1 } })),
            "t.json: #/paths/~1a/get: an operation must be an object"
        );
        let twice = json!([
            { "name": "q", "in": "query", "schema": {} },
            { "name": "q", "in": "query", "schema": {} },
        ]);
        assert_eq!(
            error(json!({ "/a": get(twice) })),
            "t.json: #/paths/~1a/get/parameters/1: duplicate parameter (also at #/paths/~1a/get/parameters/0)"
        );
        assert_eq!(
            error(json!({ "/a": get(json!({})) })),
            "t.json: #/paths/~1a/get/parameters: `parameters` must be an array"
        );
    }

    #[test]
    fn operation_parameters_override_path_item_ones() {
        let compiled = compiled_paths(json!({
            "/a": {
                "parameters": [
                    { "name": "X-Id", "in": "header", "required": true, "schema": {} },
                    { "name": "q", "in": "query", "schema": {} },
                ],
                "get": { "parameters": [
                    // Header names are case-insensitive: this one replaces `X-Id`.
                    { "name": "x-id", "in": "header", "schema": {} },
                    { "name": "Content-Type", "in": "header", "required": true, "schema": {} },
                ] },
            },
        }))
        .unwrap();
        let get = &compiled.operations[0];
        let headers: Vec<(&str, bool)> =
            get.headers.iter().map(|p| (&*p.name, p.required)).collect();
        assert_eq!(
            headers,
            [("x-id", false)],
            "Content-Type is the body's business"
        );
        assert_eq!(get.query.len(), 1);
    }

    #[test]
    fn partly_checked_paths_are_warned_about() {
        let compiled = compiled_paths(json!({
            "/a/{x}": { "get": { "parameters": [
                { "name": "y", "in": "path", "required": true, "schema": {} },
            ] } },
        }))
        .unwrap();
        assert_eq!(
            compiled.warnings,
            [
                "t.json: #/paths/~1a~1{x}/get/parameters/0: path parameter `y` is not in the path template; ignored",
                "t.json: #/paths/~1a~1{x}/get: path parameter `{x}` is not declared; any non-empty value is accepted",
            ]
        );
    }
}
