//! Kubernetes Gateway API objects as a configuration source
//! (`gateway_api:`, docs/GATEWAY-API.md): `Gateway`s become listeners,
//! each with a route table of its own; `HTTPRoute` rules become routes in
//! the tables of the listeners they attach to; the `Service`s they name,
//! with their `EndpointSlice`s, become upstreams; TLS `Secret`s become
//! the listeners' certificates. What a controller would write in each
//! object's status (Accepted, ResolvedRefs and their reasons) is kept in
//! a [`Report`] that `sluice proxy --check` prints.
//!
//! This is what a controller watching the Kubernetes API would do on
//! each change; here it is done when the file is read (and on every
//! reload), from the same objects as files.

mod attach;
mod backends;
mod documents;
mod index;
mod objects;
mod report;
mod rules;
mod values;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::Deserialize;

pub use report::{Condition, GatewayReport, ListenerReport, ParentReport, Report, RouteReport};

use super::{
    error::ConfigError, schema::ListenerSettings, schema::UpstreamSettings, ChainRef, RouteSettings,
};
use serde_saphyr::Spanned;

/// The `gateway_api` section.
#[derive(Debug, Clone, Deserialize)]
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

/// What the objects make: listeners, upstreams and routes to add to the
/// configuration's own, and their statuses.
#[derive(Debug, Default)]
pub(crate) struct Translated {
    pub listeners: Vec<ListenerSettings>,
    pub upstreams: BTreeMap<String, UpstreamSettings>,
    pub routes: Vec<RouteSettings>,
    pub report: Report,
}

/// Reads and translates the objects of `settings`; `file` is the
/// configuration's own (the paths are relative to its directory);
/// `first_table`: the first route table the Gateways may take.
pub(crate) fn load(
    settings: &GatewayApiSettings,
    file: &Path,
    first_table: usize,
) -> Result<Translated, ConfigError> {
    let base = file.parent().map_or_else(PathBuf::new, Path::to_path_buf);
    let docs = documents::read(&settings.files, &base)?;
    let index = attach::Index::new(&docs, settings);
    let secrets = secrets_dir(settings, &base);
    let mut translated = Translated::default();
    let sockets = attach::gateways(&index, settings, &secrets, first_table, &mut translated);
    attach::routes(&index, settings, &sockets, &mut translated);
    translated.report.ignored = index.ignored;
    Ok(translated)
}

/// Where the Secrets' files go.
fn secrets_dir(settings: &GatewayApiSettings, base: &Path) -> PathBuf {
    match &settings.secrets_dir {
        Some(dir) => base.join(dir),
        None => std::env::temp_dir().join(format!("sluice-gateway-secrets-{}", std::process::id())),
    }
}
