//! `sluice proxy`: the sidecar reverse proxy, API gateway and load balancer.
//!
//! The crate is a stack of layers whose imports only go down
//! (docs/ARCHITECTURE.md; `tests/it/layers.rs` fails on an import that goes
//! up, or on a cycle between modules):
//!
//! | layer | module | what it holds |
//! |---|---|---|
//! | 0 | [`config`], `ids` | the YAML schema, its validation; typed ids |
//! | 1 | [`wire`] | pure functions over heads: normalisation, header rules |
//! | 2 | `telemetry` | metrics shards and their Prometheus text |
//! | 3 | `middleware`, `upstream` | handlers and chains; upstreams, balancing, connections, pools |
//! | 4 | [`plan`] | the compiled configuration, swapped whole |
//! | 5 | `session` | one request's phases, one file each |
//! | 6 | `server` | workers, listeners, TLS, HTTP/2 connections, admin |
//!
//! docs/ARCHITECTURE.md names each layer's files and a request's phases.

pub mod config;
mod ids;
mod middleware;
pub mod plan;
mod server;
mod session;
mod telemetry;
mod upstream;
pub mod wire;

pub use server::{check, shown_config, start, start_with, LogHook, Options, RunningProxy};

/// What tests/compress_alloc.rs checks against the allocator: the memory
/// the `compress` handler reserves for a gzip compressor. Not an API.
#[doc(hidden)]
pub mod measured {
    /// The reservation for a window of 2^`window_bits` and `memory_level`
    /// (without the output allowance).
    pub fn gzip_reservation(window_bits: u8, memory_level: u8) -> usize {
        crate::middleware::compress_gzip_bytes(window_bits, memory_level)
    }
}

/// Entry points for the fuzz targets (fuzz/, issue 34) into the layers
/// above `wire` (whose own are [`wire::fuzzing`]): `traceparent` as the
/// tracer reads and writes it and as the correlation handler continues
/// it, and the cookie lookup of `balance: hash` and sticky sessions. Not
/// an API: nothing else calls these.
#[doc(hidden)]
pub mod fuzzing {
    use http::Method;

    use crate::wire::{fuzzing::Head, head::Outgoing};

    /// Trace id, parent span id and sampled flag of a valid `traceparent`.
    pub fn parse_traceparent(value: &[u8]) -> Option<(u128, u64, bool)> {
        crate::telemetry::trace::parse_traceparent(value)
    }

    /// The `traceparent` naming span `span_id` of trace `trace_id`.
    pub fn traceparent(trace_id: u128, span_id: u64) -> [u8; 55] {
        crate::telemetry::trace::SpanContext { trace_id, span_id }.traceparent()
    }

    /// Whether the correlation handler continues `value`.
    pub fn is_traceparent(value: &[u8]) -> bool {
        crate::middleware::is_traceparent(value)
    }

    /// The correlation handler's next `traceparent`.
    pub fn next_traceparent(parent: Option<&[u8]>, trace: u128, span: u64) -> [u8; 55] {
        crate::middleware::next_traceparent(parent, trace, span)
    }

    /// How many users an htpasswd text holds, or why it is refused.
    pub fn htpasswd(text: &str) -> Result<usize, String> {
        crate::middleware::auth_parsers::Users::lines(text)
            .map(|(users, _)| users.len())
            .map_err(|err| err.to_string())
    }

    /// How many keys an `api_key` keys file holds, or why it is refused.
    pub fn api_keys(text: &str) -> Result<usize, String> {
        crate::middleware::auth_parsers::KeyList::parse(text)
            .map(|keys| keys.len())
            .map_err(|err| err.to_string())
    }

    /// The user and password of an `Authorization: Basic` value.
    pub fn basic_credentials(value: &[u8]) -> Option<(String, Vec<u8>)> {
        crate::middleware::auth_parsers::credentials(value)
    }

    /// An ext_authz CheckResponse's decision: `Some(true)` allows,
    /// `Some(false)` denies with the status; `None`: it does not decode.
    pub fn check_response(bytes: &[u8]) -> Option<(bool, u16)> {
        use crate::middleware::auth_parsers::Decision;
        Some(match crate::middleware::auth_parsers::decision_of(bytes)? {
            Decision::Allow { .. } => (true, 200),
            Decision::Deny { status, .. } => (false, status.as_u16()),
        })
    }

    /// Whether `text` opens as a session cookie sealed with 32 bytes of `key`.
    pub fn opens_as_session(key: u8, text: &str) -> bool {
        let key = base64_key(key);
        let sealer = crate::middleware::auth_parsers::Sealer::new(&[key]).expect("a 32-byte key");
        sealer.open("session", text).is_some()
    }

    /// `text` sealed as a session cookie with 32 bytes of `key`.
    pub fn seal_session(key: u8, plain: &[u8]) -> String {
        let key = base64_key(key);
        let sealer = crate::middleware::auth_parsers::Sealer::new(&[key]).expect("a 32-byte key");
        sealer.seal("session", plain)
    }

    fn base64_key(key: u8) -> crate::config::Secret {
        use base64::Engine as _;
        let text = base64::engine::general_purpose::STANDARD.encode([key; 32]);
        serde_json::from_value(serde_json::Value::String(text)).expect("a string")
    }

    /// The OIDC callback's query parameter and cookie lookups.
    pub fn oidc_lookups(
        query: &str,
        cookies: &[&[u8]],
        name: &str,
    ) -> (Option<String>, Option<String>) {
        use crate::middleware::auth_parsers::{cookie, query_param};
        (
            query_param(Some(query), name),
            cookie(cookies.iter().copied(), name).map(str::to_string),
        )
    }

    /// The first query parameter `name` as a route's `query` condition reads it.
    pub fn query_param(query: &[u8], name: &str) -> Option<String> {
        crate::plan::routes::matches::first_param(query, name).map(|v| v.into_owned())
    }

    /// Whether `path` matches a route pattern (`match: regex`), and the
    /// literal start the route table files it under.
    pub fn route_pattern(pattern: &str, path: &str) -> Option<(bool, String)> {
        use crate::config::Setting;
        let compiled = crate::config::Pattern::parse(pattern).ok()?;
        Some((
            compiled.matches(path),
            crate::config::literal_start(pattern).to_string(),
        ))
    }

    /// Gateway API objects (a YAML stream) translated and added to a
    /// configuration, which must pass its checks; `Err` says which failed.
    pub fn gateway_objects(text: &str) -> Result<(), String> {
        crate::config::gateway::fuzzing(text)
    }

    /// The value of cookie `name` in a request with these fields.
    pub fn cookie<'a>(fields: Head<'a>, name: &str) -> Option<&'a [u8]> {
        let request = Outgoing {
            method: &Method::GET,
            path: b"/",
            query: None,
            host: None,
            fields: fields.fields(),
        };
        crate::upstream::balance::cookie(&request, name)
    }
}
