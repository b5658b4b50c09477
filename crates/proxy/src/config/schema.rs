//! The configuration schema. Every struct rejects unknown keys; values that
//! later checks must point at are `Spanned`.

use std::{collections::BTreeMap, time::Duration};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

use super::{
    admin::{AdminSettings, Substituted},
    balance::{
        at_least_one, default_max_connecting, default_retry_backoff, default_retry_on, Balance,
        HashSettings, HealthSettings, HostSettings, RetryBudgetSettings, RetryOn, StickySettings,
    },
    discovery::DiscoverySettings,
    listener_h3::H3Settings,
    listener_tls::ListenerTlsSettings,
    middleware::{Chains, MiddlewareSettings},
    paths::PathSettings,
    proxy_protocol::{ListenerProxySettings, SendProxyVersion},
    routes::RouteSettings,
    traces::TracesSettings,
    units::{duration, human, optional_duration, optional_human, optional_size, size, ByteSize},
};

/// A whole configuration file.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Worker threads; default: the number of CPUs.
    #[serde(default)]
    pub workers: Option<usize>,
    /// How the worker threads share connections.
    #[serde(default)]
    pub runtime: Runtime,
    /// At least one, here or from `gateway_api`.
    #[serde(default)]
    pub listeners: Vec<ListenerSettings>,
    #[serde(default)]
    pub upstreams: BTreeMap<String, UpstreamSettings>,
    #[serde(default)]
    pub routes: Vec<RouteSettings>,
    /// Handler instances and their settings (docs/MIDDLEWARE.md).
    #[serde(default)]
    pub middleware: MiddlewareSettings,
    /// Named lists of handlers that routes refer to.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, Vec<String>>")]
    pub chains: Chains,
    #[serde(default)]
    pub admin: Option<AdminSettings>,
    #[serde(default)]
    pub limits: LimitSettings,
    /// HTTP/2 settings and safety limits for client connections.
    #[serde(default)]
    pub http2: Http2Settings,
    #[serde(default)]
    pub forwarded: ForwardedSettings,
    /// How request targets are normalised before routing.
    #[serde(default)]
    pub paths: PathSettings,
    #[serde(default)]
    pub log: LogSettings,
    /// How upstream host names are re-resolved.
    #[serde(default)]
    pub discovery: DiscoverySettings,
    /// Spans of requests over OTLP (docs/OBSERVABILITY.md); absent: none.
    #[serde(default)]
    pub traces: Option<TracesSettings>,
    /// Kubernetes Gateway API objects as a source of listeners, routes
    /// and upstreams (docs/GATEWAY-API.md).
    #[serde(default)]
    pub gateway_api: Option<super::gateway_api::GatewayApiSettings>,
    /// What the Gateway API objects' statuses would say (not a key).
    #[serde(skip)]
    pub gateway_report: Option<std::sync::Arc<super::gateway_report::Report>>,
    /// What `${VAR}` took from the environment (not a key of the file).
    #[serde(skip)]
    pub substituted: Substituted,
}

/// How worker threads share the work (docs/PERFORMANCE.md has the measurements).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    /// A single-threaded runtime per worker, each with its own
    /// `SO_REUSEPORT` listener, upstream pool and metrics shard.
    #[default]
    PerCore,
    /// One work-stealing runtime over all workers, sharing one pool.
    MultiThread,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListenerSettings {
    /// `IP:PORT`.
    #[schemars(with = "String")]
    pub address: Spanned<String>,
    /// Serve TLS (ALPN h2 and http/1.1); absent: plaintext HTTP/1.1 and
    /// h2c with prior knowledge on the same port.
    #[serde(default)]
    pub tls: Option<ListenerTlsSettings>,
    /// The HTTP versions served: over TLS the ALPN offer, in plaintext
    /// `[http1, h2]` tells them apart by the HTTP/2 preface, `[h2]`
    /// requires it (h2c only) and `[http1]` never looks for it.
    #[serde(default = "both_versions")]
    pub protocols: Vec<HttpVersion>,
    /// HTTP/3 limits, used when `protocols` names `h3` (TLS only).
    #[serde(default)]
    pub h3: H3Settings,
    /// Its name in logs (a Gateway API listener's is
    /// `gateway/NAMESPACE/NAME:PORT`).
    #[serde(default)]
    pub name: Option<String>,
    /// The route table its requests are routed by: 0 for `routes`
    /// (`RouteOrigin::table`); not a key.
    #[serde(skip)]
    pub route_table: usize,
    /// Connections from a load balancer begin with a PROXY protocol header.
    #[serde(default)]
    pub proxy_protocol: Option<ListenerProxySettings>,
}

/// An HTTP version a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HttpVersion {
    Http1,
    H2,
    /// HTTP/3 over QUIC, on UDP at the TLS listener's address.
    H3,
}

fn both_versions() -> Vec<HttpVersion> {
    vec![HttpVersion::H2, HttpVersion::Http1]
}

/// HTTP/2 limits for client connections (RFC 9113 settings, and the
/// flood mitigations that keep a hostile peer from costing us memory).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Http2Settings {
    /// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_concurrent_streams: u32,
    /// Decoded header list size; past it the stream is refused (default:
    /// `limits.max_header_bytes`).
    #[serde(deserialize_with = "optional_size")]
    #[schemars(with = "Option<ByteSize>")]
    pub max_header_list_bytes: Option<u64>,
    /// Largest frame payload we accept, 16 KiB to 16 MiB.
    #[serde(deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub max_frame_bytes: u64,
    /// Flow-control window per stream.
    #[serde(deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub stream_window: u64,
    /// Flow-control window per connection.
    #[serde(deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub connection_window: u64,
    /// Streams a client may reset before we accept them (rapid reset,
    /// CVE-2023-44487); past it, GOAWAY.
    pub max_pending_accept_resets: usize,
    /// Streams we may have to reset for a client's protocol errors; past it, GOAWAY.
    pub max_local_error_resets: usize,
    /// Streams a client may reset before their response completes within
    /// `premature_reset_window`; past it, GOAWAY (ENHANCE_YOUR_CALM).
    pub max_premature_resets: u32,
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub premature_reset_window: Duration,
    /// Huffman-code the header strings sent to clients where that is
    /// shorter (as nginx); off, they go as they are (as HAProxy), which
    /// costs less CPU.
    pub huffman: bool,
}

impl Default for Http2Settings {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 128,
            max_header_list_bytes: None,
            max_frame_bytes: 16 * 1024,
            stream_window: 1024 * 1024,
            connection_window: 4 * 1024 * 1024,
            max_pending_accept_resets: 20,
            max_local_error_resets: 256,
            max_premature_resets: 100,
            premature_reset_window: Duration::from_secs(10),
            huffman: false,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSettings {
    /// `http://HOST:PORT`, or `{ url, weight }`, for each host.
    #[schemars(with = "Vec<HostSettings>")]
    pub hosts: Vec<Spanned<HostSettings>>,
    #[serde(default)]
    pub balance: Balance,
    /// What `balance: hash` hashes.
    #[serde(default)]
    pub hash: Option<HashSettings>,
    /// Session persistence by a cookie.
    #[serde(default)]
    pub sticky: Option<StickySettings>,
    /// Ramps the share of a host that comes back (or is new) over this long.
    #[serde(
        default,
        deserialize_with = "optional_duration",
        serialize_with = "optional_human"
    )]
    pub slow_start: Option<Duration>,
    /// What a request is retried on (up to `retries`).
    #[serde(default = "default_retry_on")]
    pub retry_on: Vec<RetryOn>,
    /// Caps retries to a share of the requests.
    #[serde(default)]
    pub retry_budget: Option<RetryBudgetSettings>,
    /// The base of the jittered exponential backoff between attempts.
    #[serde(
        default = "default_retry_backoff",
        deserialize_with = "duration",
        serialize_with = "human"
    )]
    pub retry_backoff: Duration,
    /// Requests in flight to one host at most; more wait (`max_pending`).
    #[serde(default)]
    pub max_connections: Option<u32>,
    /// Requests waiting for a host at `max_connections`; past it, 503.
    /// Default: no bound but `timeouts.queue` (and the client connections).
    #[serde(default)]
    pub max_pending: Option<u32>,
    /// Connections being opened to one host at once; more requests wait
    /// for one of those or for a connection another request gives back.
    #[serde(default = "default_max_connecting", deserialize_with = "at_least_one")]
    pub max_connecting: u32,
    #[serde(default)]
    pub timeouts: TimeoutSettings,
    /// Further attempts for connect failures and idempotent requests.
    #[serde(default = "default_retries")]
    pub retries: u32,
    #[serde(default)]
    pub pool: PoolSettings,
    #[serde(default)]
    pub health: HealthSettings,
    /// Replaces the `Host` sent upstream; default: the client's.
    #[serde(default)]
    pub host_header: Option<String>,
    /// The protocol spoken to the hosts.
    #[serde(default)]
    pub protocol: Protocol,
    /// TLS settings for `https://` hosts.
    #[serde(default)]
    pub tls: Option<UpstreamTlsSettings>,
    /// Each new connection begins with a PROXY protocol header naming the client.
    #[serde(default)]
    pub proxy_protocol: Option<SendProxyVersion>,
}

/// What a proxy speaks to an upstream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// HTTP/1.1 keep-alive, over TCP (`http://`) or TLS (`https://`).
    #[default]
    Http1,
    /// HTTP/2 with prior knowledge over TCP (`http://`).
    H2c,
    /// HTTP/2 over TLS, negotiated by ALPN (`https://`).
    H2,
}

/// How the proxy checks and authenticates to `https://` upstream hosts.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTlsSettings {
    /// PEM CA certificates to verify the hosts with; default: the
    /// built-in web roots.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub ca: Option<Spanned<String>>,
    /// PEM client certificate chain, for upstreams that want mTLS.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub cert: Option<Spanned<String>>,
    /// Its PEM private key.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub key: Option<Spanned<String>>,
    /// The name sent as SNI and checked against the certificate; default:
    /// the host of each URL.
    #[serde(default)]
    pub server_name: Option<String>,
}

fn default_retries() -> u32 {
    2
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutSettings {
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub connect: Duration,
    /// From sending the request to the end of the response head: past it, 504.
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub request: Duration,
    /// Waiting for a connection to a host (`max_connections`,
    /// `max_connecting`): past it, 503.
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub queue: Duration,
}

impl Default for TimeoutSettings {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(1),
            request: Duration::from_secs(10),
            queue: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PoolSettings {
    /// Idle keep-alive connections kept per host.
    pub max_idle: usize,
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub idle_timeout: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            max_idle: 1024,
            idle_timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LimitSettings {
    /// A client must send a whole request head within this (slowloris).
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub header_read_timeout: Duration,
    /// A keep-alive connection without a request for this long is closed.
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub idle_timeout: Duration,
    /// Request line and headers; past it, 431.
    #[serde(deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub max_header_bytes: u64,
    /// Request body; past it, 413.
    #[serde(deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub max_body_bytes: u64,
    pub max_connections: usize,
    /// A response that makes no progress towards the client for this long
    /// (a client that stops reading) ends its connection (HTTP/1.1) or stream (HTTP/2).
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub send_timeout: Duration,
    /// In-flight requests may finish for this long after SIGTERM.
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub shutdown_deadline: Duration,
}

impl Default for LimitSettings {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_header_bytes: 32 * 1024,
            max_body_bytes: 10 * 1024 * 1024,
            max_connections: 10_000,
            send_timeout: Duration::from_secs(30),
            shutdown_deadline: Duration::from_secs(10),
        }
    }
}

/// X-Forwarded-For/-Proto/-Host handling.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ForwardedSettings {
    /// Keep (and append to) the client's own X-Forwarded-* headers;
    /// otherwise they are replaced.
    pub trust: bool,
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    pub format: LogFormat,
    /// A tracing filter (`info`, `sluice=debug,warn`); RUST_LOG wins when set.
    pub level: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}
