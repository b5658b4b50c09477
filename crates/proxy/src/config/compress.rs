//! The `compress` and `grpc_web` handlers' settings (docs/MIDDLEWARE.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::units::{size, ByteSize};

/// `compress`: response compression, chosen from the client's
/// `Accept-Encoding`, within a memory budget.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CompressSettings {
    /// The encodings offered, most preferred first: among those the client
    /// accepts with the highest q-value, the first listed here wins.
    pub algorithms: Vec<Encoding>,
    /// Media types compressed (`text/*` matches every `text/` type).
    pub types: Vec<String>,
    /// Responses whose Content-Length is smaller go as they are.
    #[serde(deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub min_size: u64,
    /// Compress `text/event-stream` too (each event flushed as it comes).
    pub event_stream: bool,
    pub gzip: GzipSettings,
    pub br: BrotliSettings,
    pub zstd: ZstdSettings,
    /// What this handler's compressors may hold at once, all connections
    /// together; a response that would pass it goes uncompressed.
    #[serde(deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub max_memory: u64,
}

impl Default for CompressSettings {
    fn default() -> Self {
        Self {
            algorithms: vec![Encoding::Zstd, Encoding::Br, Encoding::Gzip],
            types: [
                "text/*",
                "application/json",
                "application/javascript",
                "application/xml",
                "application/problem+json",
                "application/ld+json",
                "application/manifest+json",
                "application/wasm",
                "image/svg+xml",
            ]
            .map(String::from)
            .to_vec(),
            min_size: 1024,
            event_stream: false,
            gzip: GzipSettings::default(),
            br: BrotliSettings::default(),
            zstd: ZstdSettings::default(),
            max_memory: 64 << 20,
        }
    }
}

/// A content coding the handler can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    Gzip,
    Br,
    Zstd,
}

impl Encoding {
    /// The token in `Accept-Encoding` and `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Br => "br",
            Encoding::Zstd => "zstd",
        }
    }
}

/// gzip (zlib's deflate): level 1-9; a window of 2^`window_bits` bytes
/// (9-15); `memory_level` 1-9 sizes its symbol buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GzipSettings {
    pub level: u8,
    pub window_bits: u8,
    pub memory_level: u8,
}

impl Default for GzipSettings {
    fn default() -> Self {
        Self {
            level: 5,
            window_bits: 12,
            memory_level: 5,
        }
    }
}

/// Brotli: quality 0-9 (10 and 11 are for precompressed files: a hundred
/// times the CPU); a window of 2^`window_bits` bytes (10-22).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BrotliSettings {
    pub quality: u8,
    pub window_bits: u8,
}

impl Default for BrotliSettings {
    fn default() -> Self {
        Self {
            quality: 4,
            window_bits: 18,
        }
    }
}

/// Zstandard: level 1-19; a window of 2^`window_log` bytes (10-23).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ZstdSettings {
    pub level: i8,
    pub window_log: u8,
}

impl Default for ZstdSettings {
    fn default() -> Self {
        Self {
            level: 3,
            window_log: 17,
        }
    }
}

impl CompressSettings {
    /// The ranges above; the key and what is wrong.
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        let within = |key, value: i64, low: i64, high: i64| {
            if (low..=high).contains(&value) {
                Ok(())
            } else {
                Err((key, format!("{value} is not within {low}..{high}")))
            }
        };
        within("gzip.level", self.gzip.level.into(), 1, 9)?;
        within("gzip.window_bits", self.gzip.window_bits.into(), 9, 15)?;
        within("gzip.memory_level", self.gzip.memory_level.into(), 1, 9)?;
        within("br.quality", self.br.quality.into(), 0, 9)?;
        within("br.window_bits", self.br.window_bits.into(), 10, 22)?;
        within("zstd.level", self.zstd.level.into(), 1, 19)?;
        within("zstd.window_log", self.zstd.window_log.into(), 10, 23)?;
        if self.algorithms.is_empty() {
            return Err(("algorithms", "name at least one of zstd, br, gzip".into()));
        }
        for media in &self.types {
            let valid = media.split_once('/').is_some_and(|(kind, sub)| {
                let token = |t: &str| {
                    !t.is_empty()
                        && t.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
                };
                token(kind) && (sub == "*" || token(sub))
            });
            if !valid {
                return Err((
                    "types",
                    format!("`{media}` is not a media type (type/subtype or type/*)"),
                ));
            }
        }
        Ok(())
    }
}

/// The `compress` handlers' ranges, each reported at its key.
pub(crate) fn check(config: &super::Config) -> Result<(), super::error::Problem> {
    for (name, handler) in &config.middleware.0 {
        if let super::HandlerSettings::CompressSettings(compress) = handler {
            compress.check().map_err(|(key, message)| {
                (
                    serde_saphyr::Location::UNKNOWN,
                    format!("middleware.{name}.{key}"),
                    message,
                )
            })?;
        }
    }
    Ok(())
}
