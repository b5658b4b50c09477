//! References from routes and Gateways to other objects: a backendRef to
//! a `Service` (its `EndpointSlice`s' ready addresses, or its cluster IP,
//! become an upstream's hosts), a certificateRef to a TLS `Secret`
//! (written where the listener reads it), `ReferenceGrant`s for either
//! across namespaces, and label selectors.

use std::{
    collections::BTreeMap,
    io::Write as _,
    path::{Path, PathBuf},
};

use base64::Engine as _;

use super::{
    attach::{Index, GROUP},
    documents::Doc,
    objects::{LabelSelector, Listener, ServiceSpec},
    Condition,
};
use crate::config::schema::UpstreamSettings;

/// What a backendRef comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Resolved {
    /// The upstream of that name (a Service's port).
    Upstream(String),
    /// Answered with this status: 500 for a reference that does not
    /// resolve, 503 for a Service without endpoints.
    Status(u16),
}

/// One route's references: the upstreams they make, and the first
/// failure (its ResolvedRefs condition).
#[derive(Debug)]
pub(super) struct Backends<'a> {
    index: &'a Index<'a>,
    upstreams: &'a mut BTreeMap<String, UpstreamSettings>,
    failure: Option<Condition>,
}

impl<'a> Backends<'a> {
    pub(super) fn new(
        index: &'a Index<'a>,
        upstreams: &'a mut BTreeMap<String, UpstreamSettings>,
    ) -> Self {
        Self {
            index,
            upstreams,
            failure: None,
        }
    }

    /// The route's ResolvedRefs.
    pub(super) fn condition(&self) -> Condition {
        self.failure
            .clone()
            .unwrap_or_else(|| Condition::ok("ResolvedRefs"))
    }

    /// A backendRef (`group`, `kind`, `name`, `namespace`, `port`) of a
    /// route in `namespace`.
    pub(super) fn resolve(
        &mut self,
        namespace: &str,
        (group, kind, name, target, port): (
            Option<&str>,
            Option<&str>,
            &str,
            Option<&str>,
            Option<u16>,
        ),
    ) -> Resolved {
        match self.lookup(namespace, (group, kind, name, target, port)) {
            Ok(resolved) => resolved,
            Err((reason, message)) => {
                self.failure
                    .get_or_insert_with(|| Condition::failed(reason, message));
                Resolved::Status(500)
            }
        }
    }

    fn lookup(
        &mut self,
        namespace: &str,
        (group, kind, name, target, port): (
            Option<&str>,
            Option<&str>,
            &str,
            Option<&str>,
            Option<u16>,
        ),
    ) -> Result<Resolved, (&'static str, String)> {
        let kind = kind.unwrap_or("Service");
        if group.is_some_and(|g| !g.is_empty()) || kind != "Service" {
            let group = group.unwrap_or_default();
            return Err((
                "InvalidKind",
                format!("a backendRef to {group}/{kind} {name}: only core Services are backends"),
            ));
        }
        let target = target.unwrap_or(namespace);
        if target != namespace
            && !self
                .index
                .granted(("HTTPRoute", namespace), ("Service", target, name))
        {
            return Err(("RefNotPermitted", format!("Service {target}/{name} is in another namespace and no ReferenceGrant there allows it")));
        }
        let key = format!("{target}/{name}");
        let Some(service) = self.index.services.get(&key) else {
            return Err(("BackendNotFound", format!("no Service {key}")));
        };
        let Some(port) = port else {
            return Err((
                "BackendNotFound",
                format!("a backendRef to Service {key} needs a port"),
            ));
        };
        let Some(service_port) = service.ports.iter().find(|p| p.port == port) else {
            return Err((
                "BackendNotFound",
                format!("Service {key} has no port {port}"),
            ));
        };
        let upstream = format!("{key}:{port}");
        if self.upstreams.contains_key(&upstream) {
            return Ok(Resolved::Upstream(upstream));
        }
        let (hosts, protocol) = endpoints(self.index, &key, service, service_port)?;
        if hosts.is_empty() {
            return Ok(Resolved::Status(503));
        }
        let hosts: Vec<String> = hosts.iter().map(|h| format!("{h:?}")).collect();
        let yaml = format!("{{ hosts: [{}], protocol: {protocol} }}", hosts.join(", "));
        let settings = serde_saphyr::from_str(&yaml)
            .map_err(|err| ("BackendNotFound", format!("Service {key}: {err}")))?;
        self.upstreams.insert(upstream.clone(), settings);
        Ok(Resolved::Upstream(upstream))
    }
}

/// The hosts of a Service's port (`http://ADDRESS:PORT`) and the
/// protocol it speaks: the ready endpoints of its EndpointSlices, else
/// its cluster IP, else its external name.
fn endpoints(
    index: &Index<'_>,
    key: &str,
    service: &ServiceSpec,
    port: &super::objects::ServicePort,
) -> Result<(Vec<String>, &'static str), (&'static str, String)> {
    let mut app_protocol = port.app_protocol.clone();
    let mut hosts = Vec::new();
    let url = |address: &str, port: u16| match address.contains(':') {
        true => format!("http://[{address}]:{port}"),
        false => format!("http://{address}:{port}"),
    };
    let slices = index.slices.get(key).map(Vec::as_slice).unwrap_or_default();
    for slice in slices {
        let named = |p: &super::objects::EndpointPort| {
            p.name.as_deref().unwrap_or_default() == port.name.as_deref().unwrap_or_default()
        };
        let Some(slice_port) = slice.ports.iter().find(|p| named(p)) else {
            continue;
        };
        let Some(number) = slice_port.port else {
            continue;
        };
        app_protocol = app_protocol.or(slice_port.app_protocol.clone());
        for endpoint in &slice.endpoints {
            if endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            hosts.extend(endpoint.addresses.iter().map(|a| url(a, number)));
        }
    }
    if slices.is_empty() {
        match (&service.cluster_ip, &service.external_name) {
            (Some(ip), _) if !ip.is_empty() && ip != "None" => hosts.push(url(ip, port.port)),
            (_, Some(name)) if service.kind.as_deref() == Some("ExternalName") => {
                hosts.push(url(name, port.port));
            }
            _ => {}
        }
    }
    let protocol = match app_protocol.as_deref() {
        None | Some("http" | "kubernetes.io/ws") => "http1",
        Some("kubernetes.io/h2c") => "h2c",
        Some(other) => {
            return Err(("UnsupportedProtocol", format!("Service {key} port {}: appProtocol `{other}` (http, kubernetes.io/h2c and kubernetes.io/ws are served)", port.port)));
        }
    };
    Ok((hosts, protocol))
}

impl Index<'_> {
    /// Whether a ReferenceGrant in namespace `to.1` lets a `from.0` in
    /// namespace `from.1` refer to the `to.0` named `to.2` there.
    pub(super) fn granted(&self, from: (&str, &str), to: (&str, &str, &str)) -> bool {
        self.grants
            .iter()
            .filter(|(namespace, _)| namespace == to.1)
            .any(|(_, grant)| {
                let from_ok = grant
                    .from
                    .iter()
                    .any(|f| f.group == GROUP && f.kind == from.0 && f.namespace == from.1);
                let to_ok = grant.to.iter().any(|t| {
                    t.group.is_empty()
                        && t.kind == to.0
                        && t.name.as_deref().is_none_or(|n| n == to.2)
                });
                from_ok && to_ok
            })
    }
}

/// Whether `labels` satisfy `selector` (matchLabels and matchExpressions:
/// In, NotIn, Exists, DoesNotExist).
pub(super) fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labelled = selector
        .match_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v));
    labelled
        && selector.match_expressions.iter().all(|e| {
            let value = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| e.values.contains(v)),
                "NotIn" => value.is_none_or(|v| !e.values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

/// The certificate and key files of an HTTPS listener, from its first
/// certificateRef (a `kubernetes.io/tls` Secret), written under
/// `dir`; or the listener's ResolvedRefs reason and message.
pub(super) fn certificate(
    index: &Index<'_>,
    gateway: &Doc,
    listener: &Listener,
    dir: &Path,
) -> Result<(String, String), (&'static str, String)> {
    let tls = listener.tls.as_ref();
    if tls
        .and_then(|t| t.mode.as_deref())
        .is_some_and(|m| m != "Terminate")
    {
        return Err((
            "InvalidCertificateRef",
            "only tls.mode Terminate is served".into(),
        ));
    }
    let Some(reference) = tls.and_then(|t| t.certificate_refs.first()) else {
        return Err((
            "InvalidCertificateRef",
            "an HTTPS listener needs tls.certificateRefs".into(),
        ));
    };
    let kind_ok = reference.kind.as_deref().is_none_or(|k| k == "Secret")
        && reference.group.as_deref().is_none_or(str::is_empty);
    if !kind_ok {
        return Err((
            "InvalidCertificateRef",
            format!("certificateRef {} is not a Secret", reference.name),
        ));
    }
    let namespace = reference
        .namespace
        .as_deref()
        .unwrap_or(gateway.namespace());
    let name = &reference.name;
    if namespace != gateway.namespace()
        && !index.granted(
            ("Gateway", gateway.namespace()),
            ("Secret", namespace, name),
        )
    {
        return Err(("RefNotPermitted", format!("Secret {namespace}/{name} is in another namespace and no ReferenceGrant there allows it")));
    }
    let key = format!("{namespace}/{name}");
    let Some(secret) = index.secrets.get(&key) else {
        return Err(("InvalidCertificateRef", format!("no Secret {key}")));
    };
    let field = |name: &str| -> Option<Vec<u8>> {
        if let Some(text) = secret.string_data.get(name) {
            return Some(text.clone().into_bytes());
        }
        let encoded: String = secret.data.get(name)?.split_whitespace().collect();
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
    };
    let (Some(cert), Some(key_pem)) = (field("tls.crt"), field("tls.key")) else {
        return Err((
            "InvalidCertificateRef",
            format!("Secret {key} has no tls.crt and tls.key"),
        ));
    };
    let written =
        write_private(dir, &format!("{namespace}_{name}"), &cert, &key_pem).map_err(|err| {
            (
                "InvalidCertificateRef",
                format!(
                    "cannot write Secret {key}'s files under {}: {err}",
                    dir.display()
                ),
            )
        })?;
    Ok(written)
}

/// Writes `cert` and `key` as `STEM.crt` and `STEM.key` in `dir` (made
/// owner-only), each replaced whole; their paths.
fn write_private(
    dir: &Path,
    stem: &str,
    cert: &[u8],
    key: &[u8],
) -> std::io::Result<(String, String)> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let stem: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut paths = Vec::new();
    for (extension, bytes) in [("crt", cert), ("key", key)] {
        let path: PathBuf = dir.join(format!("{stem}.{extension}"));
        if std::fs::read(&path).is_ok_and(|old| old == bytes) {
            paths.push(path.display().to_string());
            continue;
        }
        let partial = dir.join(format!(".{stem}.{extension}.{}", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&partial)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&partial, &path)?;
        paths.push(path.display().to_string());
    }
    Ok((paths[0].clone(), paths[1].clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_read_labels_and_expressions() {
        let labels: BTreeMap<String, String> =
            [("gateway-conformance".to_string(), "backend".to_string())].into();
        let yaml = |s: &str| serde_saphyr::from_str::<LabelSelector>(s).unwrap();
        assert!(selects(
            &yaml("{ matchLabels: { gateway-conformance: backend } }"),
            &labels
        ));
        assert!(!selects(
            &yaml("{ matchLabels: { gateway-conformance: infra } }"),
            &labels
        ));
        assert!(selects(&yaml("{ matchExpressions: [{ key: gateway-conformance, operator: In, values: [backend, x] }] }"), &labels));
        assert!(selects(
            &yaml("{ matchExpressions: [{ key: other, operator: DoesNotExist }] }"),
            &labels
        ));
        assert!(!selects(
            &yaml("{ matchExpressions: [{ key: other, operator: Exists }] }"),
            &labels
        ));
    }

    #[test]
    fn secrets_are_written_for_their_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("sluice-secret-test-{}", std::process::id()));
        let (cert, key) = write_private(&dir, "ns_../../x", b"CERT", b"KEY").unwrap();
        assert_eq!(Path::new(&cert).parent(), Some(dir.as_path()), "{cert}");
        assert_eq!(std::fs::read(&key).unwrap(), b"KEY");
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
