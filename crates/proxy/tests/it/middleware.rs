//! Each middleware handler through the proxy over real sockets: what it
//! does to good requests and how it refuses hostile ones.

use crate::support;

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use support::{Echo, Proxy};
use testkit::{Behaviour, FakeServer, RawConn};

/// A proxy with one `echo` upstream at `addr`, the given middleware
/// section, and routes (`- { path: ..., chain: ..., upstream: echo }` lines).
fn proxy_with(addr: std::net::SocketAddr, middleware: &str, routes: &str) -> Proxy {
    Proxy::start(&format!(
        "upstreams:\n  echo:\n    hosts: [\"http://{addr}\"]\n{middleware}routes:\n{routes}"
    ))
}

/// The value of `name` in the request head the echo upstream received.
fn upstream_saw(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

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
async fn body_limit_answers_413_before_the_upstream_sees_anything() {
    let echo = Echo::start("e").await;
    let proxy = proxy_with(
        echo.addr,
        "middleware:\n  small: { body_limit: { max: 1KiB } }\n",
        "  - { path: /, chain: [small], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    assert_eq!(
        conn.request("POST", "/", &[], &[b'a'; 1024]).await.status,
        200
    );
    let response = conn.request("POST", "/", &[], &[b'a'; 1025]).await;
    assert_eq!(response.status, 413);
    assert_eq!(response.json()["status"], 413);

    // A chunked body is cut off once it passes the limit.
    let mut conn = proxy.conn().await;
    conn.send(format!(
        "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n{}\r\n400\r\n{}\r\n0\r\n\r\n",
        "a".repeat(1024),
        "b".repeat(1024)
    ))
    .await;
    assert_eq!(conn.read_response(false).await.status, 413);
    assert_eq!(
        echo.requests.load(Ordering::SeqCst),
        1,
        "only the first POST"
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ip_filter_honours_trusted_forwarding_only_when_told() {
    let echo = Echo::start("e").await;
    let middleware =
        "middleware:\n  inside: { ip_filter: { allow: [10.0.0.0/8], deny: [10.9.0.0/16] } }\n";
    let routes = "  - { path: /, chain: [inside], upstream: echo }\n";
    let proxy = proxy_with(echo.addr, middleware, routes);
    let mut conn = proxy.conn().await;
    let refused = conn.get("/").await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.json()["status"], 403);
    // Without trust, a forged X-Forwarded-For changes nothing.
    let forged = conn
        .request("GET", "/", &["X-Forwarded-For: 10.1.1.1"], b"")
        .await;
    assert_eq!(forged.status, 403);
    drop(proxy);

    let trusted = Proxy::start(&format!(
        "upstreams:\n  echo:\n    hosts: [\"http://{}\"]\nforwarded: {{ trust: true }}\n{middleware}routes:\n{routes}",
        echo.addr
    ));
    let mut conn = trusted.conn().await;
    let ok = conn
        .request("GET", "/", &["X-Forwarded-For: 192.168.0.1, 10.1.1.1"], b"")
        .await;
    assert_eq!(ok.status, 200);
    let denied = conn
        .request("GET", "/", &["X-Forwarded-For: 10.9.1.1"], b"")
        .await;
    assert_eq!(denied.status, 403);
    assert_eq!(
        conn.get("/").await.status,
        403,
        "the peer 127.0.0.1 is not allowed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_delays_and_aborts() {
    let echo = Echo::start("e").await;
    let middleware = "middleware:\n  slow: { fault: { delay: { duration: 200ms, percent: 100 } } }\n  broken: { fault: { abort: { status: 503, percent: 100 } } }\n";
    let proxy = proxy_with(
        echo.addr,
        middleware,
        "  - { path: /slow, chain: [slow], upstream: echo }\n  - { path: /broken, chain: [broken], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    let started = Instant::now();
    assert_eq!(conn.get("/slow").await.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(200));
    let aborted = conn.get("/broken").await;
    assert_eq!(aborted.status, 503);
    assert!(aborted.json()["detail"].as_str().unwrap().contains("fault"));
    assert_eq!(echo.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_limit_answers_503_past_the_limit() {
    let slow = FakeServer::start(Behaviour::DelayEvery {
        nth: 1,
        delay: Duration::from_secs(2),
    });
    let proxy = proxy_with(
        slow.addr(),
        "middleware:\n  one: { concurrency_limit: { max: 1 } }\n",
        "  - { path: /, chain: [one], upstream: echo }\n",
    );
    let mut first = proxy.conn().await;
    first.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n").await;
    // The first holds the slot once the upstream has it (for 2 s).
    assert!(
        support::live::until(Duration::from_secs(5), || async { slow.requests() == 1 }).await,
        "the first request never reached the upstream"
    );
    let mut second = proxy.conn().await;
    let refused = second.get("/").await;
    assert_eq!(refused.status, 503);
    assert!(refused.json()["detail"]
        .as_str()
        .unwrap()
        .contains("in flight"));
    assert_eq!(first.read_response(false).await.status, 200);
    // The slot is free again once the first request is done.
    assert_eq!(second.get("/").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_answers_429_with_retry_after() {
    let echo = Echo::start("e").await;
    let proxy = proxy_with(
        echo.addr,
        "middleware:\n  rate_limit: { rate: 2/m, burst: 2 }\n  by_key: { rate_limit: { key: \"header:x-api-key\", rate: 1/m } }\n",
        "  - { path: /ip, chain: [rate_limit], upstream: echo }\n  - { path: /key, chain: [by_key], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    let before = Instant::now();
    assert_eq!(conn.get("/ip").await.status, 200);
    assert_eq!(conn.get("/ip").await.status, 200);
    let limited = conn.get("/ip").await;
    let taken = before.elapsed();
    assert_eq!(limited.status, 429);
    // 2/m: a token every 30 s, the bucket emptied `taken` ago at most;
    // whole seconds, rounded up. 30 unless the three took a second or more.
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    let soonest = 30 - taken.as_secs().min(29);
    assert!((soonest..=30).contains(&retry), "{retry} after {taken:?}");
    assert_eq!(limited.header("ratelimit-limit"), Some("2"));
    assert_eq!(limited.header("ratelimit-remaining"), Some("0"));

    // Keys are separate buckets.
    assert_eq!(
        conn.request("GET", "/key", &["X-Api-Key: a"], b"")
            .await
            .status,
        200
    );
    assert_eq!(
        conn.request("GET", "/key", &["X-Api-Key: b"], b"")
            .await
            .status,
        200
    );
    assert_eq!(
        conn.request("GET", "/key", &["X-Api-Key: a"], b"")
            .await
            .status,
        429
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_access_log_record_each_request() {
    let echo = Echo::start("e").await;
    let log = std::env::temp_dir().join(format!("sluice-access-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let middleware = format!(
        "middleware:\n  access_log: {{ path: \"{}\", headers: [user-agent, authorization, x-api-key], mask: [x-api-key] }}\n  deny: {{ ip_filter: {{ deny: [127.0.0.1] }} }}\n",
        log.display()
    );
    let proxy = proxy_with(
        echo.addr,
        &middleware,
        "  - { path: /v1, chain: [correlation, metrics, access_log], upstream: echo }\n  - { path: /denied, chain: [metrics, access_log, deny], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    for _ in 0..3 {
        let response = conn
            .request(
                "GET",
                "/v1/pets?token=s3cret",
                &[
                    "User-Agent: t/1",
                    "Authorization: Bearer abc.def.ghi",
                    "X-Api-Key: k3y",
                ],
                b"",
            )
            .await;
        assert_eq!(response.status, 200);
    }
    assert_eq!(
        conn.request("POST", "/denied", &[], b"{}").await.status,
        403
    );

    let metrics = RawConn::connect(proxy.admin())
        .await
        .get("/metrics")
        .await
        .text();
    assert!(
        metrics.contains("sluice_http_request_duration_seconds_count{route=\"/v1\",method=\"GET\",status=\"2xx\",upstream=\"echo\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_http_request_duration_seconds_count{route=\"/denied\",method=\"POST\",status=\"4xx\",upstream=\"\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("sluice_access_log_dropped_total 0"));

    // The writer thread flushes when its queue runs dry.
    let deadline = Instant::now() + Duration::from_secs(5);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= 4 || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{text}");
    let first = &lines[0];
    assert_eq!(first["status"], 200);
    assert_eq!(first["method"], "GET");
    assert_eq!(first["path"], "/v1/pets");
    assert_eq!(first["route"], "/v1");
    assert_eq!(first["upstream"], "echo");
    assert_eq!(first["client"], "127.0.0.1");
    assert_eq!(first["headers"]["user-agent"], "t/1");
    assert_eq!(first["headers"]["authorization"], "***");
    assert_eq!(first["headers"]["x-api-key"], "***");
    assert_eq!(first["correlation_id"].as_str().unwrap().len(), 36);
    assert!(first["duration_ms"].as_f64().unwrap() >= 0.0);
    assert!(
        !text.contains("s3cret") && !text.contains("abc.def") && !text.contains("k3y"),
        "{text}"
    );
    assert_eq!(lines[3]["status"], 403);
    assert_eq!(lines[3]["upstream"], "");
    let _ = std::fs::remove_file(&log);
}

/// A JWKS file holding the public keys of `keys`.
fn write_jwks(path: &std::path::Path, keys: &[&jwt::GeneratedKey]) {
    let mut all = Vec::new();
    for key in keys {
        let doc: serde_json::Value = serde_json::from_str(&key.jwks_json()).unwrap();
        all.extend(doc["keys"].as_array().unwrap().iter().cloned());
    }
    std::fs::write(path, serde_json::json!({ "keys": all }).to_string()).unwrap();
}

fn claims(scope: &str, exp_offset: i64) -> serde_json::Value {
    let now = jwt::unix_now() as i64;
    serde_json::json!({
        "iss": "https://issuer.example",
        "aud": "petstore",
        "sub": "alice",
        "scope": scope,
        "iat": now,
        "exp": now + exp_offset,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_admits_good_tokens_refuses_bad_ones_and_follows_key_rotation() {
    let echo = Echo::start("e").await;
    let first = jwt::generate_key(jwt::Algorithm::ES256, "k1").unwrap();
    let jwks = std::env::temp_dir().join(format!("sluice-jwks-{}.json", std::process::id()));
    write_jwks(&jwks, &[&first]);
    let middleware = format!(
        "middleware:\n  jwt: {{ jwks: \"{}\", algorithms: [ES256, RS256], issuer: \"https://issuer.example\", audience: [petstore], scopes: [\"pets:read\"], forward_claims: {{ sub: x-user }} }}\n",
        jwks.display()
    );
    let proxy = proxy_with(
        echo.addr,
        &middleware,
        "  - { path: /, chain: [jwt], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    let bearer = |token: &str| format!("Authorization: Bearer {token}");

    let missing = conn.get("/").await;
    assert_eq!(missing.status, 401);
    assert_eq!(
        missing.header("www-authenticate"),
        Some("Bearer realm=\"sluice\"")
    );

    let good = first.sign(&claims("pets:read pets:write", 600)).unwrap();
    let response = conn
        .request("GET", "/", &[&bearer(&good), "X-User: admin"], b"")
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(upstream_saw(&response.text(), "x-user").unwrap(), "alice");
    assert!(
        !response.text().contains("admin"),
        "a forged claim header is dropped"
    );

    let no_scope = first.sign(&claims("pets:write", 600)).unwrap();
    let forbidden = conn.request("GET", "/", &[&bearer(&no_scope)], b"").await;
    assert_eq!(forbidden.status, 403);
    assert!(forbidden
        .header("www-authenticate")
        .unwrap()
        .contains("error=\"insufficient_scope\""));

    let expired = first.sign(&claims("pets:read", -3600)).unwrap();
    let mut wrong_issuer = claims("pets:read", 600);
    wrong_issuer["iss"] = "https://evil.example".into();
    let wrong_issuer = first.sign(&wrong_issuer).unwrap();
    let none = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(claims("pets:read", 600).to_string().as_bytes())
    );
    let (head, rest) = good.split_once('.').unwrap();
    let tampered = format!(
        "{head}.{}",
        rest.replacen(|c: char| c.is_ascii_alphanumeric(), "A", 1)
    );
    let oversize = format!("{good}{}", "A".repeat(9000));
    for (what, token) in [
        ("expired", expired.as_str()),
        ("wrong issuer", wrong_issuer.as_str()),
        ("alg none", none.as_str()),
        ("tampered", tampered.as_str()),
        ("bad base64", "a$b.c$d.e$f"),
        ("oversize", oversize.as_str()),
    ] {
        let refused = conn.request("GET", "/", &[&bearer(token)], b"").await;
        assert_eq!(refused.status, 401, "{what}");
        let challenge = refused.header("www-authenticate").unwrap();
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        assert!(
            !challenge.contains(token),
            "{what}: the token is never echoed"
        );
    }
    let basic = conn
        .request("GET", "/", &["Authorization: Basic YTpi"], b"")
        .await;
    assert_eq!(basic.status, 401);
    assert_eq!(
        echo.requests.load(Ordering::SeqCst),
        1,
        "only the good token got through"
    );

    // Rotation: a token signed by a key added to the JWKS file is admitted
    // after one refetch, without a restart.
    let second = jwt::generate_key(jwt::Algorithm::ES256, "k2").unwrap();
    write_jwks(&jwks, &[&first, &second]);
    let rotated = second.sign(&claims("pets:read", 600)).unwrap();
    assert_eq!(
        conn.request("GET", "/", &[&bearer(&rotated)], b"")
            .await
            .status,
        200
    );
    // Another unknown kid right after finds the refetch rate-limited (one
    // per 10 s): its key is in the file already, yet it is not read again.
    let third = jwt::generate_key(jwt::Algorithm::ES256, "k3").unwrap();
    write_jwks(&jwks, &[&first, &second, &third]);
    let unknown = third.sign(&claims("pets:read", 600)).unwrap();
    assert_eq!(
        conn.request("GET", "/", &[&bearer(&unknown)], b"")
            .await
            .status,
        401
    );
    let _ = std::fs::remove_file(&jwks);
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_checks_requests_against_the_openapi_spec() {
    let echo = Echo::start("e").await;
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../specs/petstore.yaml");
    let proxy = proxy_with(
        echo.addr,
        &format!("middleware:\n  validate: {{ openapi: \"{spec}\", max_body_bytes: 256 }}\n"),
        "  - { path: /, chain: [validate], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/v1/pets").await.status, 200);
    assert_eq!(conn.get("/v1/pets?limit=10").await.status, 200);

    let invalid = conn.get("/v1/pets?limit=0").await;
    assert_eq!(invalid.status, 400);
    assert_eq!(invalid.json()["errors"][0]["pointer"], "/query/limit");

    let pet = br#"{"id":3,"name":"kitty","tag":"cat"}"#;
    let json = ["Content-Type: application/json"];
    let created = conn.request("POST", "/v1/pets", &json, pet).await;
    assert!(created.status == 200, "{}", created.text());
    assert!(
        created.text().contains("body-bytes: 35"),
        "the body reached the upstream whole"
    );

    // Every violation is listed; the connection goes on after the 400.
    let bad = conn
        .request("POST", "/v1/pets", &json, br#"{"id":"three","tag":7}"#)
        .await;
    assert_eq!(bad.status, 400);
    let errors = bad.json()["errors"].as_array().unwrap().clone();
    assert!(errors.len() >= 2, "{errors:?}");
    assert!(errors
        .iter()
        .all(|e| e["pointer"].as_str().unwrap().starts_with("/body")));
    assert_eq!(
        conn.request("POST", "/v1/pets", &json, b"{not json")
            .await
            .status,
        400
    );
    let wrong_type = conn
        .request("POST", "/v1/pets", &["Content-Type: text/plain"], pet)
        .await;
    assert_eq!(wrong_type.status, 415);
    let too_big = conn
        .request(
            "POST",
            "/v1/pets",
            &json,
            format!("{{\"name\":\"{}\"}}", "x".repeat(300)).as_bytes(),
        )
        .await;
    assert_eq!(too_big.status, 413);

    let mut conn = proxy.conn().await;
    let not_allowed = conn.request("DELETE", "/v1/pets", &[], b"").await;
    assert_eq!(not_allowed.status, 405);
    assert_eq!(not_allowed.header("allow"), Some("GET, POST"));
    assert_eq!(conn.get("/v1/nope").await.status, 404);
    // A body the validator must see has to come with a length.
    conn.send("POST /v1/pets HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 411);
    assert_eq!(
        echo.requests.load(Ordering::SeqCst),
        3,
        "only the valid requests got through"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_keys_come_from_a_jwks_url() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let echo = Echo::start("e").await;
    let key = jwt::generate_key(jwt::Algorithm::EdDSA, "url-key").unwrap();
    let body = key.jwks_json();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jwks_addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            // Chunked, to take the longer way through the fetcher.
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    let middleware = format!(
        "middleware:\n  jwt: {{ jwks_url: \"http://{jwks_addr}/.well-known/jwks.json?secret=x\", algorithms: [EdDSA] }}\n"
    );
    let proxy = proxy_with(
        echo.addr,
        &middleware,
        "  - { path: /, chain: [jwt], upstream: echo }\n",
    );
    let token = key.sign(&claims("any", 600)).unwrap();
    let mut conn = proxy.conn().await;
    let response = conn
        .request(
            "GET",
            "/",
            &[&format!("Authorization: Bearer {token}")],
            b"",
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
    // The URL's query may carry credentials: /config does not show it.
    let config = RawConn::connect(proxy.admin())
        .await
        .get("/config")
        .await
        .text();
    assert!(
        config.contains("jwks.json") && !config.contains("secret=x"),
        "{config}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_can_key_on_a_verified_claim() {
    let echo = Echo::start("e").await;
    let key = jwt::generate_key(jwt::Algorithm::ES256, "k").unwrap();
    let jwks = std::env::temp_dir().join(format!("sluice-jwks-claim-{}.json", std::process::id()));
    write_jwks(&jwks, &[&key]);
    let middleware = format!(
        "middleware:\n  jwt: {{ jwks: \"{}\", algorithms: [ES256] }}\n  per_user: {{ rate_limit: {{ key: \"claim:sub\", rate: 1/m }} }}\n",
        jwks.display()
    );
    let proxy = proxy_with(
        echo.addr,
        &middleware,
        "  - { path: /, chain: [jwt, per_user], upstream: echo }\n",
    );
    let mut conn = proxy.conn().await;
    let token_for = |sub: &str| {
        let mut claims = claims("", 600);
        claims["sub"] = sub.into();
        format!("Authorization: Bearer {}", key.sign(&claims).unwrap())
    };
    let (alice, bob) = (token_for("alice"), token_for("bob"));
    assert_eq!(conn.request("GET", "/", &[&alice], b"").await.status, 200);
    assert_eq!(conn.request("GET", "/", &[&bob], b"").await.status, 200);
    // A second token of alice's shares her bucket: the key is the claim, not the token.
    let alice_again = token_for("alice");
    assert_eq!(
        conn.request("GET", "/", &[&alice_again], b"").await.status,
        429
    );
    let _ = std::fs::remove_file(&jwks);
}

/// An upstream answering every request with `status`, `content_type` and `body`.
async fn fixed_upstream(
    status: &'static str,
    content_type: &'static str,
    body: &'static str,
) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    let answer = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_reports_responses_that_break_the_spec_without_breaking_clients() {
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../specs/petstore.yaml");
    let good = testkit::serve(backends::Backend::Petstore);
    let bad = fixed_upstream("200 OK", "application/json", r#"[{"id":"one","name":7}]"#).await;
    let proxy = Proxy::start(&format!(
        "upstreams:\n  good: {{ hosts: [\"http://{}\"] }}\n  bad: {{ hosts: [\"http://{bad}\"] }}\nmiddleware:\n  validate: {{ openapi: \"{spec}\", responses: true }}\nroutes:\n  - {{ path: /, chain: [validate], upstream: good }}\n  - {{ path: /, host: bad.example, chain: [validate], upstream: bad }}\n",
        good.addr()
    ));
    let failures = || counter(proxy.admin(), "sluice_validate_response_failures_total");
    let mut conn = proxy.conn().await;
    let response = conn.get("/v1/pets").await;
    assert_eq!(response.status, 200);
    assert!(response.text().contains("catten"));
    assert_eq!(failures().await, 0, "the petstore answers as its spec says");

    conn.send("GET /v1/pets HTTP/1.1\r\nHost: bad.example\r\n\r\n")
        .await;
    let response = conn.read_response(false).await;
    assert_eq!(response.status, 200, "the client still gets the answer");
    assert_eq!(response.text(), r#"[{"id":"one","name":7}]"#);
    assert_eq!(failures().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_access_log_queue_drops_and_counts_lines_without_stalling() {
    let echo = Echo::start("e").await;
    let log = std::env::temp_dir().join(format!("sluice-access-drop-{}.log", std::process::id()));
    let proxy = proxy_with(
        echo.addr,
        &format!(
            "middleware:\n  access_log: {{ path: \"{}\", queue: 1 }}\n",
            log.display()
        ),
        "  - { path: /, chain: [access_log], upstream: echo }\n",
    );
    // 200 pipelined requests arrive far faster than the writer's 20 ms batches.
    let mut conn = proxy.conn().await;
    conn.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n".repeat(200))
        .await;
    for _ in 0..200 {
        assert_eq!(conn.read_response(false).await.status, 200);
    }
    let dropped = || counter(proxy.admin(), "sluice_access_log_dropped_total");
    let written = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count() as u64
    };
    // Every request's line is either written or counted as dropped: once the
    // writer has drained its queue the two add up to the 200 exactly.
    support::live::until(Duration::from_secs(10), || async {
        written() + dropped().await >= 200
    })
    .await;
    let dropped = dropped().await;
    assert_eq!(written() + dropped, 200, "{dropped} dropped");
    // A queue of one cannot hold 200 lines that come faster than its
    // batches: some were dropped (a queue that blocked instead drops none).
    assert!(dropped > 0, "nothing dropped");
    let _ = std::fs::remove_file(&log);
}

/// The value of the unlabelled counter `name` on the admin's `/metrics`.
async fn counter(admin: std::net::SocketAddr, name: &str) -> u64 {
    let metrics = RawConn::connect(admin).await.get("/metrics").await.text();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
        .trim()
        .parse()
        .unwrap()
}
