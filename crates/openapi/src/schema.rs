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

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use jsonschema::{Draft, PatternOptions};
use serde_json::{Map, Value};

use crate::spec::{pointer_push, OpenApiVersion, Spec, SpecError};
use crate::{Violation, Violations};

/// How far an echoed value is shown in a message before it is cut.
pub(crate) const ECHO_CHARS: usize = 64;
/// The longest message a body violation gets.
const MAX_MESSAGE_CHARS: usize = 256;

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
                let at = e.schema_path().as_str();
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

/// `text` cut to at most `max` characters, with `…` when cut.
pub(crate) fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => {
            let mut out = String::with_capacity(at + 3);
            out.push_str(&text[..at]);
            out.push('…');
            out
        }
    }
}

/// Builds the standalone JSON Schema document for the schema at `pointer`.
fn build_document(spec: &Spec, pointer: &str, direction: Direction) -> Result<Value, SpecError> {
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
            self.translate_30(object, at, &mut out)?;
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

    /// The OpenAPI 3.0 keyword rewrites on one (already copied) schema object.
    fn translate_30(
        &self,
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
                            return Err(self.spec.error(
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
            let flag = self.direction.optional_flag();
            let mut optional: Vec<&str> = Vec::new();
            for (name, schema) in properties {
                let at = pointer_push(&pointer_push(at, "properties"), name);
                let (schema, _) = self.spec.deref(schema, &at)?;
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
