//! The `sluice` command's integration tests, one binary (linkerd2-proxy's
//! pattern): each module runs the built `sluice` as a user would, as a
//! separate process over loopback; `common` is what they share. One
//! binary links the dependency graph once instead of once per file.

// Tests and their helpers panic on any failure: that is what a test wants.
#![allow(clippy::unwrap_used)]

mod common;

mod admin_cli;
mod auth_secrets;
mod bench_baseline;
mod bench_cli;
mod bench_oidc;
mod bench_peers_cli;
mod bench_runtimes;
mod cert_cli;
mod docs_paths;
mod gateway_api_cli;
mod idle_memory;
mod idle_memory_h3;
mod load_cli;
mod load_distributed;
mod load_h3_cli;
mod load_html;
mod load_live;
mod load_thresholds;
mod proxy_check;
mod proxy_cli;
mod proxy_reload;
mod rate_limit_cluster;
mod serve_cli;
mod token_cli;
