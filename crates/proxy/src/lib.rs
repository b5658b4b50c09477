//! `sluice proxy`: the sidecar proxy. So far this crate holds the pieces
//! that need no I/O: the configuration (YAML schema, `${VAR}` substitution,
//! errors naming the file, line and key), the route table and the upstream
//! balancer with passive health. The HTTP engine, pools, admin listener and
//! the `sluice proxy` command arrive with the rest of issue 4.

pub mod balance;
pub mod config;
pub mod route;
