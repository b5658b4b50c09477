//! The Kubernetes objects a Gateway API source reads, as far as the proxy
//! acts on them: `Gateway`, `HTTPRoute`, `Service`, `EndpointSlice`,
//! `Secret`, `Namespace`, `ReferenceGrant`. Every `spec` rejects the
//! fields it does not know, so that an unsupported one is named (file,
//! line, key) rather than ignored; `metadata` and `status` keep only
//! what is read.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_saphyr::Spanned;

/// What every object has.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Head {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: Metadata,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Metadata {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// RFC 3339 (`2024-01-02T03:04:05Z`): orders routes of equal precedence.
    #[serde(default)]
    pub creation_timestamp: Option<String>,
}

/// An object with its `spec` (and whatever else it carries, ignored).
#[derive(Debug, Clone, Deserialize)]
pub(super) struct WithSpec<S> {
    pub spec: S,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct GatewaySpec {
    /// Read by `attach` before the rest (a Gateway of another class is
    /// not this proxy's).
    #[serde(rename = "gatewayClassName")]
    pub _class: String,
    pub listeners: Vec<Spanned<Listener>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Listener {
    pub name: String,
    #[serde(default)]
    pub hostname: Option<String>,
    pub port: u16,
    pub protocol: String,
    #[serde(default)]
    pub tls: Option<ListenerTls>,
    #[serde(default)]
    pub allowed_routes: Option<AllowedRoutes>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ListenerTls {
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub certificate_refs: Vec<ObjectRef>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct AllowedRoutes {
    #[serde(default)]
    pub namespaces: Option<RouteNamespaces>,
    #[serde(default)]
    pub kinds: Option<Vec<GroupKind>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RouteNamespaces {
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<LabelExpression>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LabelExpression {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GroupKind {
    #[serde(default)]
    pub group: Option<String>,
    pub kind: String,
}

/// A reference to another object (a Secret, a Service, ...).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ObjectRef {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct HttpRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentRef>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<Spanned<Rule>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ParentRef {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(default)]
    pub section_name: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Rule {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub matches: Vec<Spanned<Match>>,
    #[serde(default)]
    pub filters: Vec<Spanned<Filter>>,
    #[serde(default)]
    pub backend_refs: Vec<Spanned<BackendRef>>,
    #[serde(default)]
    pub timeouts: Option<Timeouts>,
    #[serde(default)]
    pub retry: Option<Retry>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Match {
    #[serde(default)]
    pub path: Option<PathMatch>,
    #[serde(default)]
    pub headers: Vec<ValueMatch>,
    #[serde(default)]
    pub query_params: Vec<ValueMatch>,
    #[serde(default)]
    pub method: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PathMatch {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
}

/// A header or query parameter match.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ValueMatch {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Filter {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub request_header_modifier: Option<HeaderModifier>,
    #[serde(default)]
    pub response_header_modifier: Option<HeaderModifier>,
    #[serde(default)]
    pub request_redirect: Option<Redirect>,
    #[serde(default)]
    pub url_rewrite: Option<Rewrite>,
    #[serde(default)]
    pub request_mirror: Option<Mirror>,
    /// Read to name it: an extension is not supported.
    #[serde(default)]
    pub extension_ref: Option<ObjectRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HeaderModifier {
    #[serde(default)]
    pub set: Vec<NameValue>,
    #[serde(default)]
    pub add: Vec<NameValue>,
    #[serde(default)]
    pub remove: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NameValue {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Redirect {
    #[serde(default)]
    pub scheme: Option<String>,
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub path: Option<PathModifier>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub status_code: Option<u16>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Rewrite {
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub path: Option<PathModifier>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PathModifier {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub replace_full_path: Option<String>,
    #[serde(default)]
    pub replace_prefix_match: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Mirror {
    pub backend_ref: ObjectRef,
    #[serde(default)]
    pub percent: Option<u32>,
    #[serde(default)]
    pub fraction: Option<Fraction>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Fraction {
    pub numerator: u32,
    #[serde(default)]
    pub denominator: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct BackendRef {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub weight: Option<u32>,
    #[serde(default)]
    pub filters: Vec<Spanned<Filter>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Timeouts {
    #[serde(default)]
    pub request: Option<String>,
    #[serde(default)]
    pub backend_request: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Retry {
    #[serde(default)]
    pub codes: Vec<u16>,
    #[serde(default)]
    pub attempts: Option<u32>,
    #[serde(default)]
    pub backoff: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ServiceSpec {
    #[serde(default)]
    pub ports: Vec<ServicePort>,
    #[serde(default, rename = "clusterIP")]
    pub cluster_ip: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub external_name: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ServicePort {
    #[serde(default)]
    pub name: Option<String>,
    pub port: u16,
    #[serde(default)]
    pub app_protocol: Option<String>,
}

/// An EndpointSlice (no `spec`: its fields are at the top).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct EndpointSlice {
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    #[serde(default)]
    pub ports: Vec<EndpointPort>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Endpoint {
    #[serde(default)]
    pub addresses: Vec<String>,
    #[serde(default)]
    pub conditions: Option<EndpointConditions>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct EndpointConditions {
    #[serde(default)]
    pub ready: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct EndpointPort {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub app_protocol: Option<String>,
}

/// A Secret's data (base64) and string data.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SecretData {
    #[serde(default)]
    pub data: BTreeMap<String, String>,
    #[serde(default)]
    pub string_data: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReferenceGrantSpec {
    pub from: Vec<GrantFrom>,
    pub to: Vec<GrantTo>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GrantFrom {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub namespace: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GrantTo {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    #[serde(default)]
    pub name: Option<String>,
}
