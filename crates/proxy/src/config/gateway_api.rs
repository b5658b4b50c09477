//! The `gateway_api` section's settings, apart from the translation in
//! `gateway/` (which builds a configuration from the objects and checks
//! it), so that the configuration's types hold them without importing
//! what imports them.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

use super::middleware::ChainRef;

/// The `gateway_api` section.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GatewayApiSettings {
    /// Files, or directories of `.yaml`/`.yml` files, of Gateway API
    /// objects (relative to this file's directory).
    pub files: Vec<String>,
    /// The address Gateway listeners bind, with their ports.
    #[serde(default = "any_address")]
    pub address: String,
    /// A listener port bound as another (80 as 8080 without privileges;
    /// 0: any free port, for tests).
    #[serde(default)]
    pub ports: BTreeMap<u16, u16>,
    /// The `gatewayClassName` this proxy serves; absent: every Gateway.
    #[serde(default)]
    pub class: Option<String>,
    /// The middleware chain of every route from the files.
    #[serde(default)]
    #[schemars(with = "Option<ChainRef>")]
    pub chain: Option<Spanned<ChainRef>>,
    /// Where the TLS Secrets' certificates and keys are written (owner
    /// only), for the listeners to read; default: a directory of the
    /// process's own under the system's temporary directory.
    #[serde(default)]
    pub secrets_dir: Option<String>,
}

fn any_address() -> String {
    "0.0.0.0".into()
}
