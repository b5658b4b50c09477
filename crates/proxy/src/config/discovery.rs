//! `discovery:`, how upstream host names are resolved again.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::units::{duration, human};

/// Re-resolving upstream host names (docs/CONFIG.md, "Discovery"): each
/// name again when its DNS answer's TTL runs out, but not sooner than
/// `min_interval` nor later than `max_interval`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DiscoverySettings {
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub min_interval: Duration,
    #[serde(deserialize_with = "duration", serialize_with = "human")]
    pub max_interval: Duration,
    /// Names listed here answer before DNS; read again at each resolution.
    pub hosts_file: String,
    /// The name servers, search domains and options (`timeout`,
    /// `attempts`, `ndots`); read when the resolver is made. Without a
    /// name server (or without the file) names resolve from `hosts_file` only.
    pub resolv_conf: String,
}

impl Default for DiscoverySettings {
    fn default() -> Self {
        Self {
            min_interval: Duration::from_secs(5),
            max_interval: Duration::from_secs(60),
            hosts_file: "/etc/hosts".into(),
            resolv_conf: "/etc/resolv.conf".into(),
        }
    }
}
