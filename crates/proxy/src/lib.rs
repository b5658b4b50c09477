//! `sluice proxy`: the sidecar reverse proxy for HTTP/1.1.
//!
//! A request goes through a short list of phases (docs/LIFECYCLE-proxy.md):
//! parse and check the head (`http1`), normalise its target and Host
//! (`normalize`), route (`route`), pick a host
//! (`balance`) and a connection (`pool`), rewrite and send (`forward`),
//! relay the answer (`session`). `gateway` is the configuration compiled
//! for that path; `worker` runs the listeners; `admin` and `metrics`
//! expose what happens.

mod admin;
pub mod balance;
pub mod config;
mod connect;
mod forward;
pub mod gateway;
mod h2_server;
mod h2_upstream;
mod listener;
pub mod metrics;
mod middleware;
pub mod normalize;
mod pool;
pub mod route;
mod session;
mod worker;

pub use worker::{start, RunningProxy};
