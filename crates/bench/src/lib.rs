//! `sluice bench`: DESIGN.md's benchmark questions answered on loopback in
//! one command. Every component (backends, the proxy, the peers) runs in
//! its own process; the load generator runs in this one.

pub mod report;
pub mod results;
