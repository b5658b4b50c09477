//! The conformance tests that check status only: routes whose parentRef
//! or namespace keeps them off a Gateway, as `--check` reports them.

use super::{Suite, INFRA, WEB};

/// The route's condition toward `gateway`, asserted, and the Gateway's
/// listeners' attached route counts.
fn refused(suite: &Suite, route: &str, gateway: &str, reason: &str) -> Vec<usize> {
    let report = suite.report();
    let status = report
        .route(route, gateway)
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(
        (status.accepted.status, status.accepted.reason),
        (false, reason),
        "{report}"
    );
    assert!(status.resolved_refs.status, "{report}");
    let gw = report.gateways.iter().find(|g| g.name == gateway).unwrap();
    gw.listeners.iter().map(|l| l.attached_routes).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_invalid_cross_namespace_parent_ref() {
    let suite = Suite::start("x-ns-parent", &["invalid-cross-namespace-parent-ref.yaml"]).await;
    let route = format!("{WEB}/invalid-cross-namespace-parent-ref");
    let attached = refused(
        &suite,
        &route,
        &format!("{INFRA}/same-namespace"),
        "NotAllowedByListeners",
    );
    assert_eq!(attached, [0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_invalid_parent_refs_match_no_parent() {
    // HTTPRouteInvalidParentRefNotMatchingSectionName,
    // HTTPRouteInvalidParentRefNotMatchingListenerPort,
    // HTTPRouteInvalidParentRefSectionNameNotMatchingPort.
    for (file, route, gateway) in [
        (
            "invalid-parentref-not-matching-section-name.yaml",
            "httproute-listener-not-matching-section-name",
            "same-namespace",
        ),
        (
            "invalid-parentref-not-matching-listener-port.yaml",
            "httproute-listener-not-matching-route-port",
            "same-namespace",
        ),
        (
            "invalid-parentref-section-name-not-matching-port.yaml",
            "httproute-listener-section-name-not-matching-port",
            "gateway-with-one-not-matching-port-and-section-name-route",
        ),
    ] {
        let suite = Suite::start(route, &[file]).await;
        let attached = refused(
            &suite,
            &format!("{INFRA}/{route}"),
            &format!("{INFRA}/{gateway}"),
            "NoMatchingParent",
        );
        assert!(attached.iter().all(|&n| n == 0), "{file}: {attached:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_reads_as_a_controller_would_write_it() {
    let suite = Suite::start(
        "report",
        &["invalid-backendref-unknown-kind.yaml", "matching.yaml"],
    )
    .await;
    let text = suite.report().to_string();
    assert!(
        text.contains(&format!("HTTPRoute {INFRA}/matching (")),
        "{text}"
    );
    assert!(
        text.contains("Accepted=True (Accepted) ResolvedRefs=True (ResolvedRefs)"),
        "{text}"
    );
    assert!(
        text.contains(
            "ResolvedRefs=False (InvalidKind): a backendRef to unknownkind.example.com/NonExistent"
        ),
        "{text}"
    );
    assert!(text.contains("Deployment object(s) not read"), "{text}");
    assert!(!suite.report().all_accepted());
}
