//! Gateway integrity (issue 15): no spelling of a guarded resource walks
//! around its route's chain. A route for `/admin` denies everyone; a
//! catch-all route lets everything else through to an upstream that
//! resolves paths as leniently as common frameworks do. Every spelling is
//! sent over HTTP/1.1 and over HTTP/2, on real sockets; the test fails if
//! the upstream ever resolves a request to `/admin`. Host forms and
//! absolute-form targets likewise.

use crate::support;

use support::{
    h2_client, h2_exchange,
    lenient::{admin_get, guarded, resolves_to_guarded, Lenient, ADMIN_ROUTES, DENY_ALL},
    Proxy,
};
use tokio::net::TcpStream;

/// What the proxy does with one spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The guard's 403.
    Guarded,
    /// 400, refused before routing.
    Refused,
    /// Forwarded on the catch-all route, the upstream receiving this target.
    Passes(&'static str),
    /// Not expressible over HTTP/2 by an `http::Uri` client: not sent.
    NotSent,
}

use Expect::{Guarded, NotSent, Passes, Refused};

/// Spelling, over HTTP/1.1, over HTTP/2 (where the `http` crate's URI
/// parser, on both ends, drops a `#fragment` before anyone sees it).
const SPELLINGS: &[(&str, Expect, Expect)] = &[
    ("/admin", Guarded, Guarded),
    ("/admin/", Guarded, Guarded),
    ("/admin/users?id=1", Guarded, Guarded),
    ("//admin", Guarded, Guarded),
    ("///admin//users", Guarded, Guarded),
    ("/./admin", Guarded, Guarded),
    ("/x/../admin", Guarded, Guarded),
    ("/x/./../admin", Guarded, Guarded),
    ("/admin/../admin", Guarded, Guarded),
    ("/%61dmin", Guarded, Guarded),
    ("/%61%64%6D%69%6E", Guarded, Guarded),
    ("/x/%2e%2e/admin", Guarded, Guarded),
    ("/x/%2E./admin", Guarded, Guarded),
    ("/x/.%2e/admin", Guarded, Guarded),
    ("/%2e/admin", Guarded, Guarded),
    ("/ADMIN", Guarded, Guarded),
    ("/Admin/users", Guarded, Guarded),
    ("/%41DMIN", Guarded, Guarded),
    ("/admin;x=1", Guarded, Guarded),
    ("/admin;/users", Guarded, Guarded),
    ("/x/..;/admin", Guarded, Guarded),
    ("/;x/admin", Guarded, Guarded),
    ("/admin/.;x/", Guarded, Guarded),
    ("http://t/admin", Guarded, Guarded),
    ("http://t//admin", Guarded, Guarded),
    ("http://t/x/../admin", Guarded, Guarded),
    ("/admin#x", Refused, Guarded),
    ("/admin?x#y", Refused, Guarded),
    ("/x#/../admin", Refused, Passes("/x")),
    ("/x/..%2fadmin", Refused, Refused),
    ("/x/..%2Fadmin", Refused, Refused),
    ("/%2fadmin", Refused, Refused),
    ("/%5cadmin", Refused, Refused),
    ("/x/..%5Cadmin", Refused, Refused),
    ("/\\admin", Refused, Refused),
    ("/x\\..\\admin", Refused, Refused),
    ("/%2e%2e/admin", Refused, Refused),
    ("/../admin", Refused, Refused),
    ("/x/../../admin", Refused, Refused),
    ("/admin%00", Refused, Refused),
    ("/%00/../admin", Refused, Refused),
    ("/admin%0a", Refused, Refused),
    ("/%zzadmin", Refused, Refused),
    ("/admin%", Refused, Refused),
    ("*", Refused, NotSent),
    ("/Admin", Guarded, Guarded),
    ("/adminx", Passes("/adminx"), Passes("/adminx")),
    ("/admin..", Passes("/admin.."), Passes("/admin..")),
    ("/%2561dmin", Passes("/%2561dmin"), Passes("/%2561dmin")),
    (
        "/x/%252e%252e/admin",
        Passes("/x/%252e%252e/admin"),
        Passes("/x/%252e%252e/admin"),
    ),
    // Letters that backends comparing without case fold to ASCII ones
    // (Java, .NET: ı is I, İ is i, ſ is S, the Kelvin sign is k; full
    // case folding: ß is ss, ﬁ is fi).
    ("/adm%C4%B1n", Guarded, Guarded),
    ("/adm%c4%b0n/users", Guarded, Guarded),
    ("/ADM%C4%B1N", Guarded, Guarded),
    ("/admın", Guarded, NotSent),
    ("/%E2%84%AAeys", Guarded, Guarded),
    ("/%E2%84%AAey%C5%BF", Guarded, Guarded),
    ("/caf%C3%A9", Passes("/caf%C3%A9"), Passes("/caf%C3%A9")),
    // Escapes that are not UTF-8: overlong forms (`.`, `/`, NUL to legacy
    // decoders), stray and truncated sequences.
    ("/x/%C0%AE%C0%AE/admin", Refused, Refused),
    ("/x/%c0%ae./admin", Refused, Refused),
    ("/%C0%AFadmin", Refused, Refused),
    ("/x/%E0%80%AE%E0%80%AE/admin", Refused, Refused),
    ("/admin%C0%80", Refused, Refused),
    ("/adm%FFin", Refused, Refused),
    ("/admin%C3", Refused, Refused),
    // `%3B` is `;` to a router that decodes before it drops parameters.
    ("/admin%3B", Guarded, Guarded),
    ("/x/..%3B/admin", Guarded, Guarded),
    ("/x/..%3bfoo/admin", Guarded, Guarded),
    ("/admin%3Bx/users", Guarded, Guarded),
    ("/admin/..", Passes("/"), Passes("/")),
    ("/x/../y", Passes("/y"), Passes("/y")),
    ("/x/..;/y", Passes("/y"), Passes("/y")),
    (
        "/public/%7euser",
        Passes("/public/~user"),
        Passes("/public/~user"),
    ),
    (
        "/public;jsessionid=1",
        Passes("/public;jsessionid=1"),
        Passes("/public;jsessionid=1"),
    ),
    (
        "/caf%c3%a9?q=%2F",
        Passes("/caf%C3%A9?q=%2F"),
        Passes("/caf%C3%A9?q=%2F"),
    ),
    ("/x/%2e", Passes("/x/"), Passes("/x/")),
];

/// The recording upstream's model catches each bypass these tests are
/// about: sent unchanged, every one would reach a guarded path.
#[test]
fn the_lenient_model_sees_every_bypass() {
    for spelling in [
        "//admin",
        "/%61dmin",
        "/x/..;/admin",
        "/x/..%2fadmin",
        "/%5cadmin",
        "/ADMIN",
        "/adm%C4%B1n",
        "/adm%c4%b0n/users",
        "/%E2%84%AAeys",
        "/%E2%84%AAey%C5%BF",
        "/x/%C0%AE%C0%AE/admin",
        "/%C0%AFadmin",
        "/x/%E0%80%AE%E0%80%AE/admin",
        "/admin%3B",
        "/x/..%3B/admin",
        "/admin%3Bx/users",
    ] {
        assert!(resolves_to_guarded(spelling), "{spelling}");
    }
    for harmless in ["/adminx", "/caf%C3%A9", "/%2561dmin", "/x/../y"] {
        assert!(!resolves_to_guarded(harmless), "{harmless}");
    }
}

fn check(
    protocol: &str,
    spelling: &str,
    expect: Expect,
    status: u16,
    upstream: &Lenient,
    before: usize,
) {
    let context = format!("{protocol} {spelling:?}");
    match expect {
        Guarded => assert_eq!((status, upstream.count()), (403, before), "{context}"),
        Refused => assert_eq!((status, upstream.count()), (400, before), "{context}"),
        Passes(target) => {
            assert_eq!(status, 200, "{context}");
            assert_eq!(upstream.count(), before + 1, "{context}");
            assert_eq!(upstream.last().target, target, "{context}");
        }
        NotSent => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_spelling_of_a_guarded_path_reaches_the_upstream() {
    assert!(SPELLINGS.len() >= 40);
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    for &(spelling, expect, _) in SPELLINGS {
        let before = upstream.count();
        let mut conn = proxy.conn().await;
        conn.send(format!("GET {spelling} HTTP/1.1\r\nHost: t\r\n\r\n"))
            .await;
        let response = conn.read_response(false).await;
        if expect == Refused {
            assert_eq!(
                response.header("content-type"),
                Some("application/problem+json")
            );
        }
        check(
            "HTTP/1.1",
            spelling,
            expect,
            response.status,
            &upstream,
            before,
        );
    }
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    for &(spelling, _, expect) in SPELLINGS {
        if expect == NotSent {
            continue;
        }
        let uri = match spelling.starts_with('/') {
            true => format!("http://t{spelling}"),
            false => spelling.to_string(),
        };
        let before = upstream.count();
        let request = http::Request::get(uri).body(()).unwrap();
        let (response, _, _) = h2_exchange(&sender, request, b"").await;
        check(
            "HTTP/2",
            spelling,
            expect,
            response.status().as_u16(),
            &upstream,
            before,
        );
    }
    upstream.assert_admin_never_reached();

    let metrics = admin_get(&proxy, "/metrics").await;
    for reason in [
        "escaped_slash",
        "backslash",
        "above_root",
        "control",
        "fragment",
        "bad_escape",
        "not_utf8",
        "target_form",
    ] {
        let line = format!("sluice_requests_refused_total{{reason=\"{reason}\"}} ");
        let count: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or_else(|| panic!("no {line} in\n{metrics}"))
            .parse()
            .unwrap();
        assert!(count > 0, "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_forms_meet_their_route() {
    let upstream = Lenient::start().await;
    let proxy = guarded(
        upstream.addr,
        "  - { path: /, host: admin.example, chain: [deny_all], upstream: app }\n  - { path: /, host: bücher.example, chain: [deny_all], upstream: app }\n  - { path: /, upstream: app }\n",
    );
    let hosts = [
        ("admin.example", 403),
        ("ADMIN.Example", 403),
        ("admin.example.", 403),
        ("admin.example:80", 403),
        ("Admin.Example.:8080", 403),
        ("xn--bcher-kva.example", 403),
        ("XN--BCHER-KVA.EXAMPLE.", 403),
        ("bücher.example", 403),
        ("other.example", 200),
        ("admin.example..", 400),
        (".admin.example", 400),
        ("user@admin.example", 400),
        ("admin.example:http", 400),
        ("admin.example:80:80", 400),
        ("admin example", 400),
        ("[::1", 400),
        // UTS 46 maps `˜` to a space: no host name (found by fuzzing).
        ("a\u{2dc}b.example", 400),
    ];
    for (host, status) in hosts {
        let before = upstream.count();
        let mut conn = proxy.conn().await;
        conn.send(format!("GET /x HTTP/1.1\r\nHost: {host}\r\n\r\n"))
            .await;
        let response = conn.read_response(false).await;
        assert_eq!(response.status, status, "Host: {host}");
        assert_eq!(
            upstream.count(),
            before + usize::from(status == 200),
            "Host: {host}"
        );
    }
    // The upstream receives the normal Host (default port dropped).
    let mut conn = proxy.conn().await;
    conn.send("GET /x HTTP/1.1\r\nHost: Other.Example.:80\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 200);
    assert_eq!(upstream.last().host, "other.example");

    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    for (authority, status) in [
        ("admin.example.", 403),
        ("ADMIN.EXAMPLE:80", 403),
        ("xn--bcher-kva.example", 403),
        ("other.example", 200),
    ] {
        let request = http::Request::get(format!("http://{authority}/x"))
            .body(())
            .unwrap();
        let (response, _, _) = h2_exchange(&sender, request, b"").await;
        assert_eq!(
            response.status().as_u16(),
            status,
            "HTTP/2 :authority {authority}"
        );
    }
    // Without `:authority` the `host` field names the host, as over
    // HTTP/1.1: the same forms meet the same routes, and one that is not
    // text, or is missing or doubled, is refused rather than routed
    // without a host (which would skip the host's routes and reach the
    // upstream with no Host).
    let host_fields: [(&[&[u8]], u16); 8] = [
        (&[b"admin.example"], 403),
        (&[b"ADMIN.example.:80"], 403),
        (&["bücher.example".as_bytes()], 403),
        (&[b"b\xfccher.example"], 400),
        (&[b"admin.example\xff"], 400),
        (&[], 400),
        (&[b"other.example", b"admin.example"], 400),
        (&[b"other.example"], 200),
    ];
    for (values, status) in host_fields {
        let before = upstream.count();
        let mut request = http::Request::get("/x").body(()).unwrap();
        for value in values {
            let value = http::HeaderValue::from_bytes(value).unwrap();
            request.headers_mut().append(http::header::HOST, value);
        }
        let (response, _, _) = h2_exchange(&sender, request, b"").await;
        let context = format!("HTTP/2 without :authority, host {values:?}");
        assert_eq!(response.status().as_u16(), status, "{context}");
        assert_eq!(
            upstream.count(),
            before + usize::from(status == 200),
            "{context}"
        );
    }
    assert_eq!(upstream.last().host, "other.example");
    upstream.assert_admin_never_reached();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_form_authority_replaces_host_and_is_sent_in_origin_form() {
    let upstream = Lenient::start().await;
    let proxy = guarded(
        upstream.addr,
        "  - { path: /, host: admin.example, chain: [deny_all], upstream: app }\n  - { path: /, upstream: app }\n",
    );
    let mut conn = proxy.conn().await;
    conn.send("GET http://Admin.Example./x HTTP/1.1\r\nHost: other.example\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 403);
    let before = upstream.count();
    conn.send("GET http://App.Example:80/a//b/../c?q=1 HTTP/1.1\r\nHost: admin.example\r\n\r\n")
        .await;
    let response = conn.read_response(false).await;
    assert_eq!(response.status, 200);
    assert_eq!(upstream.count(), before + 1);
    let received = upstream.last();
    assert_eq!(
        (received.target.as_str(), received.host.as_str()),
        ("/a/c?q=1", "app.example")
    );
    conn.send("GET http:///x HTTP/1.1\r\nHost: t\r\n\r\n").await;
    assert_eq!(conn.read_response(false).await.status, 400);
}

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
    let metrics = admin_get(&proxy, "/metrics").await;
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
    let metrics = admin_get(&proxy, "/metrics").await;
    assert!(
        metrics.contains("sluice_override_headers_removed_total 6\n"),
        "{metrics}"
    );
    // A request without them is not counted.
    assert_eq!(conn.get("/public").await.status, 200);
    let metrics = admin_get(&proxy, "/metrics").await;
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
    let metrics = admin_get(&proxy, "/metrics").await;
    assert!(metrics.contains("sluice_override_headers_removed_total 0\n"));
}

/// CONNECT (authority-form) is refused with 400 and counted as
/// `target_form` over both protocols.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_is_refused_as_a_target_form() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    let mut conn = proxy.conn().await;
    conn.send("CONNECT t:443 HTTP/1.1\r\nHost: t:443\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 400);
    let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
    let request = http::Request::connect("t:443").body(()).unwrap();
    let (response, _, _) = h2_exchange(&sender, request, b"").await;
    assert_eq!(response.status(), 400);
    assert_eq!(upstream.count(), 0);
    let metrics = admin_get(&proxy, "/metrics").await;
    for line in [
        "sluice_requests_refused_total{reason=\"target_form\"} 2\n",
        "sluice_requests_refused_total{reason=\"malformed\"} 0\n",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
}

/// Raw bytes in the path that are not UTF-8 are refused like escaped
/// ones, by the HTTP/1.1 parser (so counted as `malformed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_bytes_that_are_not_utf8_are_refused() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    let mut conn = proxy.conn().await;
    conn.send(&b"GET /adm\xc0\xaein HTTP/1.1\r\nHost: t\r\n\r\n"[..])
        .await;
    assert_eq!(conn.read_response(false).await.status, 400);
    assert_eq!(upstream.count(), 0);
    let metrics = admin_get(&proxy, "/metrics").await;
    assert!(
        metrics.contains("sluice_requests_refused_total{reason=\"malformed\"} 1\n"),
        "{metrics}"
    );
}
