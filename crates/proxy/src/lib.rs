//! `sluice proxy`: the sidecar reverse proxy, API gateway and load balancer.
//!
//! The crate is a stack of layers whose imports only go down
//! (docs/ARCHITECTURE.md; `tests/layers.rs` fails on an import that goes
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
