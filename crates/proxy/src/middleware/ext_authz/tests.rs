//! The handler's own decisions, without a service: its settings, what the
//! service is asked, what an answer (or none) does to the request, and the
//! cache of allow answers. The calls themselves are tested over loopback
//! (tests/it/who_may_pass).

use super::*;

fn authorizer(yaml: &str) -> ExternalAuthorizer {
    try_authorizer(yaml).unwrap()
}

fn try_authorizer(yaml: &str) -> anyhow::Result<ExternalAuthorizer> {
    ExternalAuthorizer::new(&serde_saphyr::from_str(yaml).unwrap(), "authz")
}

const HTTP: &str = "http: http://127.0.0.1:9/check\n";

fn header_map(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    for (name, value) in pairs {
        headers.append(*name, HeaderValue::from_static(value));
    }
    headers
}

fn names(headers: &[(HeaderName, String)]) -> Vec<&str> {
    headers.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn settings_must_name_one_plain_http_service_and_a_budget() {
    for (yaml, why) in [
        ("timeout: 1s\n", "exactly one"),
        ("http: http://a/\ngrpc: http://b/\n", "exactly one"),
        ("http: https://auth.example/check\n", "http://"),
        ("grpc: https://authz.example/\n", "h2c"),
        ("http: http://127.0.0.1:9/\ntimeout: 0s\n", "timeout: 0"),
    ] {
        let err = try_authorizer(yaml).unwrap_err().to_string();
        assert!(err.contains(why), "{yaml}: {err}");
    }
    assert!(try_authorizer("grpc: http://127.0.0.1:9\n").is_ok());
}

/// By default the service gets the client's fields but no framing or
/// hop-by-hop ones, no `X-Forwarded-*` of the client's (it gets ours),
/// and no credential a handler before it took out of the request.
#[test]
fn the_service_is_asked_about_the_request_without_what_is_not_its_business() {
    let auth = authorizer(HTTP);
    let headers = header_map(&[
        ("cookie", "a=1"),
        ("connection", "keep-alive"),
        ("content-length", "3"),
        ("te", "trailers"),
        ("host", "shop.example"),
        ("x-forwarded-for", "6.6.6.6"),
        ("x-api-key", "secret"),
        ("accept", "text/html"),
    ]);
    let request = RequestView {
        method: &http::Method::POST,
        path: "/cart",
        host: Some("shop.example"),
        secure: true,
        body_len: Some(3),
        body: Some(b"abc"),
        ..RequestView::get(&headers)
    };
    let removed = [HeaderName::from_static("x-api-key")];
    let asked = auth.asked(&request, Some("item=7"), &removed);
    assert_eq!(names(&asked.headers), ["cookie", "accept"]);
    assert_eq!(
        (
            asked.method.as_str(),
            asked.uri.as_str(),
            asked.host.as_str(),
            asked.scheme
        ),
        ("POST", "/cart?item=7", "shop.example", "https")
    );
    assert_eq!(asked.body.as_deref(), Some(&b"abc"[..]));
    assert_eq!(auth.asked(&request, Some(""), &removed).uri, "/cart");
    // A list names exactly what the service gets, a credential too.
    let listed = authorizer(&format!(
        "{HTTP}request_headers: [x-api-key, authorization]\n"
    ));
    assert_eq!(
        names(&listed.asked(&request, None, &removed).headers),
        ["x-api-key"]
    );
}

#[test]
fn the_clients_own_trusted_fields_are_dropped_whatever_the_decision() {
    let auth = authorizer(&format!("{HTTP}upstream_headers: [x-user-id, x-roles]\n"));
    let headers = header_map(&[("x-user-id", "admin")]);
    let mut exchange = Exchange::default();
    let flow = auth.request(&RequestView::get(&headers), &mut exchange);
    assert!(matches!(flow, Flow::Wait(_)), "{flow:?}");
    assert!(exchange.request_headers.drops(b"x-user-id"));
    assert!(exchange.request_headers.drops(b"x-roles"));
}

fn name(text: &'static str) -> HeaderName {
    HeaderName::from_static(text)
}

fn value(text: &'static str) -> HeaderValue {
    HeaderValue::from_static(text)
}

fn allow() -> Decision {
    Decision::Allow {
        upstream: vec![
            (name("x-user-id"), value("42")),
            (name("x-injected"), value("1")),
        ],
        remove: vec![name("cookie"), name("host")],
        client: vec![
            (name("x-session"), value("s")),
            (name("transfer-encoding"), value("chunked")),
        ],
    }
}

/// What an `Apply` does to a fresh exchange.
fn applied(flow: Flow) -> Exchange {
    let Flow::Apply(apply) = flow else {
        panic!("not an allow: {flow:?}");
    };
    let mut exchange = Exchange::default();
    assert!(matches!(apply(&mut exchange), Flow::Next));
    exchange
}

#[test]
fn an_allow_sets_only_the_trusted_fields_and_never_framing() {
    let auth = authorizer(&format!("{HTTP}upstream_headers: [x-user-id]\n"));
    let exchange = applied(auth.shared.flow(Ok(allow()), None));
    let upstream = &exchange.request_headers;
    assert_eq!(
        upstream.add,
        [(name("x-user-id"), value("42"))],
        "x-injected is not trusted"
    );
    assert_eq!(upstream.remove, [name("cookie")], "the Host stays");
    assert_eq!(
        exchange.response_headers.add,
        [(name("x-session"), value("s"))]
    );
    assert_eq!(auth.shared.counts.allowed.load(Relaxed), 1);
}

#[test]
fn a_denial_is_the_clients_answer_without_framing_fields() {
    let auth = authorizer(HTTP);
    let denial = |body: &'static [u8]| Decision::Deny {
        status: StatusCode::UNAUTHORIZED,
        headers: vec![
            (name("www-authenticate"), value("Basic")),
            (name("content-length"), value("999")),
            (name("connection"), value("close")),
        ],
        body: Bytes::from_static(body),
    };
    let Flow::Answer(answer) = auth.shared.flow(Ok(denial(b"who?")), None) else {
        panic!("not denied");
    };
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert_eq!(answer.headers, [(name("www-authenticate"), value("Basic"))]);
    assert_eq!(answer.body.as_deref(), Some(&b"who?"[..]));
    // No body from the service: none from us either (not a problem body).
    let Flow::Answer(empty) = auth.shared.flow(Ok(denial(b"")), None) else {
        panic!("not denied");
    };
    assert!(empty.body.is_none() && empty.detail.is_none(), "{empty:?}");
    assert_eq!(auth.shared.counts.denied.load(Relaxed), 2);
}

#[test]
fn no_decision_is_decided_by_on_failure() {
    let closed = authorizer(HTTP);
    for (failed, status) in [
        (Failed::TimedOut, StatusCode::GATEWAY_TIMEOUT),
        (Failed::Unreachable, StatusCode::SERVICE_UNAVAILABLE),
        (Failed::Broken("a bad frame"), StatusCode::BAD_GATEWAY),
    ] {
        let Flow::Answer(answer) = closed.shared.flow(Err(failed), None) else {
            panic!("{failed:?} let through by fail_closed");
        };
        assert_eq!(answer.status, status);
    }
    let open = authorizer(&format!("{HTTP}on_failure: fail_open\n"));
    assert!(matches!(
        open.shared.flow(Err(Failed::TimedOut), None),
        Flow::Next
    ));
    assert_eq!(closed.shared.counts.fallbacks.load(Relaxed), 3);
    assert_eq!(open.shared.counts.fallbacks.load(Relaxed), 1);
}

/// An allow is remembered under the method, path, query and the key's
/// fields: the same request passes without a call, another does not.
#[test]
fn an_allow_is_remembered_for_the_same_request_only() {
    let auth = authorizer(&format!(
        "{HTTP}upstream_headers: [x-user-id]\ncache: {{ ttl: 1h, key: [authorization], max_entries: 2 }}\n"
    ));
    let cache = auth.cache.as_deref().unwrap();
    let alice = header_map(&[("authorization", "Bearer alice"), ("x-user-id", "forged")]);
    let bob = header_map(&[("authorization", "Bearer bob")]);
    let request = RequestView::get(&alice);
    let key = auth.cache_key(cache, &request, None);
    applied(auth.shared.flow(Ok(allow()), Some((cache, key))));

    let mut exchange = Exchange::default();
    assert!(matches!(auth.request(&request, &mut exchange), Flow::Next));
    assert_eq!(auth.shared.counts.cache_hits.load(Relaxed), 1);
    // The remembered allow's trusted field replaces the client's forgery.
    assert!(exchange.request_headers.drops(b"x-user-id"));
    assert!(exchange
        .request_headers
        .add
        .contains(&(name("x-user-id"), value("42"))));

    let other_user = RequestView::get(&bob);
    let other_path = RequestView {
        path: "/admin",
        ..RequestView::get(&alice)
    };
    let other_query = RequestView {
        query: Some("as=root"),
        ..RequestView::get(&alice)
    };
    for other in [other_user, other_path, other_query] {
        let flow = auth.request(&other, &mut Exchange::default());
        assert!(
            matches!(flow, Flow::Wait(_)),
            "{other:?} was let through by the cache"
        );
    }
    // Full: the cache is emptied rather than grown past max_entries.
    for user in ["b", "c"] {
        let headers = header_map(&[(
            "authorization",
            if user == "b" { "Bearer b" } else { "Bearer c" },
        )]);
        let key = auth.cache_key(cache, &RequestView::get(&headers), None);
        applied(auth.shared.flow(Ok(allow()), Some((cache, key))));
    }
    assert!(cache.entries.lock().unwrap().len() <= 2);
}

#[test]
fn an_expired_allow_is_asked_again() {
    let auth = authorizer(&format!("{HTTP}cache: {{ ttl: 0s, key: [] }}\n"));
    let cache = auth.cache.as_deref().unwrap();
    let headers = http::HeaderMap::new();
    let request = RequestView::get(&headers);
    let key = auth.cache_key(cache, &request, None);
    applied(auth.shared.flow(Ok(allow()), Some((cache, key))));
    assert!(matches!(
        auth.request(&request, &mut Exchange::default()),
        Flow::Wait(_)
    ));
}
