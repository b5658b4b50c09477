//! A listener's HTTP/3 settings (`listeners[].h3`, used when `protocols`
//! names `h3`): the QUIC transport's limits and address validation.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::units::{duration, human, optional_size, size, ByteSize};

/// HTTP/3 limits for one listener's QUIC endpoint.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct H3Settings {
    /// Request streams a client may have open at once (QUIC
    /// `initial_max_streams_bidi`); more wait for credit.
    pub max_concurrent_streams: u32,
    /// A connection with no packet for this long is closed (QUIC
    /// `max_idle_timeout`).
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub idle_timeout: Duration,
    /// Decoded field section (header list) size; past it the request gets
    /// 431 (SETTINGS_MAX_FIELD_SECTION_SIZE). Default: `limits.max_header_bytes`.
    #[serde(deserialize_with = "optional_size")]
    #[schemars(with = "Option<ByteSize>")]
    pub max_field_section_size: Option<u64>,
    /// Flow-control window per stream: what a client may send ahead.
    #[serde(deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub stream_window: u64,
    /// Flow-control window per connection.
    #[serde(deserialize_with = "size")]
    #[schemars(with = "ByteSize")]
    pub connection_window: u64,
    /// When a new connection's source address is validated by a Retry
    /// packet (RFC 9000 8.1.2) before any handshake state is kept.
    pub retry: RetryMode,
}

impl Default for H3Settings {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 100,
            idle_timeout: Duration::from_secs(30),
            max_field_section_size: None,
            stream_window: 256 * 1024,
            connection_window: 1024 * 1024,
            retry: RetryMode::Auto,
        }
    }
}

/// Address validation by Retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetryMode {
    /// Only while many handshakes are in progress (a flood): one round
    /// trip more for new clients then, none otherwise.
    Auto,
    /// Every new connection: a spoofed source never costs handshake state.
    Always,
    /// Never: no extra round trip; the amplification limit (3x) still holds.
    Never,
}

/// Handshakes in progress past which `retry: auto` sends Retry packets.
pub const RETRY_AUTO_ABOVE: usize = 64;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::Path;

    fn parse(listener: &str) -> Result<crate::config::Config, String> {
        let yaml = format!(
            "listeners:\n  - address: 127.0.0.1:8443\n{listener}upstreams:\n  u: {{ hosts: [\"http://127.0.0.1:1\"] }}\nroutes:\n  - {{ path: /, upstream: u }}\n"
        );
        crate::config::parse(&yaml, Path::new("sluice.yaml"), |_| None).map_err(|e| e.to_string())
    }

    #[test]
    fn h3_without_tls_is_refused_naming_file_line_and_key() {
        let err = parse("    protocols: [http1, h3]\n").unwrap_err();
        assert!(
            err.starts_with("sluice.yaml:2:")
                && err.contains("listeners[0].protocols: h3 needs `tls`"),
            "{err}"
        );
    }

    #[test]
    fn h3_alone_is_refused_and_the_defaults_hold() {
        let tls = "    tls: { cert: c.pem, key: k.pem }\n";
        let err = parse(&format!("    protocols: [h3]\n{tls}")).unwrap_err();
        assert!(err.contains("h3 is served beside http1 or h2"), "{err}");
        let config = parse(&format!("    protocols: [h2, http1, h3]\n{tls}")).unwrap();
        let h3 = &config.listeners[0].h3;
        assert_eq!(*h3, super::H3Settings::default());
        assert_eq!(h3.max_concurrent_streams, 100);
        assert_eq!(h3.retry, super::RetryMode::Auto);
        let config = parse(&format!(
            "    protocols: [h2, h3]\n{tls}    h3: {{ retry: always, idle_timeout: 5s, max_field_section_size: 8KiB }}\n"
        ))
        .unwrap();
        let h3 = &config.listeners[0].h3;
        assert_eq!(h3.retry, super::RetryMode::Always);
        assert_eq!(h3.idle_timeout, std::time::Duration::from_secs(5));
        assert_eq!(h3.max_field_section_size, Some(8192));
        let err = parse(&format!(
            "    protocols: [h2, h3]\n{tls}    h3: {{ retry: sometimes }}\n"
        ))
        .unwrap_err();
        assert!(err.contains("listeners[0].h3.retry"), "{err}");
    }
}
