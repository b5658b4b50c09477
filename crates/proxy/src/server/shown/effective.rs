//! `/config`'s document: the configuration serialised by its own types
//! (config/), so that it shows every key with its effective value, the
//! defaults filled in, and no credential ([`crate::config::Secret`]s
//! serialise as `(redacted sha256:…)`). [`super::redact`] then hides what
//! is not a credential by type: `${VAR}` values, URL user information,
//! header values (server/reload.rs applies it to every `/config`).

use crate::config::Config;

/// The configuration after `${VAR}` substitution and defaults.
pub(crate) fn effective(config: &Config) -> serde_json::Value {
    // Serialising plain data to a `Value` fails only on a map whose keys
    // are not strings or numbers, which the configuration has none of.
    serde_json::to_value(config)
        .unwrap_or_else(|err| serde_json::json!({ "error": format!("cannot show: {err}") }))
}

/// What `/config` shows of `config`, without its `reload` status:
/// [`effective`] with [`super::redact`] applied, as server/reload.rs
/// serves it.
pub fn shown(config: &Config) -> serde_json::Value {
    let mut document = effective(config);
    super::redact(&mut document, &config.substituted.0);
    document
}
