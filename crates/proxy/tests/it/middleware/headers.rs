//! Handlers that edit headers: correlation ids, `headers:` edits both
//! ways, and CORS (preflights answered in the proxy).

use std::sync::atomic::Ordering;

use super::{proxy_with, upstream_saw};
use crate::support::Echo;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correlation_ids_are_kept_made_and_echoed() {
    let echo = Echo::start("e").await;
    let proxy = proxy_with(
        echo.addr,
        "",
        "  - { path: /, chain: [correlation], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;

    let response = conn.get("/").await;
    let made = upstream_saw(&response.text(), "x-correlation-id").unwrap();
    assert_eq!(made.len(), 36, "{made}");
    assert_eq!(&made[14..15], "4", "a UUID v4: {made}");
    assert_eq!(response.header("x-correlation-id"), Some(made.as_str()));
    let trace = upstream_saw(&response.text(), "traceparent").unwrap();
    assert!(trace.starts_with("00-") && trace.len() == 55, "{trace}");

    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let response = conn
        .request(
            "GET",
            "/",
            &[
                "X-Correlation-Id: abc-123",
                "X-Traceability-Id: t-9",
                &format!("traceparent: {parent}"),
            ],
            b"",
        )
        .await;
    let text = response.text();
    assert_eq!(upstream_saw(&text, "x-correlation-id").unwrap(), "abc-123");
    assert_eq!(upstream_saw(&text, "x-traceability-id").unwrap(), "t-9");
    let continued = upstream_saw(&text, "traceparent").unwrap();
    assert_eq!(&continued[..36], &parent[..36], "same trace id");
    assert_ne!(&continued[36..52], &parent[36..52], "a new span id");
    // Exactly one correlation field reaches the upstream.
    assert_eq!(text.matches("abc-123").count(), 1, "{text}");

    // A hostile id (too long, or with spaces) is replaced, never forwarded.
    let long = "x".repeat(200);
    let response = conn
        .request("GET", "/", &[&format!("X-Correlation-Id: {long}")], b"")
        .await;
    let replaced = upstream_saw(&response.text(), "x-correlation-id").unwrap();
    assert_eq!(replaced.len(), 36);
    assert!(!response.text().contains(&long));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_are_set_added_and_removed_both_ways() {
    let echo = Echo::start("e").await;
    let middleware = "middleware:\n  edit:\n    headers:\n      request: { set: { x-env: prod }, add: { x-extra: one }, remove: [x-secret] }\n      response: { set: { x-served-by: sluice }, remove: [x-upstream-hop] }\n";
    let proxy = proxy_with(
        echo.addr,
        middleware,
        "  - { path: /, chain: [edit], upstream: echo }\n  - { path: /plain, chain: [], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    let response = conn
        .request(
            "GET",
            "/",
            &["X-Env: dev", "X-Secret: s3cret", "X-Extra: zero"],
            b"",
        )
        .await;
    let text = response.text();
    assert_eq!(upstream_saw(&text, "x-env").unwrap(), "prod");
    assert!(!text.contains("dev") && !text.contains("s3cret"), "{text}");
    assert!(
        text.contains("X-Extra: zero") && text.contains("x-extra: one"),
        "{text}"
    );
    assert_eq!(response.header("x-served-by"), Some("sluice"));
    assert_eq!(response.header("x-upstream-hop"), None);

    // An empty chain changes nothing.
    let response = conn.request("GET", "/plain", &["X-Secret: s"], b"").await;
    assert!(response.text().contains("X-Secret: s"));
    assert_eq!(response.header("x-upstream-hop"), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_answers_preflights_and_marks_allowed_origins() {
    let echo = Echo::start("e").await;
    let middleware = "middleware:\n  cors: { origins: [\"https://app.example\"], methods: [GET, POST], headers: [content-type, x-api-key], expose_headers: [x-request-id], max_age: 1m }\n";
    let proxy = proxy_with(
        echo.addr,
        middleware,
        "  - { path: /, chain: [cors], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;

    let preflight = conn
        .request(
            "OPTIONS",
            "/v1/pets",
            &[
                "Origin: https://app.example",
                "Access-Control-Request-Method: POST",
                "Access-Control-Request-Headers: Content-Type, X-Api-Key",
            ],
            b"",
        )
        .await;
    assert_eq!(preflight.status, 204);
    assert_eq!(
        preflight.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(
        preflight.header("access-control-allow-methods"),
        Some("GET, POST")
    );
    assert_eq!(
        preflight.header("access-control-allow-headers"),
        Some("content-type, x-api-key")
    );
    assert_eq!(preflight.header("access-control-max-age"), Some("60"));

    for (origin, method, headers) in [
        ("https://evil.example", "POST", ""),
        ("https://app.example", "DELETE", ""),
        ("https://app.example", "POST", "X-Other"),
    ] {
        let mut fields = vec![
            format!("Origin: {origin}"),
            format!("Access-Control-Request-Method: {method}"),
        ];
        if !headers.is_empty() {
            fields.push(format!("Access-Control-Request-Headers: {headers}"));
        }
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        let refused = conn.request("OPTIONS", "/", &fields, b"").await;
        assert_eq!(refused.status, 403, "{origin} {method} {headers}");
        assert_eq!(refused.header("access-control-allow-origin"), None);
    }
    assert_eq!(
        echo.requests.load(Ordering::SeqCst),
        0,
        "preflights stay in the proxy"
    );

    let allowed = conn
        .request("GET", "/", &["Origin: https://app.example"], b"")
        .await;
    assert_eq!(allowed.status, 200);
    assert_eq!(
        allowed.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(
        allowed.header("access-control-expose-headers"),
        Some("x-request-id")
    );
    let other = conn
        .request("GET", "/", &["Origin: https://evil.example"], b"")
        .await;
    assert_eq!(other.status, 200);
    assert_eq!(other.header("access-control-allow-origin"), None);
}
