//! A listener's HTTP/3 settings (`listeners[].h3`, used when `protocols`
//! names `h3`): the QUIC transport's limits and address validation.

use std::time::Duration;

use serde::Deserialize;

use super::schema::{duration, optional_size, size};

/// HTTP/3 limits for one listener's QUIC endpoint.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct H3Settings {
    /// Request streams a client may have open at once (QUIC
    /// `initial_max_streams_bidi`); more wait for credit.
    pub max_concurrent_streams: u32,
    /// A connection with no packet for this long is closed (QUIC
    /// `max_idle_timeout`).
    #[serde(deserialize_with = "duration")]
    pub idle_timeout: Duration,
    /// Decoded field section (header list) size; past it the request gets
    /// 431 (SETTINGS_MAX_FIELD_SECTION_SIZE). Default: `limits.max_header_bytes`.
    #[serde(deserialize_with = "optional_size")]
    pub max_field_section_size: Option<u64>,
    /// Flow-control window per stream: what a client may send ahead.
    #[serde(deserialize_with = "size")]
    pub stream_window: u64,
    /// Flow-control window per connection.
    #[serde(deserialize_with = "size")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
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
