//! The HTTPRoute core conformance tests about references: backendRefs
//! that do not resolve, ReferenceGrants, Services without selectors,
//! Secrets for HTTPS listeners.

use super::compare::Proto;
use super::core::cases;
use super::{ask, ask_all, Case, Suite, APP, INFRA, WEB};

const V1: &str = "infra-backend-v1";
const V2: &str = "infra-backend-v2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_invalid_backend_refs_are_500_with_their_reasons() {
    // HTTPRouteInvalidNonExistentBackendRef and HTTPRouteInvalidBackendRefUnknownKind.
    for (file, route, path, reason) in [
        (
            "invalid-nonexistent-backendref.yaml",
            "invalid-nonexistent-backend-ref",
            "/",
            "BackendNotFound",
        ),
        (
            "invalid-backendref-unknown-kind.yaml",
            "invalid-backend-ref-unknown-kind",
            "/v2",
            "InvalidKind",
        ),
    ] {
        let suite = Suite::start(route, &[file]).await;
        ask(suite.same_namespace(), &Case::status(path, 500), &suite.ca).await;
        let report = suite.report();
        let status = report
            .route(
                &format!("{INFRA}/{route}"),
                &format!("{INFRA}/same-namespace"),
            )
            .unwrap();
        assert!(status.accepted.status, "{route}: {status:?}");
        assert_eq!(
            (status.resolved_refs.status, status.resolved_refs.reason),
            (false, reason)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_service_types() {
    let mut suite = Suite::start("service-types", &["service-types.yaml"]).await;
    // The suite patches the manual EndpointSlices with infra-backend-v1's
    // pod addresses; the cluster makes `headless`'s from its selector.
    let port = suite.pod(V1).http.port();
    let slices = ["manual-endpointslices", "headless-manual-endpointslices", "headless"]
        .iter()
        .map(|service| format!("---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-ip4\n  namespace: {INFRA}\n  labels:\n    kubernetes.io/service-name: {service}\naddressType: IPv4\nendpoints:\n  - addresses: [\"127.0.0.1\"]\nports:\n  - name: first-port\n    port: {port}\n"))
        .collect::<String>();
    let manifest = std::fs::read_to_string(suite.dir.join("k8s/service-types.yaml")).unwrap();
    let patched = manifest
        .split("---")
        .filter(|doc| !doc.contains("kind: EndpointSlice"))
        .collect::<Vec<_>>()
        .join("---");
    suite
        .reload_with("service-types.yaml", &format!("{patched}\n{slices}"))
        .await;
    let table = cases(&[
        ("/manual-endpointslices", V1),
        ("/headless-manual-endpointslices", V1),
        ("/headless", V1),
    ]);
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_https_listener() {
    let suite = Suite::start("https", &["https-listener.yaml"]).await;
    let gateway = suite.gateway(&format!("{INFRA}/same-namespace-with-https-listener"), 443);
    let table = [
        Case::to("/", V1).host("example.org").proto(Proto::Https),
        Case::status("/", 404)
            .host("unknown-example.org")
            .proto(Proto::Https),
        Case::to("/", V2)
            .host("second-example.org")
            .proto(Proto::Https),
    ];
    ask_all(gateway, &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_reference_grants() {
    // HTTPRouteReferenceGrant: allowed, then 500 once the grant is gone.
    let mut suite = Suite::start("grant", &["reference-grant.yaml"]).await;
    let gateway = suite.same_namespace();
    ask(
        gateway,
        &Case::to("/", "web-backend").namespace(WEB),
        &suite.ca,
    )
    .await;
    let manifest = std::fs::read_to_string(suite.dir.join("k8s/reference-grant.yaml")).unwrap();
    let without = manifest
        .split("---")
        .filter(|doc| !doc.contains("kind: ReferenceGrant"))
        .collect::<Vec<_>>()
        .join("---");
    suite.reload_with("reference-grant.yaml", &without).await;
    ask(suite.same_namespace(), &Case::status("/", 500), &suite.ca).await;
    // HTTPRouteInvalidReferenceGrant, HTTPRouteInvalidCrossNamespaceBackendRef.
    for (file, route) in [
        ("invalid-reference-grant.yaml", "reference-grant"),
        (
            "invalid-cross-namespace-backend-ref.yaml",
            "invalid-cross-namespace-backend-ref",
        ),
    ] {
        let suite = Suite::start(route, &[file]).await;
        ask(suite.same_namespace(), &Case::status("/", 500), &suite.ca).await;
        let report = suite.report();
        let status = report
            .route(
                &format!("{INFRA}/{route}"),
                &format!("{INFRA}/same-namespace"),
            )
            .unwrap();
        assert_eq!(
            (status.resolved_refs.status, status.resolved_refs.reason),
            (false, "RefNotPermitted"),
            "{file}"
        );
    }
    // HTTPRoutePartiallyInvalidViaInvalidReferenceGrant.
    let suite = Suite::start(
        "partial",
        &["partially-invalid-via-invalid-reference-grant.yaml"],
    )
    .await;
    let table = [
        Case::status("/v2", 500),
        Case::to("/", "app-backend-v1").namespace(APP),
    ];
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
    let report = suite.report();
    let status = report
        .route(
            &format!("{INFRA}/invalid-reference-grant"),
            &format!("{INFRA}/same-namespace"),
        )
        .unwrap();
    assert_eq!(
        (status.resolved_refs.status, status.resolved_refs.reason),
        (false, "RefNotPermitted")
    );
    assert!(status.accepted.status);
}
