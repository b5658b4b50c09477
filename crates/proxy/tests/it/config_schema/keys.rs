//! The keys of the configuration's JSON Schema and of a document, named as
//! docs/CONFIG.md names them: `listeners[].tls.cert`,
//! `upstreams.NAME.hosts`, `middleware.NAME.jwt.jwks` (an array's items
//! `[]`, a map's entries `NAME`).

use std::collections::BTreeSet;

use serde_json::Value;

/// `schema` with its `$ref`s followed (to `#/$defs/...`).
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let pointer = reference.trim_start_matches('#');
            resolve(root, root.pointer(pointer).unwrap_or(&Value::Null))
        }
        None => schema,
    }
}

fn branches(schema: &Value) -> impl Iterator<Item = &Value> {
    ["anyOf", "oneOf", "allOf"]
        .into_iter()
        .filter_map(|k| schema.get(k).and_then(Value::as_array))
        .flatten()
}

/// A map whose entries are schemas (not `additionalProperties: false`).
fn entries(schema: &Value) -> Option<&Value> {
    schema.get("additionalProperties").filter(|s| s.is_object())
}

fn join(path: &str, key: &str) -> String {
    match path {
        "" => key.to_string(),
        _ => format!("{path}.{key}"),
    }
}

/// Every key path the schema allows.
pub(crate) fn of_schema(schema: &Value) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    schema_walk(schema, schema, "", &mut keys, 0);
    keys
}

fn schema_walk(root: &Value, schema: &Value, path: &str, keys: &mut BTreeSet<String>, depth: u32) {
    assert!(depth < 32, "the schema recurses at {path}");
    let schema = resolve(root, schema);
    for branch in branches(schema) {
        schema_walk(root, branch, path, keys, depth + 1);
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    // Entries of a map with known names too (`middleware`): both are NAME.
    let prefix = match entries(schema) {
        Some(each) => {
            let prefix = join(path, "NAME");
            schema_walk(root, each, &prefix, keys, depth + 1);
            prefix
        }
        None => path.to_string(),
    };
    for (key, value) in properties.into_iter().flatten() {
        let key = join(&prefix, key);
        schema_walk(root, value, &key, keys, depth + 1);
        keys.insert(key);
    }
    if let Some(items) = schema.get("items") {
        schema_walk(root, items, &format!("{path}[]"), keys, depth + 1);
    }
}

/// The key paths `document` uses, as [`of_schema`] names them.
pub(crate) fn of_document(schema: &Value, document: &Value) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    document_walk(schema, schema, document, "", &mut keys);
    keys
}

/// Whether `value` may be what `schema` describes (by JSON type, and for
/// a closed object by its keys): which branches of an `anyOf` to follow.
fn fits(root: &Value, schema: &Value, value: &Value) -> bool {
    let schema = resolve(root, schema);
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let typed = match schema.get("type") {
        Some(Value::String(t)) => t == kind || (t == "number" && kind == "integer"),
        Some(Value::Array(ts)) => ts
            .iter()
            .any(|t| t == kind || (t == "number" && kind == "integer")),
        _ => true,
    };
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    let known = match (value, schema.get("properties").and_then(Value::as_object)) {
        (Value::Object(map), Some(properties)) if closed => {
            map.keys().all(|k| properties.contains_key(k))
        }
        _ => true,
    };
    typed && known
}

fn document_walk(
    root: &Value,
    schema: &Value,
    value: &Value,
    path: &str,
    keys: &mut BTreeSet<String>,
) {
    let schema = resolve(root, schema);
    for branch in branches(schema) {
        if fits(root, branch, value) {
            document_walk(root, branch, value, path, keys);
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                match (properties.and_then(|p| p.get(key)), entries(schema)) {
                    (Some(property), Some(_)) => {
                        let key = join(&join(path, "NAME"), key);
                        document_walk(root, property, item, &key, keys);
                        keys.insert(key);
                    }
                    (Some(property), None) => {
                        let key = join(path, key);
                        document_walk(root, property, item, &key, keys);
                        keys.insert(key);
                    }
                    (None, Some(each)) => {
                        document_walk(root, each, item, &join(path, "NAME"), keys);
                    }
                    (None, None) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(schema) = schema.get("items") {
                for item in items {
                    document_walk(root, schema, item, &format!("{path}[]"), keys);
                }
            }
        }
        _ => {}
    }
}
