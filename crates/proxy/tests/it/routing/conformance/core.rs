//! The HTTPRoute core conformance tests (features Gateway and
//! HTTPRoute, and ReferenceGrant), each its tables as the suite has them.

use super::compare::Exp;
use super::{ask, ask_all, Case, Suite, INFRA, WEB};

const V1: &str = "infra-backend-v1";
const V2: &str = "infra-backend-v2";
const V3: &str = "infra-backend-v3";

pub(super) fn cases(list: &[(&str, &'static str)]) -> Vec<Case> {
    list.iter()
        .map(|(path, backend)| match *backend {
            "404" => Case::status(path, 404),
            "500" => Case::status(path, 500),
            backend => Case::to(path, backend),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_simple_same_namespace() {
    let suite = Suite::start("simple", &["simple-same-namespace.yaml"]).await;
    ask(suite.same_namespace(), &Case::to("/", V1), &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_cross_namespace() {
    let suite = Suite::start("cross-ns", &["cross-namespace.yaml"]).await;
    let gateway = suite.gateway(&format!("{INFRA}/backend-namespaces"), 80);
    ask(
        gateway,
        &Case::to("/", "web-backend").namespace(WEB),
        &suite.ca,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_exact_path_matching() {
    let suite = Suite::start("exact", &["exact-path-matching.yaml"]).await;
    let table = cases(&[
        ("/one", V1),
        ("/two", V2),
        ("/", "404"),
        ("/one/example", "404"),
        ("/two/", "404"),
        ("/Two", "404"),
    ]);
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_header_matching() {
    let suite = Suite::start("headers", &["header-matching.yaml"]).await;
    let table = [
        Case::to("/", V1).header("Version", "one"),
        Case::to("/", V2).header("Version", "two"),
        Case::to("/", V1)
            .header("Version", "two")
            .header("Color", "orange"),
        Case::to("/", V2)
            .header("Version", "two")
            .header("Color", "blue"),
        Case::status("/", 404).header("Color", "orange"),
        Case::status("/", 404).header("Some-Other-Header", "one"),
        Case::to("/", V1).header("Color", "blue"),
        Case::to("/", V1).header("Color", "green"),
        Case::to("/", V2).header("Color", "red"),
        Case::to("/", V2).header("Color", "yellow"),
        Case::status("/", 404).header("Color", "purple"),
    ];
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_matching() {
    let suite = Suite::start("matching", &["matching.yaml"]).await;
    let mut table = cases(&[
        ("/", V1),
        ("/example", V1),
        ("/v2", V2),
        ("/v2/example", V2),
        ("/v2/", V2),
        ("/v2example", V1),
        ("/foo/v2/example", V1),
    ]);
    table.push(Case::to("/", V1).header("Version", "one"));
    table.push(Case::to("/", V2).header("Version", "two"));
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_matching_across_routes() {
    let suite = Suite::start("across", &["matching-across-routes.yaml"]).await;
    let table = [
        Case::to("/", V1).host("example.com"),
        Case::to("/example", V1).host("example.com"),
        Case::to("/example", V1).host("example.net"),
        Case::to("/example", V1)
            .host("example.com")
            .header("Version", "one"),
        Case::to("/v2", V2).host("example.com"),
        Case::to("/v2", V1).host("example.net"),
        Case::to("/v2/example", V2).host("example.com"),
        Case::to("/", V2)
            .host("example.com")
            .header("Version", "two"),
    ];
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_path_match_order() {
    let suite = Suite::start("order", &["path-match-order.yaml"]).await;
    let table = cases(&[
        ("/match/exact/one", V3),
        ("/match/exact", V2),
        ("/match", V1),
        ("/match/prefix/one/any", V2),
        ("/match/prefix/any", V1),
        ("/match/any", V3),
    ]);
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_hostname_intersection() {
    let suite = Suite::start("intersection", &["hostname-intersection.yaml"]).await;
    let gateway = suite.gateway(&format!("{INFRA}/httproute-hostname-intersection"), 80);
    let table = [
        Case::to("/s1", V1).host("very.specific.com"),
        Case::to("/s1", V1).host("very.specific.com:1234"),
        Case::status("/s1", 404).host("non.matching.com"),
        Case::status("/s1", 404).host("foo.nonmatchingwildcard.io"),
        Case::status("/s1", 404).host("foo.wildcard.io"),
        Case::status("/non-matching-prefix", 404).host("very.specific.com"),
        Case::to("/s2", V2).host("foo.wildcard.io"),
        Case::to("/s2", V2).host("bar.wildcard.io"),
        Case::to("/s2", V2).host("foo.bar.wildcard.io"),
        Case::status("/s2", 404).host("non.matching.com"),
        Case::status("/s2", 404).host("wildcard.io"),
        Case::status("/s2", 404).host("very.specific.com"),
        Case::status("/non-matching-prefix", 404).host("foo.wildcard.io"),
        Case::to("/s3", V3).host("very.specific.com"),
        Case::status("/s3", 404).host("non.matching.com"),
        Case::status("/s3", 404).host("foo.specific.com"),
        Case::status("/s3", 404).host("foo.wildcard.io"),
        Case::to("/s4", V1).host("foo.anotherwildcard.io"),
        Case::to("/s4", V1).host("bar.anotherwildcard.io"),
        Case::to("/s4", V1).host("foo.bar.anotherwildcard.io"),
        Case::status("/s4", 404).host("anotherwildcard.io"),
        Case::status("/s4", 404).host("foo.wildcard.io"),
        Case::status("/s4", 404).host("very.specific.com"),
        Case::status("/non-matching-prefix", 404).host("foo.anotherwildcard.io"),
        // Routes that do not intersect.
        Case::status("/s5", 404).host("specific.but.wrong.com"),
        Case::status("/s5", 404).host("wildcard.io"),
    ];
    ask_all(gateway, &table, &suite.ca).await;
    let report = suite.report();
    let parent = format!("{INFRA}/httproute-hostname-intersection");
    let none = report
        .route(&format!("{INFRA}/no-intersecting-hosts"), &parent)
        .unwrap();
    assert_eq!(
        (none.accepted.status, none.accepted.reason),
        (false, "NoMatchingListenerHostname")
    );
    // AttachedRoutes counts accepted routes only.
    let gw = report.gateways.iter().find(|g| g.name == parent).unwrap();
    let attached: Vec<usize> = gw.listeners.iter().map(|l| l.attached_routes).collect();
    assert_eq!(attached, [2, 1, 1]);
    let all = suite.gateway(&format!("{INFRA}/httproute-hostname-intersection-all"), 80);
    let table = [
        Case::to("/", V2).host("first.com"),
        Case::to("/", V2).host("sub.first.com"),
        Case::to("/", V2).host("second.com"),
        Case::to("/", V2).host("sub.second.com"),
        Case::status("/", 404).host("third.com"),
        Case::status("/", 404).host("sub.third.com"),
    ];
    ask_all(all, &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_listener_hostname_matching() {
    let suite = Suite::start("listener-hosts", &["listener-hostname-matching.yaml"]).await;
    let gateway = suite.gateway(&format!("{INFRA}/httproute-listener-hostname-matching"), 80);
    let table = [
        Case::to("/", V1).host("bar.com"),
        Case::to("/", V2).host("foo.bar.com"),
        Case::to("/", V3).host("baz.bar.com"),
        Case::to("/", V3).host("boo.bar.com"),
        Case::to("/", V3).host("multiple.prefixes.bar.com"),
        Case::to("/", V3).host("multiple.prefixes.foo.com"),
        Case::status("/", 404).host("foo.com"),
        Case::status("/", 404).host("no.matching.host"),
    ];
    ask_all(gateway, &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_multiple_gateways() {
    let suite = Suite::start("multiple-gw", &["multiple-gateways.yaml"]).await;
    let all = suite.gateway(&format!("{INFRA}/all-namespaces"), 80);
    ask_all(
        suite.same_namespace(),
        &cases(&[("/shared", V1), ("/", V2)]),
        &suite.ca,
    )
    .await;
    ask_all(all, &cases(&[("/shared", V1), ("/", V3)]), &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_no_backend_refs() {
    let suite = Suite::start("omitted", &["omitted-backendrefs.yaml"]).await;
    let table = cases(&[
        ("/forward", V1),
        ("/omitted-no-forward", "500"),
        ("/empty-no-forward", "500"),
    ]);
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_redirect_host_and_status() {
    let suite = Suite::start("redirect-host", &["redirect-host-and-status.yaml"]).await;
    let table = [
        Case::status("/hostname-redirect", 302).redirect(302, ("", "example.org", "", "")),
        Case::status("/host-and-status", 301).redirect(301, ("", "example.org", "", "")),
    ];
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_request_header_modifier() {
    let suite = Suite::start("req-headers", &["request-header-modifier.yaml"]).await;
    ask_all(suite.same_namespace(), &header_modifier_cases(), &suite.ca).await;
}

/// The request header cases (HTTPRouteRequestHeaderModifier, and the
/// same with the filters on the backendRef).
pub(super) fn header_modifier_cases() -> Vec<Case> {
    let expect =
        |req: Case, headers: Vec<(&'static str, &'static str)>, absent: Vec<&'static str>| Case {
            exp: Exp {
                backend: V1,
                request_headers: Some(headers),
                request_absent: absent,
                ..Exp::default()
            },
            ..req
        };
    vec![
        expect(
            Case::to("/set", V1).header("Some-Other-Header", "val"),
            vec![
                ("Some-Other-Header", "val"),
                ("X-Header-Set", "set-overwrites-values"),
            ],
            vec![],
        ),
        expect(
            Case::to("/set", V1)
                .header("Some-Other-Header", "val")
                .header("X-Header-Set", "some-other-value"),
            vec![
                ("Some-Other-Header", "val"),
                ("X-Header-Set", "set-overwrites-values"),
            ],
            vec![],
        ),
        expect(
            Case::to("/add", V1).header("Some-Other-Header", "val"),
            vec![
                ("Some-Other-Header", "val"),
                ("X-Header-Add", "add-appends-values"),
            ],
            vec![],
        ),
        expect(
            Case::to("/add", V1)
                .header("Some-Other-Header", "val")
                .header("X-Header-Add", "some-other-value"),
            vec![
                ("Some-Other-Header", "val"),
                ("X-Header-Add", "some-other-value,add-appends-values"),
            ],
            vec![],
        ),
        expect(
            Case::to("/remove", V1).header("X-Header-Remove", "val"),
            vec![],
            vec!["X-Header-Remove"],
        ),
        expect(
            Case::to("/multiple", V1)
                .header("X-Header-Set-2", "set-val-2")
                .header("X-Header-Add-2", "add-val-2")
                .header("X-Header-Remove-2", "remove-val-2")
                .header("Another-Header", "another-header-val"),
            vec![
                ("X-Header-Set-1", "header-set-1"),
                ("X-Header-Set-2", "header-set-2"),
                ("X-Header-Add-1", "header-add-1"),
                ("X-Header-Add-2", "add-val-2,header-add-2"),
                ("X-Header-Add-3", "header-add-3"),
                ("Another-Header", "another-header-val"),
            ],
            vec!["X-Header-Remove-1", "X-Header-Remove-2"],
        ),
        expect(
            Case::to("/case-insensitivity", V1)
                .header("x-header-set", "original-val-set")
                .header("x-header-add", "original-val-add")
                .header("x-header-remove", "original-val-remove")
                .header("Another-Header", "another-header-val"),
            vec![
                ("X-Header-Set", "header-set"),
                ("X-Header-Add", "original-val-add,header-add"),
                ("Another-Header", "another-header-val"),
            ],
            vec!["x-header-remove", "X-Header-Remove"],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_weight() {
    let suite = Suite::start("weight", &["weight.yaml"]).await;
    let gateway = suite.same_namespace();
    // The suite's test: 500 requests within 5 points of each weight, tried
    // up to 10 times (a fair split misses by that much about once in 60).
    let total = 500;
    let mut tries = Vec::new();
    for _ in 0..10 {
        let mut counts = [0u32; 3];
        for i in 0..total {
            let path = format!("/?jitter={i}");
            let got =
                super::compare::roundtrip(gateway, &super::compare::get(&path), &suite.ca).await;
            assert_eq!(got.status, 200);
            let pod = got.echo.as_ref().unwrap()["pod"]
                .as_str()
                .unwrap()
                .to_string();
            let at = [V1, V2, V3]
                .iter()
                .position(|b| pod.starts_with(b))
                .unwrap();
            counts[at] += 1;
        }
        assert_eq!(counts[2], 0, "weight 0 takes no request");
        let share = |n: u32| f64::from(n) / f64::from(total);
        if (share(counts[0]) - 0.7).abs() <= 0.05 && (share(counts[1]) - 0.3).abs() <= 0.05 {
            return;
        }
        tries.push(counts);
    }
    panic!("no split within the tolerance in 10 tries: {tries:?}");
}
