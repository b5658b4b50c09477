//! Every spelling of `/admin`, over HTTP/1.1 and HTTP/2, and raw bytes
//! that are not UTF-8.

use crate::support::{
    h2_client, h2_exchange,
    lenient::{admin_text, guarded, resolves_to_guarded, Lenient, ADMIN_ROUTES},
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

    let metrics = admin_text(&proxy, "/metrics").await;
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
    let metrics = admin_text(&proxy, "/metrics").await;
    assert!(
        metrics.contains("sluice_requests_refused_total{reason=\"malformed\"} 1\n"),
        "{metrics}"
    );
}
