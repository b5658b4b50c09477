//! `sluice proxy`: the sidecar proxy. This crate holds its configuration so
//! far: the YAML schema, `${VAR}` substitution from the environment and
//! validation whose every error names the file, line and key.

pub mod config;
