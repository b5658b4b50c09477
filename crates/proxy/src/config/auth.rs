//! Settings of the handlers that decide who may pass besides `jwt`:
//! `api_key`, `basic_auth`, `ext_authz` and `oidc` (docs/MIDDLEWARE.md).
//! Secrets written inline (`${ENV}` welcome) are [`Secret`]s: `Debug`
//! and `/config` show a digest marker, never the value.

use std::{collections::BTreeMap, time::Duration};

use http::{HeaderName, Uri};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

use super::{
    handlers::OnFailure,
    secret::Secret,
    typed::Parsed,
    units::{duration, human, optional_size, size, ByteSize},
};

fn default_reload() -> Duration {
    Duration::from_secs(10)
}

fn default_realm() -> String {
    "sluice".into()
}

fn default_true() -> bool {
    true
}

/// `api_key`: keys carried in a header or a query parameter.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiKeySettings {
    /// Key name -> key, written inline (`"${CI_KEY}"`).
    #[serde(default)]
    pub keys: BTreeMap<String, Secret>,
    /// A file of `name: key` lines (`name: sha256:HEX` for a key given by
    /// its SHA-256); re-read when it changes.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub keys_file: Option<Spanned<String>>,
    /// The header that carries the key; `none`-able by naming `query` only.
    #[serde(default = "default_api_key_header")]
    pub header: Option<Parsed<HeaderName>>,
    /// A query parameter that carries the key (when the header is absent).
    #[serde(default)]
    pub query: Option<String>,
    /// The key's name is sent upstream in this header (never the key).
    #[serde(default = "default_key_name_header")]
    pub forward_name: Option<Parsed<HeaderName>>,
    /// How often `keys_file` is checked for changes.
    #[serde(
        default = "default_reload",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub reload: Duration,
}

fn default_api_key_header() -> Option<Parsed<HeaderName>> {
    Some(Parsed(HeaderName::from_static("x-api-key")))
}

fn default_key_name_header() -> Option<Parsed<HeaderName>> {
    Some(Parsed(HeaderName::from_static("x-api-key-name")))
}

/// `basic_auth`: users of an htpasswd file (bcrypt or argon2 hashes).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BasicAuthSettings {
    /// An htpasswd file (`htpasswd -B`, or argon2 PHC strings); re-read when it changes.
    #[schemars(with = "String")]
    pub htpasswd: Spanned<String>,
    #[serde(default = "default_realm")]
    pub realm: String,
    /// The user name is sent upstream in this header.
    #[serde(default)]
    pub forward_user: Option<Parsed<HeaderName>>,
    /// Drop `Authorization` from the request sent upstream.
    #[serde(default = "default_true")]
    pub remove_header: bool,
    /// How often the file is checked for changes.
    #[serde(
        default = "default_reload",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub reload: Duration,
    /// Passwords verified recently are remembered this long (a bcrypt
    /// check costs milliseconds); `0s` checks every request.
    #[serde(
        default = "default_basic_cache",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub cache: Duration,
}

fn default_basic_cache() -> Duration {
    Duration::from_secs(60)
}

/// `ext_authz`: an authorization service decides (HTTP forward auth or
/// Envoy's gRPC `Authorization/Check`).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtAuthzSettings {
    /// Forward auth (Traefik `forwardAuth` / Caddy `forward_auth`): an
    /// `http://` URL asked with the request's method, URI and headers.
    #[serde(default)]
    pub http: Option<Parsed<Uri>>,
    /// Envoy's `envoy.service.auth.v3.Authorization/Check` over h2c at
    /// this `http://host:port`.
    #[serde(default)]
    pub grpc: Option<Parsed<Uri>>,
    /// The most a request waits for the decision.
    #[serde(
        default = "default_authz_timeout",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub timeout: Duration,
    /// No decision in time (or the service failed): `fail_closed` (403
    /// ... 503) or `fail_open` (let through).
    #[serde(default = "default_fail_closed")]
    pub on_failure: OnFailure,
    /// Request headers sent to the service; absent: all of them.
    #[serde(default)]
    pub request_headers: Option<Vec<Parsed<HeaderName>>>,
    /// Headers the service may set on the request sent upstream; they are
    /// always removed from the client's request first.
    #[serde(default)]
    pub upstream_headers: Vec<Parsed<HeaderName>>,
    /// Send the request body too, when its Content-Length is at most this.
    #[serde(default, deserialize_with = "optional_size")]
    #[schemars(with = "Option<ByteSize>")]
    pub body: Option<u64>,
    /// Remember allow answers (and their headers) for this long, keyed by
    /// `cache_key`; absent: ask every time.
    #[serde(default)]
    pub cache: Option<AuthzCacheSettings>,
}

fn default_authz_timeout() -> Duration {
    Duration::from_millis(500)
}

fn default_fail_closed() -> OnFailure {
    OnFailure::FailClosed
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthzCacheSettings {
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub ttl: Duration,
    /// The request headers whose values make the key (with the method and path).
    pub key: Vec<Parsed<HeaderName>>,
    #[serde(default = "default_authz_entries")]
    pub max_entries: usize,
}

fn default_authz_entries() -> usize {
    10_000
}

/// `oidc`: browser login with the authorization-code flow and PKCE.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OidcSettings {
    /// The provider; its `/.well-known/openid-configuration` is read at start.
    pub issuer: Parsed<Uri>,
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<Secret>,
    /// Where the provider sends the browser back, e.g.
    /// `https://app.example/oauth2/callback`; its path is answered here.
    pub redirect_url: Parsed<Uri>,
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// Ends the session (and the provider's, when it has an end-session endpoint).
    #[serde(default = "default_logout_path")]
    pub logout_path: String,
    /// Where the browser goes after logout.
    #[serde(default = "default_after_logout")]
    pub after_logout: String,
    /// Keys (32 random bytes, base64) of the session cookie: the first
    /// seals, every one opens, so that a reload can rotate them.
    pub cookie_keys: Vec<Secret>,
    #[serde(default = "default_cookie_name")]
    pub cookie_name: String,
    /// Set `Secure` on the cookies (on unless the redirect URL is http://).
    #[serde(default)]
    pub cookie_secure: Option<bool>,
    /// A session cookie larger than this is refused at login.
    #[serde(default = "default_cookie_bytes", deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub max_cookie_bytes: u64,
    /// The session lasts at most this long, refreshes included.
    #[serde(
        default = "default_session",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub session: Duration,
    /// Clock skew allowed on the ID token's `exp`/`iat`.
    #[serde(
        default = "default_oidc_leeway",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub leeway: Duration,
    /// ID token claim -> request header sent upstream (as `jwt`'s).
    #[serde(default)]
    pub forward_claims: BTreeMap<String, Parsed<HeaderName>>,
    /// The provider's calls (discovery, token, JWKS) time out after this.
    #[serde(
        default = "default_oidc_timeout",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub timeout: Duration,
}

fn default_scopes() -> Vec<String> {
    vec!["openid".into(), "profile".into(), "email".into()]
}

fn default_logout_path() -> String {
    "/oauth2/logout".into()
}

fn default_after_logout() -> String {
    "/".into()
}

fn default_cookie_name() -> String {
    "sluice_session".into()
}

fn default_cookie_bytes() -> u64 {
    4000
}

fn default_session() -> Duration {
    Duration::from_secs(24 * 3600)
}

fn default_oidc_leeway() -> Duration {
    Duration::from_secs(30)
}

fn default_oidc_timeout() -> Duration {
    Duration::from_secs(5)
}
