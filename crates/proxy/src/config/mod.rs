//! The proxy's YAML configuration. The types here are the one schema:
//! they read the file, serialise as `/config` (every default shown,
//! every [`Secret`] redacted) and generate its JSON Schema
//! ([`json_schema`], `sluice proxy --schema`). docs/CONFIG.md documents
//! every key of that schema (crates/proxy/tests/it/config_doc.rs checks
//! it, both ways).
//!
//! Loading is three steps, each failing with a [`ConfigError`] that names
//! the file, line, column and key: `${VAR}` substitution, parsing into the
//! schema (unknown keys rejected with a did-you-mean), then the checks that
//! need more than one key (a route's upstream exists, addresses parse).

mod admin;
mod auth;
mod balance;
mod compress;
mod discovery;
mod env;
mod error;
pub mod gateway;
mod gateway_api;
mod gateway_report;
mod grpc_web;
mod handlers;
mod json_schema;
mod listener_h3;
mod listener_tls;
mod middleware;
mod paths;
mod proxy_protocol;
mod route_patterns;
mod routes;
mod schema;
mod secret;
mod traces;
mod typed;
mod units;
mod validate;

use std::path::Path;

pub use admin::*;
pub use auth::*;
pub use balance::*;
pub use compress::*;
pub use discovery::DiscoverySettings;
pub use env::FromEnv;
pub use error::ConfigError;
pub use gateway::GatewayApiSettings;
pub use grpc_web::GrpcWebSettings;
pub use handlers::*;
pub use json_schema::{every_key_required, json_schema};
pub use listener_h3::{H3Settings, RetryMode, RETRY_AUTO_ABOVE};
pub use listener_tls::{AcmeChallenge, AcmeSettings, ListenerTlsSettings};
pub use middleware::*;
pub use paths::*;
pub use proxy_protocol::*;
pub use route_patterns::{literal_start, Pattern};
pub use routes::*;
pub use schema::*;
pub use secret::{redacted_marker, secret_name, userinfo_range, CredentialUrl, Secret};
pub use traces::*;
pub use typed::*;

/// Reads, substitutes, parses and validates `path`.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|err| ConfigError {
        file: path.to_path_buf(),
        line: 0,
        column: 0,
        key: String::new(),
        message: format!("cannot read the file: {err}"),
    })?;
    parse(&text, path, |name| std::env::var(name).ok())
}

/// The same from text, with `lookup` standing in for the environment.
pub fn parse(
    text: &str,
    file: &Path,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let at = |line: usize, column: usize, key: String, message: String| ConfigError {
        file: file.to_path_buf(),
        line,
        column,
        key: one_line(key),
        message: one_line(message),
    };
    let (text, substituted) = env::substitute(text, &lookup)
        .map_err(|err| at(err.line, err.column, String::new(), err.message))?;
    // An error quoting a value never shows one the environment gave, in
    // its message or in its key (a malformed mapping such as
    // `{ token:x "${SECRET}" }` puts the value in the key's path).
    let at = |line: usize, column: usize, key: String, message: String| {
        at(
            line,
            column,
            scrub(key, &substituted),
            scrub(message, &substituted),
        )
    };
    let mut key = String::new();
    let mut config: Config = serde_saphyr::with_deserializer_from_str(&text, |de| {
        serde_path_to_error::deserialize(de).map_err(|err| {
            key = err.path().to_string();
            err.into_inner()
        })
    })
    .map_err(|err| {
        let (line, column) = err
            .location()
            .map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
        // The message alone: the location is ours to write, and no snippet.
        let text = serde_saphyr::MessageFormatter::format_message(
            &serde_saphyr::DefaultMessageFormatter,
            &err,
        );
        let message = text.lines().next().unwrap_or_default();
        at(
            line,
            column,
            clean_key(&key),
            error::with_suggestion(message),
        )
    })?;
    if let Some(settings) = config.gateway_api.clone() {
        let taken: Vec<String> = config
            .listeners
            .iter()
            .map(|l| l.address.value.clone())
            .collect();
        let translated = gateway::load(&settings, file, 1, &taken)?;
        for (name, upstream) in translated.upstreams {
            if config.upstreams.contains_key(&name) {
                return Err(at(
                    0,
                    0,
                    format!("upstreams.{name}"),
                    "a Gateway API Service has the same name".into(),
                ));
            }
            config.upstreams.insert(name, upstream);
        }
        config.listeners.extend(translated.listeners);
        config.routes.extend(translated.routes);
        config.gateway_report = Some(std::sync::Arc::new(translated.report));
    }
    let checked = validate::check(&config);
    let checked = checked.and_then(|()| config.admin.as_mut().map_or(Ok(()), admin::check));
    checked.map_err(|(location, key, message)| {
        at(
            location.line() as usize,
            location.column() as usize,
            key,
            message,
        )
    })?;
    if let Some(traces) = &config.traces {
        // The SDK's variables are checked with the file: a bad one is a
        // bad configuration, not a surprise at the first export.
        traces
            .settings(&lookup)
            .map_err(|message| at(0, 0, "traces".into(), message))?;
    }
    config.substituted = Substituted(substituted);
    Ok(config)
}

/// The file as a JSON document after `${VAR}` substitution: what
/// [`json_schema`] describes (an editor sees the text before it).
pub fn document(
    text: &str,
    file: &Path,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<serde_json::Value, ConfigError> {
    let at = |line: usize, column: usize, message: String| ConfigError {
        file: file.to_path_buf(),
        line,
        column,
        key: String::new(),
        message: one_line(message),
    };
    let (text, substituted) =
        env::substitute(text, &lookup).map_err(|err| at(err.line, err.column, err.message))?;
    serde_saphyr::from_str(&text).map_err(|err| {
        let (line, column) = err
            .location()
            .map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
        let message = err.to_string();
        at(line, column, scrub(message, &substituted))
    })
}

/// `message` with every value of `substituted` (of 4 characters or more:
/// shorter ones are too common to replace) written as `(redacted)`.
fn scrub(mut message: String, substituted: &[FromEnv]) -> String {
    for value in substituted.iter().map(|s| &s.value) {
        if value.len() >= 4 {
            message = message.replace(value.as_str(), "(redacted)");
        }
    }
    message
}

/// `text` with its control characters escaped (`\r`, `\u{1b}`): a key
/// or a quoted value may hold a line break or a terminal escape, and an
/// error is one line of plain text.
fn one_line(text: String) -> String {
    if !text.chars().any(char::is_control) {
        return text;
    }
    text.chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

/// serde_path_to_error writes `.` for the document root.
fn clean_key(key: &str) -> String {
    if key == "." {
        String::new()
    } else {
        key.to_string()
    }
}

#[cfg(test)]
mod tests;
