//! The units of the file: durations (`10s`, humantime) and sizes
//! (`32KiB`), read from text and written back as text, and their JSON
//! Schemas.

use std::{borrow::Cow, time::Duration};

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{de::Error as _, Deserialize, Deserializer, Serialize, Serializer};

/// A duration as it is written in the file (`10s`, `1m 30s`): how every
/// [`Duration`] of the configuration is serialised (`/config`, the
/// schema's defaults).
pub(crate) fn human<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    humantime::format_duration(*duration)
        .to_string()
        .serialize(serializer)
}

/// [`human`] for an optional one (`null` when absent).
pub(crate) fn optional_human<S: Serializer>(
    duration: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    duration
        .map(|d| humantime::format_duration(d).to_string())
        .serialize(serializer)
}

/// `slow_start: 30s` (absent: `None`).
pub(crate) fn optional_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    duration(deserializer).map(Some)
}

/// The schema of a duration: humantime's text. Every `Duration` of the
/// configuration is one ([`crate::config::json_schema`] puts it in place
/// of schemars' `{ secs, nanos }`).
pub(crate) fn duration_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "string",
        "description": "A duration: a number and a unit (ns, us, ms, s, m, h, d), e.g. 10s, 250ms, 1m 30s",
        "pattern": "^\\s*([0-9]+\\s*[a-zA-Zµ]+\\s*)+$"
    })
}

/// The schema of a size (`max_body_bytes: 1MiB`): what [`size`] reads.
#[derive(Debug)]
pub(crate) struct ByteSize;

impl JsonSchema for ByteSize {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "ByteSize".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A byte count: an integer, or a number with B, KB, KiB, MB, MiB, GB or GiB",
            "anyOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": "^\\s*[0-9]+\\s*(B|KB|KiB|MB|MiB|GB|GiB)?\\s*$" }
            ]
        })
    }
}

/// `1s`, `250ms`, `2m` (humantime).
pub(crate) fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text).map_err(|err| {
        D::Error::custom(format!(
            "invalid duration `{text}` ({err}); use e.g. 10s or 250ms"
        ))
    })
}

/// A byte count: an integer, or a number with B, KB, KiB, MB, MiB, GB or GiB.
pub(crate) fn size<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
    }
    match Raw::deserialize(deserializer)? {
        Raw::Number(n) => Ok(n),
        Raw::Text(text) => parse_size(&text).ok_or_else(|| {
            D::Error::custom(format!(
                "invalid size `{text}`; use e.g. 32KiB, 10MB or 4096"
            ))
        }),
    }
}

pub(crate) fn optional_size<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    size(deserializer).map(Some)
}

pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let number: u64 = text[..digits].parse().ok()?;
    let multiplier = match text[digits..].trim() {
        "" | "B" => 1,
        "KB" => 1_000,
        "KiB" => 1 << 10,
        "MB" => 1_000_000,
        "MiB" => 1 << 20,
        "GB" => 1_000_000_000,
        "GiB" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(multiplier)
}
