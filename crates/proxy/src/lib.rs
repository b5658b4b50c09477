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
//! A request reads top-down in about five files: `server/listener.rs`,
//! `session/client_h1.rs`, `session/admit.rs`, `session/upstream_h1.rs` (or
//! `upstream_h2.rs`) and `session/respond.rs`.

pub mod config;
mod ids;
mod middleware;
pub mod plan;
mod server;
mod session;
mod telemetry;
mod upstream;
pub mod wire;

pub use server::{check, start, start_with, LogHook, Options, RunningProxy};

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
