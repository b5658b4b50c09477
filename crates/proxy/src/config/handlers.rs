//! Each handler type's settings (docs/MIDDLEWARE.md), typed as they are
//! read: a rate is a [`Rate`], a network an [`IpNet`], a header name a
//! [`HeaderName`], so that a bad value fails the load with its line and
//! key, and the handlers (middleware/) never parse text.

use std::{
    collections::BTreeMap,
    fmt,
    num::{NonZeroU16, NonZeroU32},
    time::Duration,
};

use http::{HeaderName, HeaderValue, Method, StatusCode, Uri};
use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{
    de::{MapAccess, Visitor},
    ser::SerializeMap,
    Deserialize, Deserializer, Serialize, Serializer,
};
use serde_saphyr::Spanned;

use super::{
    secret::CredentialUrl,
    typed::{error_status, percent, status_number, Parsed, Rate, RateKey},
    units::{duration, human, size, ByteSize},
};

fn header(name: &'static str) -> Parsed<HeaderName> {
    Parsed(HeaderName::from_static(name))
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CorrelationSettings {
    /// Carries the correlation id; generated (a UUID v4) when absent and `generate` is on.
    pub header: Parsed<HeaderName>,
    /// Passed on as is when present (light-4j's X-Traceability-Id).
    pub traceability_header: Parsed<HeaderName>,
    pub generate: bool,
    /// Propagates a valid W3C `traceparent` (new span id) or starts one.
    pub traceparent: bool,
    /// Returns the correlation id to the client in the same header.
    pub echo: bool,
}

impl Default for CorrelationSettings {
    fn default() -> Self {
        Self {
            header: header("x-correlation-id"),
            traceability_header: header("x-traceability-id"),
            generate: true,
            traceparent: true,
            echo: true,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsSettings {}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AccessLogSettings {
    /// A file to append to; absent or `-`: standard output.
    pub path: Option<String>,
    /// Which members each line has; empty: all.
    pub fields: Vec<LogField>,
    /// Request headers logged (under `headers`), masked when listed in `mask`.
    pub headers: Vec<Parsed<HeaderName>>,
    /// Headers whose values are replaced by `***`; `authorization` always is.
    pub mask: Vec<Parsed<HeaderName>>,
    /// Lines waiting for the writer; past it, lines are dropped and counted.
    pub queue: usize,
}

impl Default for AccessLogSettings {
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

/// The members an access log line can have, in the order they are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogField {
    Time,
    Client,
    Method,
    Path,
    Status,
    Bytes,
    DurationMs,
    Route,
    Upstream,
    CorrelationId,
    TraceabilityId,
    Traceparent,
    /// What a PROXY protocol header said about the connection (after `client`).
    Proxy,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HeadersSettings {
    pub request: HeaderRuleSettings,
    pub response: HeaderRuleSettings,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HeaderRuleSettings {
    /// Replaces every field of that name.
    pub set: HeaderFields,
    /// Appends a field, keeping existing ones.
    pub add: HeaderFields,
    pub remove: Vec<Parsed<HeaderName>>,
}

/// A map of header names to values, in the file's order.
#[derive(Debug, Clone, Default)]
pub struct HeaderFields(pub Vec<(HeaderName, HeaderValue)>);

impl<'de> Deserialize<'de> for HeaderFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = HeaderFields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of header names to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<HeaderFields, A::Error> {
                let mut fields = Vec::new();
                while let Some((Parsed(name), Parsed(value))) =
                    map.next_entry::<Parsed<HeaderName>, Parsed<HeaderValue>>()?
                {
                    fields.push((name, value));
                }
                Ok(HeaderFields(fields))
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}

impl Serialize for HeaderFields {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name.as_str(), value.to_str().unwrap_or_default())?;
        }
        map.end()
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JwtSettings {
    /// A JWKS file; read at start and re-read every `refresh`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub jwks: Option<Spanned<String>>,
    /// An HTTP(S) JWKS endpoint, fetched at start and every `refresh`;
    /// shown without its user information and query.
    #[serde(default)]
    pub jwks_url: Option<Parsed<Uri>>,
    #[serde(
        default = "default_jwks_refresh",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub refresh: Duration,
    /// The only algorithms accepted; required, `none` is never accepted.
    pub algorithms: Vec<Parsed<jwt::Algorithm>>,
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
    pub forward_claims: BTreeMap<String, Parsed<HeaderName>>,
    /// Verified tokens remembered (until they expire).
    #[serde(default = "default_jwt_cache")]
    pub cache: usize,
    #[serde(default = "default_max_token", deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
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

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateSettings {
    /// An OpenAPI 3.0 or 3.1 document (YAML or JSON), relative to the working directory.
    #[schemars(with = "String")]
    pub openapi: Spanned<String>,
    /// Requests for operations the spec does not have: `reject` (404/405) or `pass`.
    #[serde(default)]
    pub unknown_operation: UnknownOperation,
    /// Bodies are held for validation up to this size; past it, 413.
    #[serde(default = "default_validate_body", deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub max_body_bytes: u64,
    /// Also check responses (status, media type, JSON body); a mismatch is
    /// logged and counted, and the response still goes to the client.
    #[serde(default)]
    pub responses: bool,
    /// Response bodies up to this size (with Content-Length) are checked.
    #[serde(default = "default_validate_body", deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub max_response_bytes: u64,
}

fn default_validate_body() -> u64 {
    1024 * 1024
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UnknownOperation {
    #[default]
    Reject,
    Pass,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSettings {
    /// `client_ip`, `header:NAME` or `claim:NAME` (needs `jwt` earlier in the chain).
    #[serde(default = "default_rate_key")]
    pub key: Parsed<RateKey>,
    /// `N/s`, `N/m` or `N/h`.
    pub rate: Parsed<Rate>,
    /// Requests allowed at once above the rate; default: one second's worth.
    #[serde(default)]
    pub burst: Option<NonZeroU32>,
    /// Distinct keys tracked; the least recently used is forgotten past it.
    /// (`store: local` only: Redis expires each key itself.)
    #[serde(default = "default_rate_keys")]
    pub max_keys: usize,
    /// Where the counts live: `local` (each worker's memory, shared by the
    /// process) or `redis` (shared by every proxy using the same Redis).
    #[serde(default)]
    pub store: RateStore,
    /// Required with `store: redis`.
    #[serde(default)]
    pub redis: Option<RedisStoreSettings>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RateStore {
    #[default]
    Local,
    Redis,
}

/// A `rate_limit` counted in Redis (docs/MIDDLEWARE.md, "rate_limit on Redis").
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedisStoreSettings {
    /// `redis://[user[:password]@]host[:port][/db]` or `rediss://` (TLS);
    /// shown without its user information.
    pub url: CredentialUrl,
    /// A file holding the password (trailing newline ignored); overrides
    /// one in the URL.
    #[serde(default)]
    pub password_file: Option<String>,
    /// PEM file of the CA that signed Redis's certificate (`rediss://`);
    /// default: the system's roots.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// The most a request waits for Redis's decision; past it, `on_failure`.
    #[serde(
        default = "default_redis_timeout",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub timeout: Duration,
    /// What a request gets when Redis cannot decide in time.
    #[serde(default)]
    pub on_failure: OnFailure,
    /// Prefix of the Redis keys; default `sluice:rate:<handler name>:`.
    #[serde(default)]
    pub prefix: Option<String>,
}

fn default_redis_timeout() -> Duration {
    Duration::from_millis(5)
}

/// `fail_open`: let the request through (Envoy's ratelimit service's
/// default); `fail_closed`: 503.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    #[default]
    FailOpen,
    FailClosed,
}

fn default_rate_key() -> Parsed<RateKey> {
    Parsed(RateKey::ClientIp)
}

fn default_rate_keys() -> usize {
    100_000
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyLimitSettings {
    /// Requests in flight at once through this handler instance; past it, 503.
    pub max: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CorsSettings {
    /// Allowed origins (`https://a.example`), or `*`.
    pub origins: Vec<String>,
    pub methods: Vec<Parsed<Method>>,
    pub headers: Vec<Parsed<HeaderName>>,
    pub expose_headers: Vec<Parsed<HeaderName>>,
    pub credentials: bool,
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub max_age: Duration,
}

impl Default for CorsSettings {
    fn default() -> Self {
        Self {
            origins: vec!["*".into()],
            methods: [
                Method::GET,
                Method::HEAD,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
            ]
            .map(Parsed)
            .to_vec(),
            headers: Vec::new(),
            expose_headers: Vec::new(),
            credentials: false,
            max_age: Duration::from_secs(600),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct IpFilterSettings {
    /// CIDRs (`10.0.0.0/8`, `::1/128`) or addresses; empty: everyone not denied.
    pub allow: Vec<Parsed<IpNet>>,
    /// Checked first.
    pub deny: Vec<Parsed<IpNet>>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BodyLimitSettings {
    #[serde(deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub max: u64,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FaultSettings {
    pub delay: Option<FaultDelaySettings>,
    pub abort: Option<FaultAbortSettings>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultDelaySettings {
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub duration: Duration,
    /// Share of requests delayed, 0 to 100.
    #[serde(deserialize_with = "percent")]
    #[schemars(range(min = 0, max = 100))]
    pub percent: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultAbortSettings {
    /// 400-599.
    #[serde(deserialize_with = "error_status", serialize_with = "status_number")]
    #[schemars(with = "u16", range(min = 400, max = 599))]
    pub status: StatusCode,
    /// Share of requests answered with `status`, 0 to 100.
    #[serde(deserialize_with = "percent")]
    #[schemars(range(min = 0, max = 100))]
    pub percent: f64,
}

/// `redirect_https`: a request that came over plain HTTP is answered
/// with a redirect to the same host, path and query over https.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RedirectHttpsSettings {
    /// The port of the https URL (1-65535); 443 is left out of `Location`.
    pub port: NonZeroU16,
    /// 301, 302, 307 or 308.
    #[serde(deserialize_with = "redirect_status", serialize_with = "status_number")]
    #[schemars(with = "u16", extend("enum" = [301, 302, 307, 308]))]
    pub status: StatusCode,
}

impl Default for RedirectHttpsSettings {
    fn default() -> Self {
        Self {
            port: const { NonZeroU16::new(443).unwrap() },
            status: StatusCode::PERMANENT_REDIRECT,
        }
    }
}

/// A redirect's status: 301 or 302 (a client may resend a POST as a
/// GET), 307 or 308 (it may not).
fn redirect_status<'de, D: Deserializer<'de>>(deserializer: D) -> Result<StatusCode, D::Error> {
    let value = u16::deserialize(deserializer)?;
    match value {
        301 | 302 | 307 | 308 => StatusCode::from_u16(value).map_err(serde::de::Error::custom),
        _ => Err(serde::de::Error::custom(format!(
            "status must be 301, 302, 307 or 308, not {value}"
        ))),
    }
}
