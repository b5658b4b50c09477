//! The proxy's integration tests, one binary (linkerd2-proxy's pattern):
//! every module here links the crate and its dependency graph once
//! instead of once per file. Each module is one behaviour, over real
//! loopback sockets; `support` and `h3_support` are what they share.
//! normalize_alloc.rs stays a binary of its own: it installs a counting
//! global allocator, which would count every other test's allocations too.

// Tests and their helpers panic on any failure: that is what a test wants.
#![allow(clippy::unwrap_used)]

mod h3_support;
mod support;

mod acme;
mod admin_guards;
mod balancing;
mod balancing_across_reloads;
mod client_cancellation;
mod compress;
mod config_doc;
mod config_schema;
mod dashboard;
mod folder_cycles;
mod forwarding;
mod full_duplex;
mod grpc_web;
mod http2_and_tls;
mod http2_floods;
mod http3;
mod http3_abuse;
mod http3_clients;
mod http3_hostile;
mod http3_lifecycle;
mod http3_workers;
mod idle_parking;
mod interim_answers;
mod layers;
mod metrics_exposition;
mod middleware;
mod mtls;
mod path_normalization;
mod phases;
mod protocol_pairs;
mod proxy_protocol;
mod rate_limit_redis;
mod rate_limit_redis_stall;
mod reload;
mod reload_keeps_state;
mod routing;
mod saturated_upstreams;
mod tls_settings;
mod traces;
mod truncated;
mod upgrades;
mod upstream_smuggling;
mod who_may_pass;
