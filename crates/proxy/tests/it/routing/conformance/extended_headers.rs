//! The HTTPRoute extended conformance tests about header modifiers:
//! on responses, and on requests to one backend of several.

use super::compare::roundtrip;
use super::{ask, ask_all, Case, Suite};

const V1: &str = "infra-backend-v1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_response_header_modifier() {
    let suite = Suite::start("resp-headers", &["response-header-modifier.yaml"]).await;
    let answer = |path: &str,
                  set: Vec<(&'static str, &'static str)>,
                  headers: Vec<(&'static str, &'static str)>,
                  absent: Vec<&'static str>| {
        let mut case = Case::to(path, V1);
        case.req.set_response = set;
        case.exp.response_headers = headers;
        case.exp.response_absent = absent;
        case
    };
    let table = [
        answer(
            "/set",
            vec![("Some-Other-Header", "val")],
            vec![
                ("Some-Other-Header", "val"),
                ("X-Header-Set", "set-overwrites-values"),
            ],
            vec![],
        ),
        answer(
            "/set",
            vec![
                ("Some-Other-Header", "val"),
                ("X-Header-Set", "some-other-value"),
            ],
            vec![
                ("Some-Other-Header", "val"),
                ("X-Header-Set", "set-overwrites-values"),
            ],
            vec![],
        ),
        answer(
            "/add",
            vec![("Some-Other-Header", "val")],
            vec![
                ("Some-Other-Header", "val"),
                ("X-Header-Add", "add-appends-values"),
            ],
            vec![],
        ),
        answer(
            "/add",
            vec![
                ("Some-Other-Header", "val"),
                ("X-Header-Add", "some-other-value"),
            ],
            vec![
                ("Some-Other-Header", "val"),
                ("X-Header-Add", "some-other-value,add-appends-values"),
            ],
            vec![],
        ),
        answer(
            "/remove",
            vec![("X-Header-Remove", "val")],
            vec![],
            vec!["X-Header-Remove"],
        ),
        answer(
            "/multiple",
            vec![
                ("X-Header-Set-2", "set-val-2"),
                ("X-Header-Add-2", "add-val-2"),
                ("X-Header-Remove-2", "remove-val-2"),
                ("Another-Header", "another-header-val"),
                ("X-Header-Remove-1", "val"),
            ],
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
        answer(
            "/case-insensitivity",
            vec![
                ("x-header-set", "original-val-set"),
                ("x-header-add", "original-val-add"),
                ("x-header-remove", "original-val-remove"),
                ("Another-Header", "another-header-val"),
            ],
            vec![
                ("X-Header-Set", "header-set"),
                ("X-Header-Add", "original-val-add,header-add"),
                ("X-Lowercase-Add", "lowercase-add"),
                ("X-Mixedcase-Add-1", "mixedcase-add-1"),
                ("X-Mixedcase-Add-2", "mixedcase-add-2"),
                ("X-Uppercase-Add", "uppercase-add"),
                ("Another-Header", "another-header-val"),
            ],
            vec!["x-header-remove", "X-Header-Remove"],
        ),
    ];
    ask_all(suite.same_namespace(), &table, &suite.ca).await;
    let mut both = answer(
        "/response-and-request-header-modifiers",
        vec![
            ("X-Header-Set-2", "set-val-2"),
            ("X-Header-Add-2", "add-val-2"),
            ("X-Header-Remove-2", "remove-val-2"),
            ("Another-Header", "another-header-val"),
            ("X-Header-Remove-1", "remove-val-1"),
            ("X-Header-Echo", "echo"),
        ],
        vec![
            ("X-Header-Set-1", "header-set-1"),
            ("X-Header-Set-2", "header-set-2"),
            ("X-Header-Add-1", "header-add-1"),
            ("X-Header-Add-2", "add-val-2,header-add-2"),
            ("Another-Header", "another-header-val"),
            ("X-Header-Echo", "echo"),
        ],
        vec!["X-Header-Remove-1", "X-Header-Remove-2"],
    )
    .header("X-Header-Remove", "remove-val")
    .header("X-Header-Add-Append", "append-val-1")
    .header("X-Header-Echo", "echo");
    both.exp.request_headers = Some(vec![
        ("X-Header-Add", "header-val-1"),
        ("X-Header-Set", "set-overwrites-values"),
        ("X-Header-Add-Append", "append-val-1,header-val-2"),
        ("X-Header-Echo", "echo"),
    ]);
    both.exp.request_absent = vec!["X-Header-Remove"];
    ask(suite.same_namespace(), &both, &suite.ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_backend_request_header_modifier() {
    // HTTPRouteBackendRequestHeaderModifier: the same cases, the filters on the backendRef.
    let suite = Suite::start("backend-headers", &["request-header-modifier-backend.yaml"]).await;
    ask_all(
        suite.same_namespace(),
        &super::core::header_modifier_cases(),
        &suite.ca,
    )
    .await;
    // HTTPRouteRequestHeaderModifierBackendWeights: each backend's own header.
    let suite = Suite::start(
        "backend-weights",
        &["request-header-modifier-backend-weights.yaml"],
    )
    .await;
    for _ in 0..100 {
        let got = roundtrip(suite.same_namespace(), &super::compare::get("/"), &suite.ca).await;
        let echo = got.echo.unwrap();
        let set: Vec<&str> = echo["headers"]["Backend"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(set.len(), 1, "{echo}");
        assert!(echo["pod"].as_str().unwrap().starts_with(set[0]), "{echo}");
    }
}
