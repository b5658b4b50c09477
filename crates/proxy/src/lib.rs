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
