//! The HTTPRoute extended conformance tests about traffic: mirrors
//! (one, several, a share), request and backend timeouts, retries, and
//! an h2c backend.

use std::time::Duration;

use super::compare::{roundtrip, Proto};
use super::{ask, Case, Suite};

const V1: &str = "infra-backend-v1";
const V2: &str = "infra-backend-v2";
const V3: &str = "infra-backend-v3";

/// Waits until `pod` has logged a request for `target` (the suite
/// reads the mirror pods' logs), at most 10 s.
async fn mirrored(suite: &Suite, pod: &str, target: &str) {
    let pod = suite.pod(pod);
    for _ in 0..200 {
        if pod.requests().iter().any(|t| t == target) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{target} was not mirrored to {}: {:?}",
        pod.name,
        pod.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_request_mirrors() {
    let suite = Suite::start(
        "mirror",
        &["request-mirror.yaml", "request-multiple-mirrors.yaml"],
    )
    .await;
    let modified = vec![
        ("X-Header-Add", "header-val-1"),
        ("X-Header-Add-Append", "append-val-1,header-val-2"),
        ("X-Header-Set", "set-overwrites-values"),
    ];
    for (path, mirrors, modify) in [
        ("/mirror", &[V2][..], false),
        ("/mirror-and-modify-headers", &[V2][..], true),
        ("/multi-mirror", &[V2, V3][..], false),
        (
            "/multi-mirror-and-modify-request-headers",
            &[V2, V3][..],
            true,
        ),
    ] {
        let target = format!(
            "{path}?gateway-api-conformance-request-id={}",
            fastrand::u64(..)
        );
        let mut case = Case::to(&target, V1);
        if modify {
            case = case
                .header("X-Header-Remove", "remove-val")
                .header("X-Header-Add-Append", "append-val-1");
            case.exp.request_headers = Some(modified.clone());
            case.exp.request_absent = vec!["X-Header-Remove"];
        }
        ask(suite.same_namespace(), &case, &suite.ca).await;
        for pod in mirrors {
            mirrored(&suite, pod, &target).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_request_percentage_mirror() {
    let suite = Suite::start("percent-mirror", &["request-percentage-mirror.yaml"]).await;
    // 500 requests each; within 3 binomial standard deviations of the share.
    for (path, percent) in [
        ("/percent-mirror", 0.20),
        ("/percent-mirror-fraction", 0.50),
        ("/percent-mirror-and-modify-headers", 0.35),
    ] {
        let target = format!(
            "{path}?gateway-api-conformance-request-id={}",
            fastrand::u64(..)
        );
        let total: f64 = 500.0;
        for _ in 0..500 {
            let got = roundtrip(
                suite.same_namespace(),
                &super::compare::get(&target),
                &suite.ca,
            )
            .await;
            assert_eq!(got.status, 200);
        }
        // Copies still in flight land within a moment.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let copies = suite
            .pod(V2)
            .requests()
            .iter()
            .filter(|t| **t == target)
            .count() as f64;
        let margin = 3.0 * (total * percent * (1.0 - percent)).sqrt();
        assert!(
            (copies - total * percent).abs() <= margin,
            "{path}: {copies} of {total}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_timeouts() {
    // HTTPRouteTimeoutRequest and HTTPRouteTimeoutBackendRequest.
    let suite = Suite::start(
        "timeouts",
        &["timeout-request.yaml", "timeout-backend-request.yaml"],
    )
    .await;
    let gateway = suite.same_namespace();
    let table = [
        Case::to("/request-timeout", V1),
        Case::status("/request-timeout?delay=1s", 504),
        Case::to("/disable-request-timeout?delay=1s", V1),
        Case::to("/backend-timeout", V1),
        Case::status("/backend-timeout?delay=1s", 504),
        Case::to("/disable-backend-timeout?delay=1s", V1),
    ];
    for case in &table {
        let got = roundtrip(gateway, &case.req, &suite.ca).await;
        super::compare::compare(&case.req, &case.exp, &got)
            .unwrap_or_else(|why| panic!("{}: {why}", case.req.path));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_retry() {
    let suite = Suite::start("retry", &["retry.yaml"]).await;
    for (path, code, succeed_after, want) in [
        ("/retry/code-500-attempts-3", 500, 2, 200),
        ("/retry/code-500-attempts-3", 500, 4, 500),
        ("/retry/code-500-attempts-3", 503, 2, 503),
        ("/retry/code-all-attempts-2", 500, 1, 200),
        ("/retry/code-all-attempts-2", 500, 3, 500),
        ("/retry/code-all-attempts-2", 502, 1, 200),
        ("/retry/code-all-attempts-2", 502, 3, 502),
        ("/retry/code-all-attempts-2", 503, 1, 200),
        ("/retry/code-all-attempts-2", 503, 3, 503),
        ("/retry/code-all-attempts-2", 504, 1, 200),
        ("/retry/code-all-attempts-2", 504, 3, 504),
    ] {
        for _ in 0..3 {
            let target = format!(
                "{path}?responseCode={code}&succeedAfter={succeed_after}&uuid={}",
                fastrand::u64(..)
            );
            let case = match want {
                200 => Case::to(&target, V3),
                status => Case::status(&target, status),
            };
            let got = roundtrip(suite.same_namespace(), &case.req, &suite.ca).await;
            super::compare::compare(&case.req, &case.exp, &got)
                .unwrap_or_else(|why| panic!("{path} {code} after {succeed_after}: {why}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_backend_protocol_h2c() {
    let suite = Suite::start("h2c", &["backend-protocol-h2c.yaml"]).await;
    let case = Case::to("/", V1).proto(Proto::H2c);
    let got = roundtrip(suite.same_namespace(), &case.req, &suite.ca).await;
    super::compare::compare(&case.req, &case.exp, &got).unwrap();
    assert_eq!(
        got.echo.unwrap()["proto"],
        "HTTP/2.0",
        "the backend was asked over h2c"
    );
}
