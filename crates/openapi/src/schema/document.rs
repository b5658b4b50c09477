//! The standalone JSON Schema document for one schema of the spec: the
//! schema under `allOf`, plus every schema it reaches through local `$ref`s
//! copied to the same pointer, so that the references resolve unchanged.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::translate::{translate_30, Direction};
use crate::spec::{pointer_push, OpenApiVersion, Spec, SpecError};

/// Builds the standalone JSON Schema document for the schema at `pointer`.
pub(super) fn build_document(
    spec: &Spec,
    pointer: &str,
    direction: Direction,
) -> Result<Value, SpecError> {
    let mut builder = Builder {
        spec,
        direction,
        queue: Vec::new(),
        done: HashSet::new(),
        edges: HashMap::new(),
    };
    let root = builder.walk_node(pointer)?;
    let mut document = Map::new();
    document.insert("allOf".to_owned(), Value::Array(vec![root]));
    let mut tree = Value::Object(document);
    while let Some(target) = builder.queue.pop() {
        if !builder.done.insert(target.clone()) {
            continue;
        }
        if target.is_empty() || target == "/allOf" || target.starts_with("/allOf/") {
            return Err(spec.error(&target, "a schema $ref must point below the document root"));
        }
        let translated = builder.walk_node(&target)?;
        insert_at(&mut tree, &target, translated).map_err(|()| {
            spec.error(
                &target,
                "this $ref target cannot be combined with the schemas around it",
            )
        })?;
    }
    builder.check_cycles(pointer)?;
    Ok(tree)
}

struct Builder<'s> {
    spec: &'s Spec,
    direction: Direction,
    /// `$ref` targets still to copy into the document.
    queue: Vec<String>,
    done: HashSet<String>,
    /// For each schema copied whole (the root and every `$ref` target): the
    /// targets it references without descending into the instance.
    edges: HashMap<String, Vec<String>>,
}

/// Keywords whose value is one schema applied to a part of the instance.
const CONSUMING_ONE: &[&str] = &[
    "items",
    "additionalItems",
    "additionalProperties",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
];
/// Keywords whose value is an object of schemas applied to parts of the instance.
const CONSUMING_MAP: &[&str] = &["properties", "patternProperties"];
/// Keywords whose value is one schema applied to the instance itself.
const IN_PLACE_ONE: &[&str] = &["not", "if", "then", "else"];
/// Keywords whose value is an array of schemas applied to the instance itself.
const IN_PLACE_LIST: &[&str] = &["allOf", "anyOf", "oneOf"];
/// OpenAPI 3.0 schema keywords that are not JSON Schema and are dropped.
const OAS30_DROPPED: &[&str] = &[
    "nullable",
    "example",
    "discriminator",
    "xml",
    "externalDocs",
    "deprecated",
];

impl Builder<'_> {
    fn walk_node(&mut self, pointer: &str) -> Result<Value, SpecError> {
        let value = self
            .spec
            .lookup(pointer)
            .ok_or_else(|| self.spec.error(pointer, "schema not found"))?;
        self.edges.entry(pointer.to_owned()).or_default();
        self.walk(value, pointer, pointer, true)
    }

    /// Copies (3.1) or translates (3.0) the schema `value` found at `at`,
    /// inside the node `node`; `in_place` while no keyword on the way down
    /// has descended into the instance.
    fn walk(
        &mut self,
        value: &Value,
        at: &str,
        node: &str,
        in_place: bool,
    ) -> Result<Value, SpecError> {
        let Some(object) = value.as_object() else {
            return match value {
                Value::Bool(_) if self.spec.version() == OpenApiVersion::V3_1 => Ok(value.clone()),
                _ => Err(self.spec.error(at, "a schema must be an object")),
            };
        };
        let v30 = self.spec.version() == OpenApiVersion::V3_0;
        if let Some(reference) = object.get("$ref") {
            let reference = reference
                .as_str()
                .ok_or_else(|| self.spec.error(at, "`$ref` must be a string"))?;
            let target = self.spec.ref_target(reference, &pointer_push(at, "$ref"))?;
            if in_place {
                if let Some(edges) = self.edges.get_mut(node) {
                    edges.push(target.clone());
                }
            }
            self.queue.push(target);
            if v30 {
                // OpenAPI 3.0: a Reference Object's siblings are ignored.
                let mut out = Map::new();
                out.insert("$ref".to_owned(), Value::String(reference.to_owned()));
                return Ok(Value::Object(out));
            }
        }
        let mut out = Map::with_capacity(object.len());
        for (key, child) in object {
            let child_at = pointer_push(at, key);
            let key_str = key.as_str();
            let translated = if CONSUMING_ONE.contains(&key_str) && child.is_array() {
                // Draft-4 style tuple `items` / `additionalItems` list.
                self.walk_list(child, &child_at, node, false)?
            } else if CONSUMING_ONE.contains(&key_str) && (child.is_object() || child.is_boolean())
            {
                self.walk(child, &child_at, node, false)?
            } else if key_str == "prefixItems" {
                self.walk_list(child, &child_at, node, false)?
            } else if CONSUMING_MAP.contains(&key_str) {
                self.walk_map(child, &child_at, node, false)?
            } else if key_str == "dependentSchemas" {
                self.walk_map(child, &child_at, node, in_place)?
            } else if IN_PLACE_ONE.contains(&key_str) {
                self.walk(child, &child_at, node, in_place)?
            } else if IN_PLACE_LIST.contains(&key_str) {
                self.walk_list(child, &child_at, node, in_place)?
            } else if v30 && (OAS30_DROPPED.contains(&key_str) || key_str.starts_with("x-")) {
                continue;
            } else {
                child.clone()
            };
            out.insert(key.clone(), translated);
        }
        if v30 {
            translate_30(self.spec, self.direction, object, at, &mut out)?;
        }
        Ok(Value::Object(out))
    }

    fn walk_list(
        &mut self,
        value: &Value,
        at: &str,
        node: &str,
        in_place: bool,
    ) -> Result<Value, SpecError> {
        let items = value
            .as_array()
            .ok_or_else(|| self.spec.error(at, "expected an array of schemas"))?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            out.push(self.walk(item, &pointer_push(at, &i.to_string()), node, in_place)?);
        }
        Ok(Value::Array(out))
    }

    fn walk_map(
        &mut self,
        value: &Value,
        at: &str,
        node: &str,
        in_place: bool,
    ) -> Result<Value, SpecError> {
        let entries = value
            .as_object()
            .ok_or_else(|| self.spec.error(at, "expected an object of schemas"))?;
        let mut out = Map::with_capacity(entries.len());
        for (key, item) in entries {
            out.insert(
                key.clone(),
                self.walk(item, &pointer_push(at, key), node, in_place)?,
            );
        }
        Ok(Value::Object(out))
    }
    /// Rejects `$ref` loops that never descend into the instance.
    fn check_cycles(&self, start: &str) -> Result<(), SpecError> {
        // Iterative DFS, colours: absent = unvisited, false = on stack, true = done.
        let mut colour: HashMap<&str, bool> = HashMap::new();
        let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
        colour.insert(start, false);
        while let Some((node, next)) = stack.pop() {
            let edges = self.edges.get(node).map(Vec::as_slice).unwrap_or_default();
            if let Some(target) = edges.get(next) {
                stack.push((node, next + 1));
                match colour.get(target.as_str()) {
                    Some(false) => {
                        let mut chain = String::new();
                        let from = stack
                            .iter()
                            .position(|(n, _)| *n == target.as_str())
                            .unwrap_or(0);
                        for (n, _) in &stack[from..] {
                            let _ = write!(chain, "#{n} -> ");
                        }
                        let _ = write!(chain, "#{target}");
                        return Err(self.spec.error(
                            node,
                            format!("$ref cycle that never descends into the instance: {chain}"),
                        ));
                    }
                    Some(true) => {}
                    None => {
                        colour.insert(target, false);
                        stack.push((target, 0));
                    }
                }
            } else {
                colour.insert(node, true);
            }
        }
        Ok(())
    }
}

/// Puts `value` at `pointer` in `tree`, creating objects on the way.
fn insert_at(tree: &mut Value, pointer: &str, value: Value) -> Result<(), ()> {
    let tokens: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, parents)) = tokens.split_last() else {
        return Err(());
    };
    let mut here = tree;
    for token in parents {
        here = match here {
            Value::Object(map) => map
                .entry(token.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            Value::Array(list) => token
                .parse::<usize>()
                .ok()
                .and_then(|i| list.get_mut(i))
                .ok_or(())?,
            _ => return Err(()),
        };
    }
    match here {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(list) => {
            let slot = last
                .parse::<usize>()
                .ok()
                .and_then(|i| list.get_mut(i))
                .ok_or(())?;
            *slot = value;
            Ok(())
        }
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec_with(version: &str, schemas: Value) -> Spec {
        Spec::from_value(
            json!({ "openapi": version, "components": { "schemas": schemas } }),
            "t.json",
        )
        .unwrap()
    }

    #[test]
    fn referenced_schemas_are_copied_to_their_own_pointers() {
        let spec = spec_with(
            "3.0.3",
            json!({
                "Pet": {
                    "type": "object",
                    "example": { "tag": {} },
                    "x-internal": true,
                    "properties": { "tag": { "$ref": "#/components/schemas/Tag", "description": "ignored" } },
                },
                "Tag": { "type": "string", "nullable": true },
                "Unused": { "type": "integer" },
            }),
        );
        let document = build_document(&spec, "/components/schemas/Pet", Direction::Request);
        assert_eq!(
            document.unwrap(),
            json!({
                "allOf": [{
                    "type": "object",
                    "properties": { "tag": { "$ref": "#/components/schemas/Tag" } },
                }],
                "components": { "schemas": { "Tag": { "type": ["string", "null"] } } },
            })
        );
    }

    #[test]
    fn openapi_31_schemas_are_copied_as_written() {
        let spec = spec_with(
            "3.1.0",
            json!({ "S": { "type": "string", "example": "x", "$ref": "#/components/schemas/T" }, "T": true }),
        );
        assert_eq!(
            build_document(&spec, "/components/schemas/S", Direction::Request).unwrap(),
            json!({
                "allOf": [{ "type": "string", "example": "x", "$ref": "#/components/schemas/T" }],
                "components": { "schemas": { "T": true } },
            })
        );
    }

    #[test]
    fn a_ref_loop_that_never_descends_is_rejected() {
        let spec = spec_with(
            "3.0.3",
            json!({
                "A": { "$ref": "#/components/schemas/B" },
                "B": { "allOf": [{ "$ref": "#/components/schemas/A" }] },
            }),
        );
        let err = build_document(&spec, "/components/schemas/A", Direction::Request).unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.json: #/components/schemas/B: $ref cycle that never descends into the instance: \
             #/components/schemas/A -> #/components/schemas/B -> #/components/schemas/A"
        );
        // Through `properties` the instance shrinks on each turn: a list is fine.
        let spec = spec_with(
            "3.0.3",
            json!({ "List": { "properties": { "next": { "$ref": "#/components/schemas/List" } } } }),
        );
        assert!(build_document(&spec, "/components/schemas/List", Direction::Request).is_ok());
    }

    #[test]
    fn insert_at_creates_objects_and_unescapes_tokens() {
        let mut tree = json!({ "list": [1, 2] });
        insert_at(&mut tree, "/a/b~1c~0d", json!(true)).unwrap();
        insert_at(&mut tree, "/list/1", json!("two")).unwrap();
        assert_eq!(tree, json!({ "list": [1, "two"], "a": { "b/c~d": true } }));
        assert_eq!(insert_at(&mut tree, "", json!(1)), Err(()));
        assert_eq!(insert_at(&mut tree, "/list/5", json!(1)), Err(()));
        assert_eq!(insert_at(&mut tree, "/list/0/x", json!(1)), Err(()));
    }
}
