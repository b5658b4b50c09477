//! The `routes` section: what a request must look like to take a route
//! (path, methods, hosts, headers, query parameters), where it goes (one
//! upstream, or weighted backends across upstreams), what is done to it
//! on the way (header changes, a URL rewrite, mirroring) or instead
//! (a redirect, a direct response), and the route's own timeouts and
//! retries. The same shape as a Gateway API HTTPRoute rule
//! (docs/GATEWAY-API.md maps each field); `gateway/` translates those
//! into these.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{de::Error as _, Deserialize, Deserializer, Serialize};
use serde_saphyr::Spanned;

use super::{
    balance::RetryOn,
    handlers::{HeaderFields, HeaderRuleSettings},
    middleware::ChainRef,
    route_patterns::Pattern,
    typed::Parsed,
    units::{duration, human, optional_duration, optional_human},
};

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteSettings {
    /// Starts with `/` (a `regex` is matched against the whole path).
    #[schemars(with = "String")]
    pub path: Spanned<String>,
    #[serde(default, rename = "match")]
    pub match_kind: PathMatch,
    /// Empty: any method.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub methods: Vec<Spanned<String>>,
    /// Matches the request's host (without port) when set; `*.example.com`
    /// matches any name below `example.com`.
    #[serde(default)]
    pub host: Option<String>,
    /// More host names (either key, or both).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub hosts: Vec<Spanned<String>>,
    /// Every one must match.
    #[serde(default)]
    #[schemars(with = "Vec<FieldMatchSettings>")]
    pub headers: Vec<Spanned<FieldMatchSettings>>,
    /// Every one must match (first occurrence of each name).
    #[serde(default)]
    #[schemars(with = "Vec<FieldMatchSettings>")]
    pub query: Vec<Spanned<FieldMatchSettings>>,
    /// Where requests go; or `backends`, or an answer (`redirect`, `respond`).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub upstream: Option<Spanned<String>>,
    /// Several upstreams with weights.
    #[serde(default)]
    #[schemars(with = "Vec<BackendSettings>")]
    pub backends: Vec<Spanned<BackendSettings>>,
    /// The handlers requests on this route pass; absent or `[]`: none.
    #[serde(default)]
    #[schemars(with = "Option<ChainRef>")]
    pub chain: Option<Spanned<ChainRef>>,
    /// Protocols a request on this route may upgrade to (`Upgrade`);
    /// others are removed from the request, and `h2c` always is.
    #[serde(default = "default_upgrades")]
    #[schemars(with = "Vec<String>")]
    pub upgrades: Vec<Spanned<String>>,
    /// What becomes of an HTTP/2 client's request trailers.
    #[serde(default)]
    pub request_trailers: TrailerPolicy,
    /// Header changes on the request sent upstream.
    #[serde(default)]
    pub request_headers: Option<HeaderRuleSettings>,
    /// Header changes on the response sent to the client.
    #[serde(default)]
    pub response_headers: Option<HeaderRuleSettings>,
    /// Answer with a redirect instead of forwarding.
    #[serde(default)]
    #[schemars(with = "Option<RedirectSettings>")]
    pub redirect: Option<Spanned<RedirectSettings>>,
    /// A new host or path for the upstream.
    #[serde(default)]
    #[schemars(with = "Option<RewriteSettings>")]
    pub rewrite: Option<Spanned<RewriteSettings>>,
    /// Answer with this instead of forwarding.
    #[serde(default)]
    #[schemars(with = "Option<RespondSettings>")]
    pub respond: Option<Spanned<RespondSettings>>,
    /// Copies of the requests, sent and forgotten.
    #[serde(default)]
    #[schemars(with = "Vec<MirrorSettings>")]
    pub mirror: Vec<Spanned<MirrorSettings>>,
    #[serde(default)]
    pub timeouts: RouteTimeoutSettings,
    /// Replaces the upstream's retry settings for this route.
    #[serde(default)]
    #[schemars(with = "Option<RouteRetrySettings>")]
    pub retries: Option<Spanned<RouteRetrySettings>>,
    /// Where the route came from (not a key of the file).
    #[serde(skip)]
    pub origin: RouteOrigin,
}

/// Where a route came from: the file's `routes`, or a Gateway API
/// HTTPRoute rule (`gateway/`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteOrigin {
    /// The route table it is in: 0 for `routes`, one per Gateway
    /// address (`ListenerSettings::route_table`).
    pub table: usize,
    /// Its name in metrics and spans; default: its path.
    pub name: Option<String>,
    /// A request whose method no route of its path takes is 404 (the
    /// Gateway API's rule), not 405.
    pub no_405: bool,
}

/// Where an HTTP/2 client's request trailers go (the fields the head
/// rules control never pass, whatever this says).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TrailerPolicy {
    /// To HTTP/2 upstreams (gRPC), not to HTTP/1.1 ones (as Envoy).
    #[default]
    Auto,
    /// To every upstream: a chunked HTTP/1.1 body carries them.
    Forward,
    /// Nowhere.
    Drop,
}

pub(super) fn default_upgrades() -> Vec<Spanned<String>> {
    let unknown = serde_saphyr::Location::UNKNOWN;
    vec![Spanned::new("websocket".into(), unknown, unknown)]
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PathMatch {
    #[default]
    Prefix,
    Exact,
    /// A regular expression the whole path must match.
    Regex,
}

/// One header or query parameter condition: `value` (exact), `regex`
/// (the whole value), or `present: true|false`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldMatchSettings {
    pub name: String,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub regex: Option<Parsed<Pattern>>,
    #[serde(default)]
    pub present: Option<bool>,
}

/// One upstream of a route's weighted backends.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendSettings {
    #[schemars(with = "String")]
    pub upstream: Spanned<String>,
    /// Its share among the route's backends; 0: no traffic.
    #[serde(default = "one")]
    pub weight: u32,
    /// Header changes for requests sent to this backend only.
    #[serde(default)]
    pub request_headers: Option<HeaderRuleSettings>,
    #[serde(default)]
    pub response_headers: Option<HeaderRuleSettings>,
    /// A backend that answers with this status instead of an upstream
    /// (a Gateway API backendRef that does not resolve: 500); not a key.
    #[serde(skip)]
    pub status: Option<u16>,
}

fn one() -> u32 {
    1
}

/// A redirect: each part absent keeps the request's.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedirectSettings {
    /// `http` or `https`; absent: the request's.
    #[serde(default)]
    pub scheme: Option<String>,
    #[serde(default)]
    pub hostname: Option<String>,
    /// Absent: the well-known port of `scheme` when it is set (left out
    /// of the Location), else the request's.
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub path: Option<PathRewriteSettings>,
    /// 301, 302, 303, 307 or 308.
    #[serde(default = "found")]
    pub status: u16,
}

fn found() -> u16 {
    302
}

/// A new path: the whole of it, or the part the route's prefix matched.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum PathRewriteSettings {
    Full(String),
    Prefix(String),
}

/// What the upstream receives instead of the request's host or path.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RewriteSettings {
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub path: Option<PathRewriteSettings>,
}

/// An answer of the route's own (a maintenance page, a health stub).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RespondSettings {
    pub status: u16,
    #[serde(default)]
    pub headers: HeaderFields,
    #[serde(default)]
    pub body: String,
}

/// A copy of each request (or of a share of them) to another upstream.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MirrorSettings {
    #[schemars(with = "String")]
    pub upstream: Spanned<String>,
    /// The share of requests copied, 0 to 100.
    #[serde(default = "hundred", deserialize_with = "share")]
    pub percent: f64,
    /// Copies in flight at once (each worker's share of them); past it
    /// a copy is dropped and counted.
    #[serde(default = "default_mirror_in_flight")]
    pub max_in_flight: u32,
}

fn hundred() -> f64 {
    100.0
}

fn default_mirror_in_flight() -> u32 {
    64
}

fn share<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    let value = f64::deserialize(deserializer)?;
    if !(0.0..=100.0).contains(&value) {
        return Err(D::Error::custom(format!(
            "percent must be between 0 and 100, not {value}"
        )));
    }
    Ok(value)
}

/// A route's own timeouts; `0s` turns one off.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteTimeoutSettings {
    /// From the first attempt to the response head, retries included; past it, 504.
    #[serde(
        default,
        deserialize_with = "optional_duration",
        serialize_with = "optional_human"
    )]
    pub request: Option<Duration>,
    /// One attempt, in place of the upstream's `timeouts.request`.
    #[serde(
        default,
        deserialize_with = "optional_duration",
        serialize_with = "optional_human"
    )]
    pub backend_request: Option<Duration>,
}

/// A route's retries, in place of its upstream's `retries`, `retry_on`
/// and `retry_backoff` (its `retry_budget` is not spent).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteRetrySettings {
    /// Further attempts after the first.
    pub attempts: u32,
    #[serde(default = "connect_failure")]
    pub on: Vec<RetryOn>,
    #[serde(
        default = "default_backoff",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub backoff: Duration,
}

fn connect_failure() -> Vec<RetryOn> {
    vec![RetryOn::ConnectFailure]
}

fn default_backoff() -> Duration {
    Duration::from_millis(25)
}

/// Header fields the proxy writes itself (framing, connection
/// management, `Host`), which header changes may not touch: the
/// `headers` handler refuses them, and a Gateway API route naming one is
/// not accepted. (`wire::head::HOP_BY_HOP` are among them; a test there
/// keeps it so.)
pub(crate) fn managed_header(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "host",
    ]
    .iter()
    .any(|managed| name.eq_ignore_ascii_case(managed))
}

impl RouteSettings {
    /// Its name in metrics and spans.
    pub fn name(&self) -> &str {
        self.origin.name.as_deref().unwrap_or(&self.path.value)
    }

    /// Every upstream it names (for the checks and the handlers that
    /// count by upstream): `upstream`, then `backends`.
    pub fn upstream_names(&self) -> impl Iterator<Item = &Spanned<String>> {
        self.upstream.iter().chain(
            self.backends
                .iter()
                .filter(|b| b.value.status.is_none())
                .map(|b| &b.value.upstream),
        )
    }

    /// Its host names, `host` first.
    pub fn host_names(&self) -> impl Iterator<Item = &str> {
        self.host
            .as_deref()
            .into_iter()
            .chain(self.hosts.iter().map(|h| h.value.as_str()))
    }
}
