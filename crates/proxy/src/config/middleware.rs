//! The `middleware:` and `chains:` sections: handler instances with their
//! settings, and the named lists that routes refer to.
//!
//! An instance named after its handler type holds that type's settings
//! directly (`jwt: { jwks: keys.json }`); any other name says its type as
//! the single key (`admin_auth: { jwt: { jwks: keys.json, scopes: [admin] } }`),
//! so one type can have several configurations, e.g. per route.

use std::{collections::BTreeMap, fmt, time::Duration};

use serde::{
    de::{self, MapAccess, Visitor},
    Deserialize, Deserializer, Serialize, Serializer,
};
use serde_saphyr::Spanned;

use super::schema::{duration, size};

/// Handler instances by name.
#[derive(Debug, Default)]
pub struct Middleware(pub BTreeMap<String, Handler>);

/// One handler's type and settings.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Handler {
    Correlation(Correlation),
    Metrics(MetricsHandler),
    AccessLog(AccessLog),
    Headers(Headers),
    Jwt(Jwt),
    Validate(Validate),
    RateLimit(RateLimit),
    ConcurrencyLimit(ConcurrencyLimit),
    Cors(Cors),
    IpFilter(IpFilter),
    BodyLimit(BodyLimit),
    Fault(Fault),
}

/// The handler type names, as written in chains and `middleware:`.
pub const HANDLER_TYPES: [&str; 12] = [
    "correlation",
    "metrics",
    "access_log",
    "headers",
    "jwt",
    "validate",
    "rate_limit",
    "concurrency_limit",
    "cors",
    "ip_filter",
    "body_limit",
    "fault",
];

impl Handler {
    /// The settings a chain gets when it names a type without a
    /// `middleware:` entry; `None` when the type has required settings.
    pub fn defaults(kind: &str) -> Option<Self> {
        Some(match kind {
            "correlation" => Self::Correlation(Correlation::default()),
            "metrics" => Self::Metrics(MetricsHandler::default()),
            "access_log" => Self::AccessLog(AccessLog::default()),
            "cors" => Self::Cors(Cors::default()),
            _ => return None,
        })
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::Correlation(_) => "correlation",
            Self::Metrics(_) => "metrics",
            Self::AccessLog(_) => "access_log",
            Self::Headers(_) => "headers",
            Self::Jwt(_) => "jwt",
            Self::Validate(_) => "validate",
            Self::RateLimit(_) => "rate_limit",
            Self::ConcurrencyLimit(_) => "concurrency_limit",
            Self::Cors(_) => "cors",
            Self::IpFilter(_) => "ip_filter",
            Self::BodyLimit(_) => "body_limit",
            Self::Fault(_) => "fault",
        }
    }
}

impl Serialize for Middleware {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl Serialize for ChainRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Named(name) => name.serialize(serializer),
            Self::List(names) => names.serialize(serializer),
        }
    }
}

/// `10s`, as written in the file.
fn human<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    humantime::format_duration(*duration)
        .to_string()
        .serialize(serializer)
}

/// A URL without its user information and query, which may carry credentials.
fn redacted_url<S: Serializer>(
    url: &Option<Spanned<String>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let redacted = url.as_ref().map(|url| {
        let text = url.value.as_str();
        let text = text.split(['?', '#']).next().unwrap_or_default();
        match (text.split_once("://"), text.find('@')) {
            (Some((scheme, rest)), Some(_)) => {
                let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
                format!("{scheme}://<redacted>@{host}")
            }
            _ => text.to_string(),
        }
    });
    redacted.serialize(serializer)
}

impl<'de> Deserialize<'de> for Middleware {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MiddlewareVisitor)
    }
}

struct MiddlewareVisitor;

impl<'de> Visitor<'de> for MiddlewareVisitor {
    type Value = Middleware;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of handler names to settings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Middleware, A::Error> {
        let mut handlers = BTreeMap::new();
        while let Some(name) = map.next_key::<String>()? {
            let handler = match name.as_str() {
                "correlation" => Handler::Correlation(map.next_value()?),
                "metrics" => Handler::Metrics(map.next_value()?),
                "access_log" => Handler::AccessLog(map.next_value()?),
                "headers" => Handler::Headers(map.next_value()?),
                "jwt" => Handler::Jwt(map.next_value()?),
                "validate" => Handler::Validate(map.next_value()?),
                "rate_limit" => Handler::RateLimit(map.next_value()?),
                "concurrency_limit" => Handler::ConcurrencyLimit(map.next_value()?),
                "cors" => Handler::Cors(map.next_value()?),
                "ip_filter" => Handler::IpFilter(map.next_value()?),
                "body_limit" => Handler::BodyLimit(map.next_value()?),
                "fault" => Handler::Fault(map.next_value()?),
                _ => map.next_value()?,
            };
            if handlers.insert(name.clone(), handler).is_some() {
                return Err(de::Error::custom(format!("`{name}` is defined twice")));
            }
        }
        Ok(Middleware(handlers))
    }
}

/// A route's chain: the name of one in `chains:`, or a list of handler names.
#[derive(Debug, Clone)]
pub enum ChainRef {
    Named(String),
    List(Vec<String>),
}

impl<'de> Deserialize<'de> for ChainRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ChainVisitor;
        impl<'de> Visitor<'de> for ChainVisitor {
            type Value = ChainRef;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a chain name or a list of handler names")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<ChainRef, E> {
                Ok(ChainRef::Named(name.to_string()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<ChainRef, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    names.push(name);
                }
                Ok(ChainRef::List(names))
            }
        }
        deserializer.deserialize_any(ChainVisitor)
    }
}

/// Named chains: lists of handler instance (or type) names.
pub type Chains = BTreeMap<String, Vec<Spanned<String>>>;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Correlation {
    /// Carries the correlation id; generated (a UUID v4) when absent and `generate` is on.
    pub header: String,
    /// Passed on as is when present (light-4j's X-Traceability-Id).
    pub traceability_header: String,
    pub generate: bool,
    /// Propagates a valid W3C `traceparent` (new span id) or starts one.
    pub traceparent: bool,
    /// Returns the correlation id to the client in the same header.
    pub echo: bool,
}

impl Default for Correlation {
    fn default() -> Self {
        Self {
            header: "x-correlation-id".into(),
            traceability_header: "x-traceability-id".into(),
            generate: true,
            traceparent: true,
            echo: true,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsHandler {}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessLog {
    /// A file to append to; absent or `-`: standard output.
    pub path: Option<String>,
    /// Which members each line has (see docs/MIDDLEWARE.md); empty: all.
    pub fields: Vec<String>,
    /// Request headers logged (under `headers`), masked when listed in `mask`.
    pub headers: Vec<String>,
    /// Headers whose values are replaced by `***`; `authorization` always is.
    pub mask: Vec<String>,
    /// Lines waiting for the writer; past it, lines are dropped and counted.
    pub queue: usize,
}

impl Default for AccessLog {
    fn default() -> Self {
        Self {
            path: None,
            fields: Vec::new(),
            headers: Vec::new(),
            mask: Vec::new(),
            queue: 16 * 1024,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Headers {
    pub request: HeaderRules,
    pub response: HeaderRules,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HeaderRules {
    /// Replaces every field of that name.
    pub set: BTreeMap<String, String>,
    /// Appends a field, keeping existing ones.
    pub add: BTreeMap<String, String>,
    pub remove: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Jwt {
    /// A JWKS file; read at start and re-read every `refresh`.
    #[serde(default)]
    pub jwks: Option<Spanned<String>>,
    /// An HTTP(S) JWKS endpoint, fetched at start and every `refresh`.
    #[serde(default, serialize_with = "redacted_url")]
    pub jwks_url: Option<Spanned<String>>,
    #[serde(
        default = "default_jwks_refresh",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub refresh: Duration,
    /// The only algorithms accepted; required, `none` is never accepted.
    pub algorithms: Vec<Spanned<String>>,
    #[serde(default)]
    pub issuer: Option<String>,
    /// The token's `aud` must contain one of these.
    #[serde(default)]
    pub audience: Vec<String>,
    #[serde(
        default = "default_leeway",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub leeway: Duration,
    /// Every one must be in the token's `scope`/`scp`, else 403.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Claim name -> request header sent upstream.
    #[serde(default)]
    pub forward_claims: BTreeMap<String, String>,
    /// Verified tokens remembered (until they expire).
    #[serde(default = "default_jwt_cache")]
    pub cache: usize,
    #[serde(default = "default_max_token", deserialize_with = "size")]
    pub max_token_bytes: u64,
}

fn default_jwks_refresh() -> Duration {
    Duration::from_secs(300)
}

fn default_leeway() -> Duration {
    Duration::from_secs(60)
}

fn default_jwt_cache() -> usize {
    10_000
}

fn default_max_token() -> u64 {
    8 * 1024
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Validate {
    /// An OpenAPI 3.0 or 3.1 document (YAML or JSON), relative to the working directory.
    pub openapi: Spanned<String>,
    /// Requests for operations the spec does not have: `reject` (404/405) or `pass`.
    #[serde(default)]
    pub unknown_operation: UnknownOperation,
    /// Bodies are held for validation up to this size; past it, 413.
    #[serde(default = "default_validate_body", deserialize_with = "size")]
    pub max_body_bytes: u64,
    /// Also check responses (status, media type, JSON body); a mismatch is
    /// logged and counted, and the response still goes to the client.
    #[serde(default)]
    pub responses: bool,
    /// Response bodies up to this size (with Content-Length) are checked.
    #[serde(default = "default_validate_body", deserialize_with = "size")]
    pub max_response_bytes: u64,
}

fn default_validate_body() -> u64 {
    1024 * 1024
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownOperation {
    #[default]
    Reject,
    Pass,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// `client_ip`, `header:NAME` or `claim:NAME` (needs `jwt` earlier in the chain).
    #[serde(default = "default_rate_key")]
    pub key: Spanned<String>,
    /// `N/s`, `N/m` or `N/h`.
    pub rate: Spanned<String>,
    /// Requests allowed at once above the rate; default: one second's worth.
    #[serde(default)]
    pub burst: Option<u32>,
    /// Distinct keys tracked; the least recently used is forgotten past it.
    #[serde(default = "default_rate_keys")]
    pub max_keys: usize,
}

fn default_rate_key() -> Spanned<String> {
    Spanned::new(
        "client_ip".to_string(),
        serde_saphyr::Location::UNKNOWN,
        serde_saphyr::Location::UNKNOWN,
    )
}

fn default_rate_keys() -> usize {
    100_000
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyLimit {
    /// Requests in flight at once through this handler instance; past it, 503.
    pub max: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cors {
    /// Allowed origins (`https://a.example`), or `*`.
    pub origins: Vec<String>,
    pub methods: Vec<String>,
    pub headers: Vec<String>,
    pub expose_headers: Vec<String>,
    pub credentials: bool,
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub max_age: Duration,
}

impl Default for Cors {
    fn default() -> Self {
        Self {
            origins: vec!["*".into()],
            methods: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
                .map(String::from)
                .to_vec(),
            headers: Vec::new(),
            expose_headers: Vec::new(),
            credentials: false,
            max_age: Duration::from_secs(600),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct IpFilter {
    /// CIDRs (`10.0.0.0/8`, `::1/128`) or addresses; empty: everyone not denied.
    pub allow: Vec<Spanned<String>>,
    /// Checked first.
    pub deny: Vec<Spanned<String>>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BodyLimit {
    #[serde(deserialize_with = "size")]
    pub max: u64,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Fault {
    pub delay: Option<FaultDelay>,
    pub abort: Option<FaultAbort>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultDelay {
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub duration: Duration,
    /// Share of requests delayed, 0 to 100.
    pub percent: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultAbort {
    pub status: u16,
    /// Share of requests answered with `status`, 0 to 100.
    pub percent: f64,
}
