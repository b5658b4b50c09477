//! The configuration schema. Every struct rejects unknown keys; values that
//! later checks must point at are `Spanned`.

use std::{collections::BTreeMap, time::Duration};

use serde::{de::Error as _, Deserialize, Deserializer};
use serde_saphyr::Spanned;

use super::middleware::{ChainRef, Chains, Middleware};

/// A whole configuration file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Worker threads; default: the number of CPUs.
    #[serde(default)]
    pub workers: Option<usize>,
    /// How the worker threads share connections.
    #[serde(default)]
    pub runtime: Runtime,
    pub listeners: Vec<Listener>,
    #[serde(default)]
    pub upstreams: BTreeMap<String, Upstream>,
    #[serde(default)]
    pub routes: Vec<Route>,
    /// Handler instances and their settings (docs/MIDDLEWARE.md).
    #[serde(default)]
    pub middleware: Middleware,
    /// Named lists of handlers that routes refer to.
    #[serde(default)]
    pub chains: Chains,
    #[serde(default)]
    pub admin: Option<Admin>,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub forwarded: Forwarded,
    #[serde(default)]
    pub log: Log,
}

/// How worker threads share the work (docs/PERFORMANCE.md has the measurements).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    /// A single-threaded runtime per worker, each with its own
    /// `SO_REUSEPORT` listener, upstream pool and metrics shard.
    #[default]
    PerCore,
    /// One work-stealing runtime over all workers, sharing one pool.
    MultiThread,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listener {
    /// `IP:PORT`.
    pub address: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// `http://HOST:PORT` for each host.
    pub hosts: Vec<Spanned<String>>,
    #[serde(default)]
    pub balance: Balance,
    #[serde(default)]
    pub timeouts: Timeouts,
    /// Further attempts for connect failures and idempotent requests.
    #[serde(default = "default_retries")]
    pub retries: u32,
    #[serde(default)]
    pub pool: Pool,
    #[serde(default)]
    pub health: Health,
    /// Replaces the `Host` sent upstream; default: the client's.
    #[serde(default)]
    pub host_header: Option<String>,
}

fn default_retries() -> u32 {
    2
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    #[default]
    RoundRobin,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    #[serde(deserialize_with = "duration")]
    pub connect: Duration,
    /// From sending the request to the end of the response head: past it, 504.
    #[serde(deserialize_with = "duration")]
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(1),
            request: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Pool {
    /// Idle keep-alive connections kept per host.
    pub max_idle: usize,
    #[serde(deserialize_with = "duration")]
    pub idle_timeout: Duration,
}

impl Default for Pool {
    fn default() -> Self {
        Self {
            max_idle: 128,
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Passive health: a host failing `failures` times in a row is ejected for `backoff`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Health {
    pub failures: u32,
    #[serde(deserialize_with = "duration")]
    pub backoff: Duration,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            failures: 3,
            backoff: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Starts with `/`.
    pub path: Spanned<String>,
    #[serde(default, rename = "match")]
    pub match_kind: PathMatch,
    /// Empty: any method.
    #[serde(default)]
    pub methods: Vec<Spanned<String>>,
    /// Matches the request's host (without port) when set.
    #[serde(default)]
    pub host: Option<String>,
    pub upstream: Spanned<String>,
    /// The handlers requests on this route pass; absent or `[]`: none.
    #[serde(default)]
    pub chain: Option<Spanned<ChainRef>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathMatch {
    #[default]
    Prefix,
    Exact,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admin {
    pub address: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// A client must send a whole request head within this (slowloris).
    #[serde(deserialize_with = "duration")]
    pub header_read_timeout: Duration,
    /// A keep-alive connection without a request for this long is closed.
    #[serde(deserialize_with = "duration")]
    pub idle_timeout: Duration,
    /// Request line and headers; past it, 431.
    #[serde(deserialize_with = "size")]
    pub max_header_bytes: u64,
    /// Request body; past it, 413.
    #[serde(deserialize_with = "size")]
    pub max_body_bytes: u64,
    pub max_connections: usize,
    /// In-flight requests may finish for this long after SIGTERM.
    #[serde(deserialize_with = "duration")]
    pub shutdown_deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_header_bytes: 32 * 1024,
            max_body_bytes: 10 * 1024 * 1024,
            max_connections: 10_000,
            shutdown_deadline: Duration::from_secs(10),
        }
    }
}

/// X-Forwarded-For/-Proto/-Host handling.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Forwarded {
    /// Keep (and append to) the client's own X-Forwarded-* headers;
    /// otherwise they are replaced.
    pub trust: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    pub format: LogFormat,
    /// A tracing filter (`info`, `sluice=debug,warn`); RUST_LOG wins when set.
    pub level: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// `1s`, `250ms`, `2m` (humantime).
pub(super) fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text).map_err(|err| {
        D::Error::custom(format!(
            "invalid duration `{text}` ({err}); use e.g. 10s or 250ms"
        ))
    })
}

/// A byte count: an integer, or a number with B, KB, KiB, MB, MiB, GB or GiB.
pub(super) fn size<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
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
