//! The HTTPRoute extended conformance tests of the features sluice has:
//! method and query matching, redirects (path, port, scheme, 303/307/308),
//! rewrites, header modifiers on responses and backends, mirrors, request
//! and backend timeouts, retries, named rules, parentRef ports, h2c
//! backends.

use super::compare::{Exp, Proto};
use super::{ask, ask_all, Case, Suite, INFRA};

const V1: &str = "infra-backend-v1";
const V2: &str = "infra-backend-v2";
const V3: &str = "infra-backend-v3";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_method_matching() {
    let suite = Suite::start("methods", &["method-matching.yaml"]).await;
    let table = [
        Case::to("/", V1).method("POST"),
        Case::to("/", V2).method("GET"),
        Case::status("/", 404).method("HEAD"),
        Case::to("/path1", V1).method("GET"),
        Case::to("/", V2).method("PUT").header("version", "one"),
        Case::to("/path2", V3)
            .method("POST")
            .header("version", "two"),
        Case::to("/path3", V1).method("PATCH"),
        Case::to("/path4", V1)
            .method("DELETE")
            .header("version", "three"),
        Case::status("/", 404).method("PUT"),
        Case::status("/path4", 404).method("DELETE"),
        Case::to("/path5", V1).method("PATCH"),
        Case::to("/", V2).method("PATCH").header("version", "four"),
    ];
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_query_param_matching() {
    let suite = Suite::start("query", &["query-param-matching.yaml"]).await;
    let table = [
        Case::to("/?animal=whale", V1),
        Case::to("/?animal=dolphin", V2),
        Case::to("/?animal=dolphin&color=blue", V3),
        Case::to("/?ANIMAL=Whale", V3),
        Case::to("/?animal=whale&otherparam=irrelevant", V1),
        Case::to("/?animal=dolphin&color=yellow", V2),
        Case::status("/?color=blue", 404),
        Case::status("/?animal=dog", 404),
        Case::status("/?animal=whaledolphin", 404),
        Case::status("/", 404),
        Case::to("/path1?animal=whale", V1),
        Case::to("/?animal=whale", V2).header("version", "one"),
        Case::to("/path2?animal=whale", V3).header("version", "two"),
        Case::to("/path3?animal=shark", V1),
        Case::to("/path4?animal=kraken", V1).header("version", "three"),
        Case::status("/?animal=shark", 404),
        Case::status("/path4?animal=kraken", 404),
        Case::to("/path5?animal=hydra", V1),
        Case::to("/?animal=hydra", V3).header("version", "four"),
    ];
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_named_rule() {
    let suite = Suite::start("named", &["named-rule.yaml"]).await;
    let table = [Case::to("/named", V1), Case::to("/unnamed", V2)];
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_listener_port_matching() {
    let suite = Suite::start("ports", &["listener-port-matching.yaml"]).await;
    let gateway = |port| suite.gateway(&format!("{INFRA}/httproute-listener-port-matching"), port);
    ask(gateway(80), &Case::to("/", V1).host("foo.com"), &suite.ca).await;
    ask(
        gateway(8080),
        &Case::to("/", V2).host("foo.com:8080"),
        &suite.ca,
    )
    .await;
    ask(
        gateway(8080),
        &Case::to("/", V2).host("bar.com:8080"),
        &suite.ca,
    )
    .await;
    ask(
        gateway(8090),
        &Case::to("/", V3).host("foo.com:8090"),
        &suite.ca,
    )
    .await;
    ask(
        gateway(8090),
        &Case::status("/", 404).host("bar.com:8090"),
        &suite.ca,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_redirects_with_303_307_308() {
    for (file, path, status) in [
        ("303-redirect.yaml", "/see-other", 303),
        ("307-redirect.yaml", "/temporary", 307),
        ("308-redirect.yaml", "/permanent", 308),
    ] {
        let suite = Suite::start(file, &[file]).await;
        let mut case = Case::status(path, status).redirect(status, ("", "", "", path));
        if status == 303 {
            case = case.method("POST");
        }
        ask(suite.same_namespace(), &case, &suite.ca).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_redirect_path_port_and_scheme() {
    let suite = Suite::start(
        "redirects",
        &[
            "redirect-path.yaml",
            "redirect-port.yaml",
            "redirect-scheme.yaml",
        ],
    )
    .await;
    let r = |path: &str, status, to| Case::status(path, status).redirect(status, to);
    let table = [
        // HTTPRouteRedirectPath
        r(
            "/original-prefix/lemon",
            302,
            ("", "", "", "/replacement-prefix/lemon"),
        ),
        r(
            "/full/path/original",
            302,
            ("", "", "", "/full-path-replacement"),
        ),
        r(
            "/path-and-host",
            302,
            ("", "example.org", "", "/replacement-prefix"),
        ),
        r("/path-and-status", 301, ("", "", "", "/replacement-prefix")),
        r(
            "/full-path-and-host",
            302,
            ("", "example.org", "", "/replacement-full"),
        ),
        r(
            "/full-path-and-status",
            301,
            ("", "", "", "/replacement-full"),
        ),
        // HTTPRouteRedirectPort
        r("/port", 302, ("", "", "8083", "")),
        r("/port-and-host", 302, ("", "example.org", "8083", "")),
        r("/port-and-status", 301, ("", "", "8083", "")),
        r(
            "/port-and-host-and-status",
            302,
            ("", "example.org", "8083", ""),
        ),
        // HTTPRouteRedirectScheme
        r("/scheme", 302, ("https", "", "", "")),
        r("/scheme-and-host", 302, ("https", "example.org", "", "")),
        r("/scheme-and-status", 301, ("https", "", "", "")),
        r(
            "/scheme-and-host-and-status",
            302,
            ("https", "example.org", "", ""),
        ),
    ];
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_redirect_port_and_scheme() {
    let suite = Suite::start("port-scheme", &["redirect-port-and-scheme.yaml"]).await;
    let r = |path: &str, to| Case::status(path, 302).redirect(302, to);
    let on_80 = [
        r("/scheme-nil-and-port-nil", ("http", "example.org", "", "")),
        r("/scheme-nil-and-port-80", ("http", "example.org", "", "")),
        r(
            "/scheme-nil-and-port-8080",
            ("http", "example.org", "8080", ""),
        ),
        r(
            "/scheme-https-and-port-nil",
            ("https", "example.org", "", ""),
        ),
        r(
            "/scheme-https-and-port-443",
            ("https", "example.org", "", ""),
        ),
        r(
            "/scheme-https-and-port-8443",
            ("https", "example.org", "8443", ""),
        ),
    ];
    ask_all(suite.same_namespace(), &on_80, &suite.ca).await;
    let on_8080 = [
        r(
            "/scheme-nil-and-port-nil",
            ("http", "example.org", "8080", ""),
        ),
        r("/scheme-nil-and-port-80", ("http", "example.org", "", "")),
        r(
            "/scheme-https-and-port-nil",
            ("https", "example.org", "", ""),
        ),
    ];
    let gateway = suite.gateway(
        &format!("{INFRA}/same-namespace-with-http-listener-on-8080"),
        8080,
    );
    ask_all(gateway, &on_8080, &suite.ca).await;
    let tls = |path: &str, to| r(path, to).host("example.org").proto(Proto::Https);
    let on_443 = [
        tls("/scheme-nil-and-port-nil", ("https", "example.org", "", "")),
        tls("/scheme-nil-and-port-443", ("https", "example.org", "", "")),
        tls(
            "/scheme-nil-and-port-8443",
            ("https", "example.org", "8443", ""),
        ),
        tls("/scheme-http-and-port-nil", ("http", "example.org", "", "")),
        tls("/scheme-http-and-port-80", ("http", "example.org", "", "")),
        tls(
            "/scheme-http-and-port-8080",
            ("http", "example.org", "8080", ""),
        ),
    ];
    let gateway = suite.gateway(&format!("{INFRA}/same-namespace-with-https-listener"), 443);
    ask_all(gateway, &on_443, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_rewrite_host_and_path() {
    let suite = Suite::start("rewrite", &["rewrite-host.yaml", "rewrite-path.yaml"]).await;
    let rewritten = |req: Case,
                     path: &str,
                     host: Option<&'static str>,
                     backend,
                     headers: Vec<(&'static str, &'static str)>,
                     absent: Vec<&'static str>| Case {
        exp: Exp {
            backend,
            path: Some(path.into()),
            host,
            request_headers: Some(headers),
            request_absent: absent,
            ..Exp::default()
        },
        ..req
    };
    let modified = vec![
        ("X-Header-Add", "header-val-1"),
        ("X-Header-Add-Append", "append-val-1,header-val-2"),
        ("X-Header-Set", "set-overwrites-values"),
    ];
    let table = [
        // HTTPRouteRewriteHost
        rewritten(
            Case::to("/one", V1).host("rewrite.example"),
            "/one",
            Some("one.example.org"),
            V1,
            vec![],
            vec![],
        ),
        rewritten(
            Case::to("/two", V2).host("rewrite.example"),
            "/two",
            Some("example.org"),
            V2,
            vec![],
            vec![],
        ),
        rewritten(
            Case::to("/rewrite-host-and-modify-headers", V2)
                .host("rewrite.example")
                .header("X-Header-Remove", "remove-val")
                .header("X-Header-Add-Append", "append-val-1"),
            "/rewrite-host-and-modify-headers",
            Some("test.example.org"),
            V2,
            modified.clone(),
            vec!["X-Header-Remove"],
        ),
        // HTTPRouteRewritePath
        rewritten(
            Case::to("/prefix/one/two", V1),
            "/one/two",
            None,
            V1,
            vec![],
            vec![],
        ),
        rewritten(
            Case::to("/strip-prefix/three", V1),
            "/three",
            None,
            V1,
            vec![],
            vec![],
        ),
        rewritten(Case::to("/strip-prefix", V1), "/", None, V1, vec![], vec![]),
        rewritten(
            Case::to("/full/one/two", V1),
            "/one",
            None,
            V1,
            vec![],
            vec![],
        ),
        rewritten(
            Case::to("/full/rewrite-path-and-modify-headers/test", V1)
                .header("X-Header-Remove", "remove-val")
                .header("X-Header-Add-Append", "append-val-1")
                .header("X-Header-Set", "set-val"),
            "/test",
            None,
            V1,
            modified.clone(),
            vec!["X-Header-Remove"],
        ),
        rewritten(
            Case::to("/prefix/rewrite-path-and-modify-headers/one", V1)
                .header("X-Header-Remove", "remove-val")
                .header("X-Header-Add-Append", "append-val-1")
                .header("X-Header-Set", "set-val"),
            "/prefix/one",
            None,
            V1,
            modified,
            vec!["X-Header-Remove"],
        ),
    ];
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
}
