//! The `paths:` settings (`forward: original`, `double_encoding: reject`,
//! `override_headers`) and routes that must be written in normal form.

use crate::support::{
    h2_client, h2_exchange,
    lenient::{admin_text, guarded, Lenient, ADMIN_ROUTES, DENY_ALL},
    Proxy,
};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_original_sends_the_clients_spelling() {
    let upstream = Lenient::start().await;
    let proxy = Proxy::start(&format!(
        "{DENY_ALL}paths: {{ forward: original, escaped_slash: decode }}\nupstreams:\n  app: {{ hosts: [\"http://{}\"] }}\nroutes:\n{ADMIN_ROUTES}",
        upstream.addr
    ));
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/x/..%2fadmin").await.status, 403);
    let response = conn.get("/x//y/%7e").await;
    assert_eq!(response.status, 200);
    assert_eq!(upstream.last().target, "/x//y/%7e");
}

#[test]
fn routes_must_be_written_in_normal_form() {
    let config = |routes: &str| {
        let yaml = format!(
            "listeners: [{{ address: 127.0.0.1:0 }}]\nupstreams:\n  app: {{ hosts: [\"http://127.0.0.1:1\"] }}\nroutes:\n{routes}"
        );
        let config = proxy::config::parse(&yaml, std::path::Path::new("t.yaml"), |_| None).unwrap();
        proxy::plan::Plan::compile(&config, 1)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    assert_eq!(config("  - { path: /a/b, upstream: app }\n"), Ok(()));
    let err = config("  - { path: /a//b, upstream: app }\n").unwrap_err();
    assert!(
        err.contains("routes[0]") && err.contains("write `/a/b`"),
        "{err}"
    );
    let err = config("  - { path: /a;v=1, upstream: app }\n").unwrap_err();
    assert!(err.contains("can never match"), "{err}");
    let err = config("  - { path: /, host: \"a.example:8080\", upstream: app }\n").unwrap_err();
    assert!(err.contains("without a port"), "{err}");
    let yaml = "listeners: [{ address: 127.0.0.1:0 }]\nupstreams:\n  app: { hosts: [\"http://127.0.0.1:1\"] }\nroutes:\n  - { path: /, upgrades: [websocket, h2c], upstream: app }\n";
    let err = proxy::config::parse(yaml, std::path::Path::new("t.yaml"), |_| None).unwrap_err();
    assert!(
        err.to_string()
            .contains("routes[0].upgrades[1]: h2c is never relayed"),
        "{err}"
    );
}

/// `%25` is the character `%` (RFC 3986): one decoding, so `/%2561dmin`
/// is not `/admin` and goes on as sent. A backend that decodes twice reads
/// `/admin` there (the recording upstream shows it); in front of such a
/// backend, `paths.double_encoding: reject` refuses every `%25` that
/// would become an escape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_encoding_is_refused_for_backends_that_decode_twice() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    let mut conn = proxy.conn().await;
    assert_eq!(conn.get("/%2561dmin").await.status, 200);
    let received = upstream.last();
    assert_eq!(received.target, "/%2561dmin");
    assert_eq!(received.double_decoded, "/admin");
    drop(proxy);

    let proxy = Proxy::start(&format!(
        "{DENY_ALL}paths: {{ double_encoding: reject }}\nupstreams:\n  app: {{ hosts: [\"http://{}\"] }}\nroutes:\n{ADMIN_ROUTES}",
        upstream.addr
    ));
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    for (spelling, status) in [
        ("/%2561dmin", 400),
        ("/x/%252e%252e/admin", 400),
        ("/%25%36%31dmin", 400),
        ("/%252561dmin", 400),
        ("/100%25", 200),
        ("/100%25off", 200),
    ] {
        let mut conn = proxy.conn().await;
        assert_eq!(
            conn.get(spelling).await.status,
            status,
            "HTTP/1.1 {spelling}"
        );
        let request = http::Request::get(format!("http://t{spelling}"))
            .body(())
            .unwrap();
        let (response, _, _) = h2_exchange(&sender, request, b"").await;
        assert_eq!(response.status().as_u16(), status, "HTTP/2 {spelling}");
    }
    let reached: Vec<String> = upstream
        .all()
        .into_iter()
        .skip(1)
        .map(|received| received.double_decoded)
        .collect();
    assert_eq!(reached, ["/100%", "/100%", "/100%off", "/100%off"]);
    let metrics = admin_text(&proxy, "/metrics").await;
    assert!(
        metrics.contains("sluice_requests_refused_total{reason=\"double_encoding\"} 8\n"),
        "{metrics}"
    );
}

/// Fields that make lenient frameworks serve another path or method than
/// the one routed are removed (IIS URL Rewrite and old Symfony take the
/// path from `X-Original-URL`), and counted; `paths.override_headers:
/// keep` forwards them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn override_fields_never_reach_the_upstream() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    let overrides = [
        ("X-Original-URL", "/admin"),
        ("X-Rewrite-URL", "/admin/users"),
        ("X-HTTP-Method-Override", "DELETE"),
        ("X-HTTP-Method", "PUT"),
        ("X-Method-Override", "PATCH"),
    ];
    let mut conn = proxy.conn().await;
    for (name, value) in overrides {
        conn.send(format!(
            "GET /public HTTP/1.1\r\nHost: t\r\n{name}: {value}\r\nX-Other: kept\r\n\r\n"
        ))
        .await;
        let response = conn.read_response(false).await;
        assert_eq!(response.status, 200, "{name}");
        assert_eq!(upstream.last().overrides, Vec::<String>::new(), "{name}");
    }
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let mut request = http::Request::get("http://t/public").body(()).unwrap();
    for (name, value) in overrides {
        request
            .headers_mut()
            .insert(name, http::HeaderValue::from_static(value));
    }
    let (response, _, _) = h2_exchange(&sender, request, b"").await;
    assert_eq!(response.status(), 200);
    assert_eq!(upstream.last().overrides, Vec::<String>::new());
    upstream.assert_admin_never_reached();
    let metrics = admin_text(&proxy, "/metrics").await;
    assert!(
        metrics.contains("sluice_override_headers_removed_total 6\n"),
        "{metrics}"
    );
    // A request without them is not counted.
    assert_eq!(conn.get("/public").await.status, 200);
    let metrics = admin_text(&proxy, "/metrics").await;
    assert!(metrics.contains("sluice_override_headers_removed_total 6\n"));
    drop(proxy);

    let proxy = Proxy::start(&format!(
        "{DENY_ALL}paths: {{ override_headers: keep }}\nupstreams:\n  app: {{ hosts: [\"http://{}\"] }}\nroutes:\n{ADMIN_ROUTES}",
        upstream.addr
    ));
    let mut conn = proxy.conn().await;
    conn.send("GET /public HTTP/1.1\r\nHost: t\r\nX-HTTP-Method-Override: DELETE\r\n\r\n")
        .await;
    let response = conn.read_response(false).await;
    assert_eq!(response.status, 200);
    assert_eq!(upstream.last().overrides, ["x-http-method-override"]);
    let metrics = admin_text(&proxy, "/metrics").await;
    assert!(metrics.contains("sluice_override_headers_removed_total 0\n"));
}
