//! `ext_authz` over HTTP (forward auth) against the test's own service:
//! allow with headers upstream, deny with the service's status, headers
//! and body, the body sent along, timeouts and both failure modes, the
//! cache, metrics; over each client protocol.

use super::{auth_service::AuthService, each_protocol, setup};

fn authz(service: std::net::SocketAddr, extra: &str) -> String {
    format!(
        "ext_authz: {{ http: \"http://{service}/auth\", upstream_headers: [x-auth-user, x-auth-role, x-authz-saw]{extra} }}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_auth_allows_with_headers_and_denies_with_the_services_answer() {
    let service = AuthService::start().await;
    let middleware = format!(
        "middleware:\n  check: {{ {} }}\n",
        authz(service.addr, ", body: 1KiB")
    );
    let (_echo, certs, proxy) = setup(
        &middleware,
        "  - { path: /, chain: [check], upstream: echo }\n",
    )
    .await;
    let addr = proxy.addr();

    let asked = [("x-user", "bob"), ("x-forwarded-uri", "/forged")];
    for reply in each_protocol(addr, &certs, "POST", "/allowed/x?a=1", &asked, b"hello").await {
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            reply.upstream_saw("x-auth-user").as_deref(),
            Some("bob"),
            "{}",
            reply.protocol
        );
        assert_eq!(reply.upstream_saw("x-auth-role").as_deref(), Some("admin"));
        assert_eq!(
            reply.upstream_saw("x-authz-saw").as_deref(),
            Some("POST /allowed/x?a=1 proto=https host=localhost for=127.0.0.1 body=5"),
            "{}",
            reply.protocol
        );
        assert_eq!(
            reply.upstream_saw("x-not-trusted"),
            None,
            "an unlisted header passed"
        );
        assert!(reply.body.contains("body-bytes: 5"), "{reply:?}");
    }
    for reply in each_protocol(addr, &certs, "GET", "/deny/this", &[], b"").await {
        assert_eq!(reply.status, 401, "{reply:?}");
        assert_eq!(reply.body, "denied for /deny/this", "{}", reply.protocol);
        assert_eq!(
            reply.header("www-authenticate"),
            Some("Basic realm=\"authz\"")
        );
        assert_eq!(reply.header("x-deny-reason"), Some("nope"));
        assert_eq!(reply.header("content-type"), Some("text/plain"));
    }
    let metrics = super::admin_get(&proxy, "/metrics").await;
    assert!(
        metrics.contains(
            "sluice_ext_authz_decisions_total{middleware=\"check\",result=\"allowed\"} 3"
        ) && metrics
            .contains("sluice_ext_authz_decisions_total{middleware=\"check\",result=\"denied\"} 3"),
        "{metrics}"
    );
}

/// A client's own copy of a header the service is trusted to set never
/// reaches the upstream, even when the service sets none.
async fn forged_header_is_removed(header: &str) {
    let service = AuthService::start().await;
    let middleware = format!("middleware:\n  check: {{ {} }}\n", authz(service.addr, ""));
    let (_echo, certs, proxy) = setup(
        &middleware,
        "  - { path: /, chain: [check], upstream: echo }\n",
    )
    .await;
    let forged = [(header, "forged-by-client")];
    for reply in each_protocol(proxy.addr(), &certs, "GET", "/bare", &forged, b"").await {
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            reply.upstream_saw(header),
            None,
            "{header} forged over {}",
            reply.protocol
        );
    }
    for reply in each_protocol(proxy.addr(), &certs, "GET", "/set", &forged, b"").await {
        let values: Vec<_> = reply
            .body
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with(&format!("{header}:")))
            .collect();
        assert_eq!(
            values.len(),
            1,
            "{header} over {}: {values:?}",
            reply.protocol
        );
        assert!(!values[0].contains("forged-by-client"), "{values:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_auth_removes_a_forged_x_auth_user() {
    forged_header_is_removed("x-auth-user").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_auth_removes_a_forged_x_auth_role() {
    forged_header_is_removed("x-auth-role").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_auth_removes_a_forged_x_authz_saw() {
    forged_header_is_removed("x-authz-saw").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_auth_times_out_and_fails_open_or_closed() {
    let service = AuthService::start().await;
    let closed_port = testkit::closed_port();
    let middleware = format!(
        "middleware:\n  closed: {{ {} }}\n  open: {{ {} }}\n  gone: {{ ext_authz: {{ http: \"http://{closed_port}/\", upstream_headers: [x-auth-user] }} }}\n",
        authz(service.addr, ", timeout: 300ms"),
        authz(service.addr, ", timeout: 300ms, on_failure: fail_open"),
    );
    let routes = "  - { path: /closed, chain: [closed], upstream: echo }\n  - { path: /open, chain: [open], upstream: echo }\n  - { path: /gone, chain: [gone], upstream: echo }\n";
    let (_echo, certs, proxy) = setup(&middleware, routes).await;
    let forged = [("x-auth-user", "forged")];
    for reply in each_protocol(proxy.addr(), &certs, "GET", "/closed/slow", &forged, b"").await {
        assert_eq!(reply.status, 504, "{reply:?}");
        assert!(reply.body.contains("did not decide in time"), "{reply:?}");
        assert!(
            !reply.body.contains(&service.addr.to_string()),
            "names the service: {reply:?}"
        );
    }
    for reply in each_protocol(proxy.addr(), &certs, "GET", "/open/slow", &forged, b"").await {
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            reply.upstream_saw("x-auth-user"),
            None,
            "fail_open kept a forged header"
        );
    }
    for reply in each_protocol(proxy.addr(), &certs, "GET", "/gone", &[], b"").await {
        assert_eq!(reply.status, 503, "{reply:?}");
        assert!(
            !reply.body.contains(&closed_port.port().to_string()),
            "{reply:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_auth_remembers_allow_answers_by_the_chosen_headers() {
    let service = AuthService::start().await;
    let middleware = format!(
        "middleware:\n  check: {{ {} }}\n",
        authz(service.addr, ", cache: { ttl: 1m, key: [x-user] }")
    );
    let (_echo, certs, proxy) = setup(
        &middleware,
        "  - { path: /, chain: [check], upstream: echo }\n",
    )
    .await;
    for user in ["carol", "carol", "dave"] {
        for reply in
            each_protocol(proxy.addr(), &certs, "GET", "/c", &[("x-user", user)], b"").await
        {
            assert_eq!(
                reply.upstream_saw("x-auth-user").as_deref(),
                Some(user),
                "{reply:?}"
            );
        }
    }
    assert_eq!(service.asked(), 2, "one question per distinct x-user");
    let denied = each_protocol(
        proxy.addr(),
        &certs,
        "GET",
        "/deny",
        &[("x-user", "carol")],
        b"",
    )
    .await;
    assert!(
        denied.iter().all(|r| r.status == 401),
        "a denial is never cached: {denied:?}"
    );
    assert_eq!(service.asked(), 5);
}

/// A credential a handler before `ext_authz` checked and took out of the
/// upstream request (`api_key`'s header) is not sent to the service
/// either, unless `request_headers` names it: the service is asked about
/// the request as the upstream would get it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_auth_is_not_sent_a_key_that_api_key_took_out() {
    let service = AuthService::start().await;
    let key = "key-0123456789abcdef";
    let middleware = format!(
        "middleware:\n  api_key: {{ keys: {{ ops: {key} }}, header: x-api-key }}\n  \
         check: {{ {} }}\n  listed: {{ {} }}\n",
        authz(service.addr, ""),
        authz(service.addr, ", request_headers: [x-api-key]")
    );
    let (_echo, certs, proxy) = setup(
        &middleware,
        "  - { path: /keyed/default, chain: [api_key, check], upstream: echo }\n  \
         - { path: /keyed/listed, chain: [api_key, listed], upstream: echo }\n",
    )
    .await;
    let sent = [("x-api-key", key)];
    let cases = [
        ("/keyed/default", "x-api-key=none"),
        ("/keyed/listed", &*format!("x-api-key={key}")),
    ];
    for (path, saw) in cases {
        for reply in each_protocol(proxy.addr(), &certs, "GET", path, &sent, b"").await {
            assert_eq!(reply.status, 200, "{reply:?}");
            assert_eq!(
                reply.upstream_saw("x-authz-saw").as_deref(),
                Some(saw),
                "{path} over {}",
                reply.protocol
            );
            assert_eq!(
                reply.upstream_saw("x-api-key"),
                None,
                "{path} over {}",
                reply.protocol
            );
        }
    }
}
