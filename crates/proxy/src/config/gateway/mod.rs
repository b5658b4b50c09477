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
mod rules;
mod values;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

pub use super::gateway_api::GatewayApiSettings;
pub use super::gateway_report::{
    Condition, GatewayReport, ListenerReport, ParentReport, Report, RouteReport,
};

use super::{
    error::ConfigError, schema::ListenerSettings, schema::UpstreamSettings, RouteSettings,
};

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
/// `first_table`: the first route table the Gateways may take; `taken`:
/// the addresses the file's own listeners bind.
pub(crate) fn load(
    settings: &GatewayApiSettings,
    file: &Path,
    first_table: usize,
    taken: &[String],
) -> Result<Translated, ConfigError> {
    let base = file.parent().map_or_else(PathBuf::new, Path::to_path_buf);
    let docs = documents::read(&settings.files, &base)?;
    let secrets = secrets_dir(settings, &base);
    Ok(translate(&docs, settings, &secrets, first_table, taken))
}

/// The objects of `docs` as listeners (route tables from `first_table`,
/// none on an address of `taken`), upstreams and routes, with their
/// statuses.
fn translate(
    docs: &[documents::Doc],
    settings: &GatewayApiSettings,
    secrets: &Path,
    first_table: usize,
    taken: &[String],
) -> Translated {
    let index = attach::Index::new(docs, settings);
    let mut translated = Translated::default();
    let mut taken = taken.iter().cloned().collect();
    let sockets = attach::gateways(
        &index,
        settings,
        (secrets, &mut taken),
        first_table,
        &mut translated,
    );
    attach::routes(&index, settings, &sockets, &mut translated);
    translated.report.ignored = index.ignored;
    translated
}

/// For the fuzz target (`proxy::fuzzing::gateway_objects`): the objects
/// of `text` translated and added to a configuration with one listener,
/// which must then pass the configuration's own checks: whatever the
/// objects say, the routes, upstreams and listeners made of them are
/// valid (what is not is in the report, not in the configuration).
pub fn fuzzing(text: &str) -> Result<(), String> {
    let file = Path::new("fuzz.yaml");
    let mut docs = Vec::new();
    if documents::parse_into(text, file, &mut docs).is_err() {
        return Ok(());
    }
    let settings = GatewayApiSettings {
        files: Vec::new(),
        address: "127.0.0.1".into(),
        ports: BTreeMap::new(),
        class: None,
        chain: None,
        secrets_dir: None,
    };
    let secrets = std::env::temp_dir().join("sluice-fuzz-secrets");
    let translated = translate(&docs, &settings, &secrets, 1, &[]);
    let mut config = super::parse("listeners: [{ address: 127.0.0.1:0 }]", file, |_| None)
        .map_err(|err| err.to_string())?;
    config.upstreams.extend(translated.upstreams);
    config.listeners.extend(translated.listeners);
    config.routes.extend(translated.routes);
    super::validate::check(&config).map_err(|(_, key, message)| format!("{key}: {message}"))
}

/// Where the Secrets' files go.
fn secrets_dir(settings: &GatewayApiSettings, base: &Path) -> PathBuf {
    match &settings.secrets_dir {
        Some(dir) => base.join(dir),
        None => std::env::temp_dir().join(format!("sluice-gateway-secrets-{}", std::process::id())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(name: &str, port: u16) -> String {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n\
             metadata: {{ name: {name}, namespace: default }}\n\
             spec:\n  gatewayClassName: sluice\n  listeners:\n  \
             - {{ name: http, port: {port}, protocol: HTTP }}\n"
        )
    }

    fn translated(text: &str, taken: &[String]) -> Translated {
        let mut docs = Vec::new();
        documents::parse_into(text, Path::new("objects.yaml"), &mut docs).expect("objects");
        let settings: GatewayApiSettings =
            serde_saphyr::from_str("{ files: [], address: 127.0.0.1 }").expect("settings");
        translate(&docs, &settings, &std::env::temp_dir(), 1, taken)
    }

    #[test]
    fn a_port_bound_already_is_reported_not_bound_twice() {
        let text = [
            gateway("first", 8080),
            gateway("second", 8080),
            gateway("third", 8081),
        ];
        let out = translated(&text.join("---\n"), &["127.0.0.1:8081".into()]);
        let bound: Vec<_> = out
            .listeners
            .iter()
            .map(|l| l.address.value.as_str())
            .collect();
        assert_eq!(bound, ["127.0.0.1:8080"]);
        let reasons: Vec<_> = out
            .report
            .gateways
            .iter()
            .map(|g| g.listeners[0].accepted.reason)
            .collect();
        assert_eq!(reasons, ["Accepted", "PortUnavailable", "PortUnavailable"]);
        let second = &out.report.gateways[1].listeners[0];
        assert!(second.bound.is_none() && second.accepted.message.contains("127.0.0.1:8080"));
    }

    #[test]
    fn port_zero_never_conflicts() {
        let text = [gateway("first", 8080), gateway("second", 8080)].join("---\n");
        let mut docs = Vec::new();
        documents::parse_into(&text, Path::new("objects.yaml"), &mut docs).expect("objects");
        let settings: GatewayApiSettings =
            serde_saphyr::from_str("{ files: [], address: 127.0.0.1, ports: { 8080: 0 } }")
                .expect("settings");
        let out = translate(&docs, &settings, &std::env::temp_dir(), 1, &[]);
        assert_eq!(out.listeners.len(), 2);
    }
}
