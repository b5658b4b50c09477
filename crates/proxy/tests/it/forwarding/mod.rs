//! The proxy over real loopback sockets: routing, header rewriting,
//! streaming, pipelining, upstream failures, smuggling and the admin API.
//!
//! One module per group.

mod hostile_requests;
mod routing;
mod streaming;
mod upstream_failures;
