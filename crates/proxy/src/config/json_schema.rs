//! The JSON Schema of the configuration file, generated from the types
//! that read it (schemars follows their serde attributes: unknown keys
//! rejected, defaults, doc comments as descriptions), so that it cannot
//! say something the loader does not. `sluice proxy --schema` prints it
//! for editors (the YAML language server's `# yaml-language-server:
//! $schema=`); crates/proxy/tests/it/config_schema.rs checks it against
//! examples/ and `/config`.
//!
//! The types whose text has a grammar of its own (`Parsed<T>`, hosts,
//! hash keys, statuses, chains) describe themselves here.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;

use super::{
    balance::{HashKey, HostSettings, RetryOn, StatusRange, MAX_WEIGHT},
    handlers::HeaderFields,
    middleware::{ChainRef, HandlerSettings, MiddlewareSettings},
    typed::{Parsed, Setting},
    units::duration_schema,
    Config,
};

/// The schema of a whole configuration file (JSON Schema 2020-12).
pub fn json_schema() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let mut schema = generator.into_root_schema_for::<Config>().to_value();
    // Every duration of the file is humantime's text (units.rs), not
    // schemars' `{ secs, nanos }`.
    if let Some(defs) = schema.get_mut("$defs").and_then(Value::as_object_mut) {
        if let Some(duration) = defs.get_mut("Duration") {
            *duration = duration_schema();
        }
    }
    if let Some(root) = schema.as_object_mut() {
        root.insert(
            "title".into(),
            "sluice proxy configuration (docs/CONFIG.md)".into(),
        );
    }
    schema
}

/// `schema` with every key of every object that rejects unknown keys
/// made required: a document valid against it shows every key. What
/// `/config` is checked against (it shows defaults and `null`s), and a
/// configuration meant to use every key.
pub fn every_key_required(schema: &Value) -> Value {
    let mut schema = schema.clone();
    require_all(&mut schema);
    schema
}

fn require_all(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let closed = map.get("additionalProperties") == Some(&Value::Bool(false));
            let keys: Option<Vec<Value>> = match map.get("properties") {
                Some(Value::Object(properties)) if closed => {
                    Some(properties.keys().cloned().map(Value::String).collect())
                }
                _ => None,
            };
            if let Some(keys) = keys {
                map.insert("required".into(), Value::Array(keys));
            }
            map.values_mut().for_each(require_all);
        }
        Value::Array(items) => items.iter_mut().for_each(require_all),
        _ => {}
    }
}

/// Text with a grammar of its own; the loader parses it.
impl<T: Setting> JsonSchema for Parsed<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Parsed".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string" })
    }
}

impl JsonSchema for HeaderFields {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "HeaderFields".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Header names and their values",
            "type": "object",
            "additionalProperties": { "type": "string" }
        })
    }
}

impl JsonSchema for ChainRef {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "ChainRef".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The name of a chain in `chains:`, or a list of handler names",
            "anyOf": [
                { "type": "string" },
                { "type": "array", "items": { "type": "string" } }
            ]
        })
    }
}

/// An instance named after its type holds that type's settings; any
/// other name holds `{ TYPE: settings }` (config/middleware.rs).
impl JsonSchema for MiddlewareSettings {
    fn schema_name() -> Cow<'static, str> {
        "MiddlewareSettings".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let properties: serde_json::Map<String, Value> =
            HandlerSettings::settings_schemas(generator)
                .into_iter()
                .map(|(name, schema)| (name.to_string(), schema.to_value()))
                .collect();
        let any = generator.subschema_for::<HandlerSettings>();
        json_schema!({
            "description": "Handler instances by name (docs/MIDDLEWARE.md)",
            "type": "object",
            "properties": properties,
            "additionalProperties": any
        })
    }
}

impl JsonSchema for HostSettings {
    fn schema_name() -> Cow<'static, str> {
        "HostSettings".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "`http://HOST:PORT`, or `{ url, weight }`",
            "anyOf": [
                { "type": "string" },
                {
                    "type": "object",
                    "properties": {
                        "url": { "type": "string" },
                        "weight": { "type": "integer", "minimum": 1, "maximum": MAX_WEIGHT, "default": 1 }
                    },
                    "required": ["url"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

impl JsonSchema for HashKey {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "HashKey".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "client_ip, path, header:NAME, cookie:NAME or query:NAME",
            "type": "string",
            "pattern": "^(client_ip|path|(header|cookie|query):.+)$"
        })
    }
}

impl JsonSchema for StatusRange {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "StatusRange".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A status (100-599), or a range such as `200..299`",
            "anyOf": [
                { "type": "integer", "minimum": 100, "maximum": 599 },
                { "type": "string", "pattern": "^\\s*[1-5][0-9][0-9]\\s*(\\.\\.\\s*[1-5][0-9][0-9]\\s*)?$" }
            ]
        })
    }
}

impl JsonSchema for RetryOn {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "RetryOn".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "connect_failure, reset, or a status 500-599",
            "anyOf": [
                { "enum": ["connect_failure", "reset"] },
                { "type": "integer", "minimum": 500, "maximum": 599 },
                { "type": "string", "pattern": "^5[0-9][0-9]$" }
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn durations_are_text_and_unknown_keys_are_closed() {
        let schema = json_schema();
        assert_eq!(schema["$defs"]["Duration"]["type"], "string");
        assert_eq!(schema["additionalProperties"], false);
        let limits = &schema["$defs"]["LimitSettings"];
        assert_eq!(limits["properties"]["idle_timeout"]["default"], "1m");
        assert!(limits.get("required").is_none());
        let strict = every_key_required(&schema);
        let required = strict["$defs"]["LimitSettings"]["required"]
            .as_array()
            .unwrap();
        assert!(
            required.contains(&Value::from("send_timeout")),
            "{required:?}"
        );
    }
}
