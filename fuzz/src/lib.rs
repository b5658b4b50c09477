//! The fuzz targets' checks, one module a target, each a
//! `check(data: &[u8])` that panics on a broken property. The libFuzzer
//! binaries (fuzz_targets/, `cargo +nightly fuzz run NAME`) call them, and
//! so does tests/seeds.rs on stable, replaying the checked-in seeds
//! (seeds/NAME/) through the same function. docs/FUZZING.md says what
//! each asserts and how far the long runs went.

pub mod config;
pub mod cookies;
pub mod credentials;
pub mod gateway_objects;
pub mod h2_conn;
pub mod h2_frames;
pub mod h2_heads;
pub mod h2_server;
pub mod h3_request;
pub mod h3_streams;
pub mod hpack_decode;
pub mod hpack_differential;
pub mod http1_request;
pub mod http1_response;
pub mod http1_upstream_response;
pub mod jwks;
pub mod jwt_verify;
pub mod load_scenario;
pub mod load_threshold;
pub mod normalize_request;
pub mod openapi_request;
pub mod openapi_spec;
pub mod proxy_protocol;
pub mod qpack_decode;
pub mod route_matching;
pub mod traceparent;
pub mod trailers;

/// A file error's shape (a configuration or a scenario file): shown as
/// `FILE…` on one line with a message, at a line within `text` (YAML
/// breaks lines at CR as well as LF; an error may name one past the last).
pub fn assert_located(shown: &str, file: &str, message: &str, line: usize, text: &str) {
    assert!(shown.starts_with(file), "{shown}");
    assert!(!message.is_empty(), "{shown}");
    assert!(!shown.contains('\n'), "{shown}");
    let lines = text.split(['\n', '\r']).count();
    assert!(line <= lines + 1, "{shown} ({lines} lines)");
}

/// A target's check: panics when a property breaks.
pub type Check = fn(&[u8]);

/// Every target: its name (the binary, seeds/NAME/) and its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("config", config::check),
    ("cookies", cookies::check),
    ("credentials", credentials::check),
    ("gateway_objects", gateway_objects::check),
    ("h2_heads", h2_heads::check),
    ("h2_conn", h2_conn::check),
    ("h2_frames", h2_frames::check),
    ("h2_server", h2_server::check),
    ("h3_request", h3_request::check),
    ("h3_streams", h3_streams::check),
    ("hpack_decode", hpack_decode::check),
    ("hpack_differential", hpack_differential::check),
    ("http1_request", http1_request::check),
    ("http1_response", http1_response::check),
    ("http1_upstream_response", http1_upstream_response::check),
    ("jwks", jwks::check),
    ("jwt_verify", jwt_verify::check),
    ("load_scenario", load_scenario::check),
    ("load_threshold", load_threshold::check),
    ("normalize_request", normalize_request::check),
    ("openapi_request", openapi_request::check),
    ("openapi_spec", openapi_spec::check),
    ("proxy_protocol", proxy_protocol::check),
    ("qpack_decode", qpack_decode::check),
    ("route_matching", route_matching::check),
    ("traceparent", traceparent::check),
    ("trailers", trailers::check),
];
