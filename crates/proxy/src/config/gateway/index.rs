//! The objects of a Gateway API source, by kind: the Gateways of this
//! proxy's class, the HTTPRoutes in precedence order, and what they
//! refer to (Services and their EndpointSlices, Secrets, Namespaces,
//! ReferenceGrants). Kinds the proxy does not act on are counted.

use std::collections::{BTreeMap, HashMap};

use super::{
    documents::Doc,
    objects::{EndpointSlice, ReferenceGrantSpec, SecretData, ServiceSpec, WithSpec},
    GatewayApiSettings,
};

pub(super) const GROUP: &str = "gateway.networking.k8s.io";

/// The objects read, by kind.
#[derive(Debug, Default)]
pub(super) struct Index<'d> {
    pub gateways: Vec<&'d Doc>,
    /// In precedence order: creation time (else the files' order), then name.
    pub routes: Vec<&'d Doc>,
    pub services: HashMap<String, ServiceSpec>,
    /// By `NAMESPACE/SERVICE`.
    pub slices: HashMap<String, Vec<EndpointSlice>>,
    pub secrets: HashMap<String, SecretData>,
    pub namespaces: HashMap<String, BTreeMap<String, String>>,
    /// Each grant with its namespace.
    pub grants: Vec<(String, ReferenceGrantSpec)>,
    pub ignored: BTreeMap<String, usize>,
}

impl<'d> Index<'d> {
    pub(super) fn new(docs: &'d [Doc], settings: &GatewayApiSettings) -> Self {
        let mut index = Self::default();
        for doc in docs {
            let group = doc.head.api_version.split('/').next().unwrap_or_default();
            let group = if doc.head.api_version.contains('/') {
                group
            } else {
                ""
            };
            let mut ignore = || *index.ignored.entry(doc.head.kind.clone()).or_default() += 1;
            match (group, doc.head.kind.as_str()) {
                (GROUP, "Gateway") => {
                    let class = doc.typed::<WithSpec<ClassOnly>>().ok();
                    let ours = match (&settings.class, class) {
                        (Some(wanted), Some(spec)) => spec.spec.gateway_class_name == *wanted,
                        _ => true,
                    };
                    match ours {
                        true => index.gateways.push(doc),
                        false => ignore(),
                    }
                }
                (GROUP, "HTTPRoute") => index.routes.push(doc),
                (GROUP, "ReferenceGrant") => match doc.typed::<WithSpec<ReferenceGrantSpec>>() {
                    Ok(grant) => index.grants.push((doc.namespace().into(), grant.spec)),
                    Err(_) => ignore(),
                },
                (GROUP, "GatewayClass") => {}
                ("", "Service") => {
                    let spec = doc.typed::<WithSpec<ServiceSpec>>().map(|s| s.spec);
                    index.services.insert(doc.key(), spec.unwrap_or_default());
                }
                ("discovery.k8s.io", "EndpointSlice") => {
                    let service = doc.head.metadata.labels.get("kubernetes.io/service-name");
                    match (service, doc.typed::<EndpointSlice>()) {
                        (Some(service), Ok(slice)) => {
                            let key = format!("{}/{service}", doc.namespace());
                            index.slices.entry(key).or_default().push(slice);
                        }
                        _ => ignore(),
                    }
                }
                ("", "Secret") => {
                    let data = doc.typed::<SecretData>().unwrap_or_default();
                    index.secrets.insert(doc.key(), data);
                }
                ("", "Namespace") => {
                    let labels = doc.head.metadata.labels.clone();
                    index
                        .namespaces
                        .insert(doc.head.metadata.name.clone(), labels);
                }
                _ => ignore(),
            }
        }
        index.routes.sort_by_key(|doc| {
            let created = doc
                .head
                .metadata
                .creation_timestamp
                .clone()
                .unwrap_or_default();
            (created, doc.order, doc.key())
        });
        index
    }

    /// The labels of namespace `name`: its own, with `kubernetes.io/metadata.name`.
    pub(super) fn namespace_labels(&self, name: &str) -> BTreeMap<String, String> {
        let mut labels = self.namespaces.get(name).cloned().unwrap_or_default();
        labels.insert("kubernetes.io/metadata.name".into(), name.into());
        labels
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClassOnly {
    gateway_class_name: String,
}
