//! The Kubernetes Gateway API conformance suite (sigs.k8s.io/gateway-api
//! v1.6.3, `conformance/tests/`), HTTPRoute core tests and the extended
//! ones for the features sluice has, ported without a cluster: each test
//! starts a proxy whose `gateway_api` source is the suite's own manifests
//! (`manifests/`, copied unchanged from the release: the base objects and
//! the test's), with EndpointSlices that point the Services at local
//! echo pods (`echo.rs`, the suite's `echo-basic`), and asks the test's
//! table of requests, compared as the suite compares them (`compare.rs`).
//! Status checks read the report a controller would write (`--check`).
//! docs/GATEWAY-API.md lists the tests, those that pass and those that
//! are not ported, and why.

mod compare;
mod core;
mod core_refs;
mod echo;
mod extended;
mod extended_headers;
mod extended_traffic;
mod status;

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use proxy::config::gateway::Report;

pub(crate) use compare::{ask, ask_all, Case};
use echo::Pod;

pub(crate) const INFRA: &str = "gateway-conformance-infra";
pub(crate) const WEB: &str = "gateway-conformance-web-backend";
pub(crate) const APP: &str = "gateway-conformance-app-backend";

/// The Services of the base manifests, each with one echo pod, and the
/// port names their EndpointSlices carry.
const SERVICES: &[(&str, &str, &[&str])] = &[
    (
        INFRA,
        "infra-backend-v1",
        &["first-port", "second-port", "third-port"],
    ),
    (INFRA, "infra-backend-v2", &[""]),
    (INFRA, "infra-backend-v3", &[""]),
    (APP, "app-backend-v1", &[""]),
    (APP, "app-backend-v2", &[""]),
    (WEB, "web-backend", &[""]),
];

fn manifests() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/routing/conformance/manifests")
}

/// A proxy serving the base manifests and a test's, and the pods.
pub(crate) struct Suite {
    pub(crate) pods: Vec<Pod>,
    pub(crate) config: proxy::config::Config,
    pub(crate) running: Option<proxy::RunningProxy>,
    pub(crate) dir: crate::support::live::Scratch,
    /// The test CA's PEM, for HTTPS clients.
    pub(crate) ca: String,
}

impl Suite {
    /// Starts the proxy on the base manifests and `files` (names in `manifests/`).
    pub(crate) async fn start(test: &str, files: &[&str]) -> Self {
        let mut pods = Vec::new();
        for (namespace, service, _) in SERVICES {
            pods.push(Pod::start(namespace, format!("{service}-7d9f5c4b-x{}", pods.len())).await);
        }
        let dir = crate::support::live::scratch(&format!("gw-{test}"));
        let k8s = dir.join("k8s");
        std::fs::create_dir_all(&k8s).unwrap();
        for name in std::iter::once("base.yaml").chain(files.iter().copied()) {
            let text = std::fs::read_to_string(manifests().join(name)).unwrap();
            let text = text.replace("{GATEWAY_CLASS_NAME}", "sluice");
            std::fs::write(k8s.join(name), text).unwrap();
        }
        let ca = tls::LocalCa::generate("conformance CA", std::time::Duration::from_secs(86_400))
            .unwrap();
        let names = ["example.org", "second-example.org", "unknown-example.org"].map(String::from);
        let leaf = ca.server(&names).unwrap();
        std::fs::write(
            k8s.join("zz-secret.yaml"),
            secret(&leaf.cert_pem, &leaf.key_pem),
        )
        .unwrap();
        std::fs::write(k8s.join("zz-endpoints.yaml"), endpoint_slices(&pods)).unwrap();
        let file = dir.join("sluice.yaml");
        std::fs::write(
            &file,
            "workers: 1\npaths: { case: sensitive }\nadmin: { address: 127.0.0.1:0 }\ngateway_api:\n  files: [k8s]\n  address: 127.0.0.1\n  class: sluice\n  ports: { 80: 0, 443: 0, 8080: 0, 8090: 0 }\n  secrets_dir: secrets\n",
        )
        .unwrap();
        let config = proxy::config::load(&file).unwrap_or_else(|err| panic!("{err}"));
        let running = crate::support::live::start(&file);
        Self {
            pods,
            config,
            running: Some(running),
            dir,
            ca: ca.ca.cert_pem,
        }
    }

    /// The address the Gateway `NAMESPACE/NAME` serves `port` at.
    pub(crate) fn gateway(&self, name: &str, port: u16) -> SocketAddr {
        let wanted = format!("gateway/{name}:{port}");
        let at = self
            .config
            .listeners
            .iter()
            .position(|l| l.name.as_deref() == Some(wanted.as_str()))
            .unwrap_or_else(|| panic!("no listener {wanted}:\n{}", self.report()));
        self.running.as_ref().unwrap().listeners[at]
    }

    /// `gateway-conformance-infra/same-namespace`, port 80.
    pub(crate) fn same_namespace(&self) -> SocketAddr {
        self.gateway(&format!("{INFRA}/same-namespace"), 80)
    }

    pub(crate) fn report(&self) -> Arc<Report> {
        Arc::clone(self.config.gateway_report.as_ref().unwrap())
    }

    /// The pod of Service `name`.
    pub(crate) fn pod(&self, name: &str) -> &Pod {
        self.pods.iter().find(|p| p.name.starts_with(name)).unwrap()
    }

    pub(crate) fn admin(&self) -> SocketAddr {
        self.running.as_ref().unwrap().admin.unwrap()
    }

    /// Replaces `manifests/NAME` in the source with `text` and reloads.
    pub(crate) async fn reload_with(&mut self, name: &str, text: &str) {
        std::fs::write(self.dir.join("k8s").join(name), text).unwrap();
        let answer = crate::support::live::reload(self.admin()).await;
        assert_eq!(answer.status, 200, "{}", answer.text());
        self.config = proxy::config::load(&self.dir.join("sluice.yaml")).unwrap();
    }
}

impl Drop for Suite {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The suite's `tls-validity-checks-certificate` (it makes one per run).
fn secret(cert: &str, key: &str) -> String {
    use base64::Engine as _;
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    format!(
        "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\nmetadata:\n  name: tls-validity-checks-certificate\n  namespace: {INFRA}\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(cert),
        b64(key)
    )
}

/// What the cluster's EndpointSlice controller would write: each
/// Service's ports at its pod (the h2c port at the pod's HTTP/2 one).
fn endpoint_slices(pods: &[Pod]) -> String {
    let mut out = String::new();
    for ((namespace, service, ports), pod) in SERVICES.iter().zip(pods) {
        let ports: Vec<String> = ports
            .iter()
            .map(|name| {
                let port = match *name {
                    "second-port" => pod.h2c.port(),
                    _ => pod.http.port(),
                };
                format!("  - name: \"{name}\"\n    port: {port}\n")
            })
            .collect();
        out.push_str(&format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-pods\n  namespace: {namespace}\n  labels:\n    kubernetes.io/service-name: {service}\naddressType: IPv4\nendpoints:\n  - addresses: [\"127.0.0.1\"]\n    conditions: {{ ready: true }}\nports:\n{}",
            ports.concat()
        ));
    }
    out
}
