//! Gateway integrity (issue 15): no spelling of a guarded resource walks
//! around its route's chain. A route for `/admin` denies everyone; a
//! catch-all route lets everything else through to an upstream that
//! resolves paths as leniently as common frameworks do. Every spelling is
//! sent over HTTP/1.1 and over HTTP/2, on real sockets; the test fails if
//! the upstream ever resolves a request to `/admin`.

#![allow(clippy::unwrap_used)]

mod support;

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use bytes::BytesMut;
use support::{h2_client, h2_exchange, Proxy};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// What a request received by the lenient upstream was.
#[derive(Debug, Clone)]
struct Received {
    target: String,
    host: String,
    /// Every way a lenient framework could resolve its path.
    resolved: Vec<String>,
    upgrade: Option<String>,
    http2_settings: bool,
}

/// An upstream that records each request and answers with its target
/// (then a line with its Host). A websocket upgrade with
/// `Sec-WebSocket-Version: 13` is switched (then bytes are echoed
/// upper-cased), any other websocket offer gets 426; an `h2c` offer would
/// be switched too (a vulnerable backend); `/sneaky-101` is answered 101
/// whatever was asked.
struct Lenient {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Received>>>,
}

impl Lenient {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&record)));
            }
        });
        Self { addr, seen }
    }

    fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn last(&self) -> Received {
        self.seen.lock().unwrap().last().cloned().unwrap()
    }

    /// The test's invariant: nothing that resolves to `/admin` got here.
    fn assert_admin_never_reached(&self) {
        for received in self.seen.lock().unwrap().iter() {
            for path in &received.resolved {
                let admin = path == "/admin" || path.starts_with("/admin/");
                assert!(
                    !admin,
                    "the upstream resolved {received:?} to the guarded {path}"
                );
            }
        }
    }
}

async fn serve(mut stream: TcpStream, seen: Arc<Mutex<Vec<Received>>>) {
    let limits = http1::Limits {
        max_head: 64 * 1024,
        max_body: 0,
    };
    let mut buf = BytesMut::new();
    loop {
        let mut fields = Vec::new();
        let head = loop {
            fields.clear();
            if let Ok(Some(head)) = http1::parse_head_into(&buf, &limits, &mut fields) {
                break head;
            }
            if stream.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                return;
            }
        };
        let text = |r: std::ops::Range<usize>| String::from_utf8_lossy(&buf[r]).into_owned();
        let field = |name: &str| {
            fields
                .iter()
                .find(|(n, _)| buf[n.clone()].eq_ignore_ascii_case(name.as_bytes()))
                .map(|(_, v)| text(v.clone()))
        };
        let target = text(head.target.clone());
        let received = Received {
            resolved: resolutions(&target),
            host: field("host").unwrap_or_default(),
            upgrade: field("upgrade"),
            http2_settings: field("http2-settings").is_some(),
            target,
        };
        let version = field("sec-websocket-version");
        let _ = buf.split_to(head.len);
        let switch = match received.upgrade.as_deref() {
            Some("websocket") => version.as_deref() == Some("13"),
            Some(offer) => offer.contains("h2c"),
            None => false,
        } || received.target == "/sneaky-101";
        let refuse = received.upgrade.as_deref() == Some("websocket") && !switch;
        let body = format!("{}\n{}", received.target, received.host);
        seen.lock().unwrap().push(received);
        if switch {
            let _ = stream
                .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
                .await;
            let mut chunk = [0u8; 1024];
            loop {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        let upper = chunk[..n].to_ascii_uppercase();
                        if stream.write_all(&upper).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
        let status = if refuse {
            "426 Upgrade Required"
        } else {
            "200 OK"
        };
        let answer = format!(
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// How lenient frameworks resolve a target's path: a servlet container
/// (path parameters dropped from the raw path, then decoded, `\` as `/`),
/// and a decode-first router (everything decoded, `%2F` a separator).
fn resolutions(target: &str) -> Vec<String> {
    let path = match target.find("://") {
        Some(scheme) => {
            let rest = &target[scheme + 3..];
            &rest[rest.find('/').unwrap_or(rest.len())..]
        }
        None => target,
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let servlet: Vec<&str> = path
        .split('/')
        .map(|s| s.split(';').next().unwrap_or_default())
        .collect();
    let servlet = decode(&servlet.join("/")).replace('\\', "/");
    vec![dots(&servlet), dots(&decode(path).replace('\\', "/"))]
}

fn decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Dot segments resolved (clamped at the root) and empty segments merged.
fn dots(path: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                kept.pop();
            }
            s => kept.push(s),
        }
    }
    format!("/{}", kept.join("/"))
}

const DENY_ALL: &str = "middleware:\n  deny_all: { ip_filter: { deny: [0.0.0.0/0, \"::/0\"] } }\n";

fn guarded(upstream: SocketAddr, routes: &str) -> Proxy {
    Proxy::start(&format!(
        "{DENY_ALL}upstreams:\n  app: {{ hosts: [\"http://{upstream}\"] }}\nroutes:\n{routes}"
    ))
}

const ADMIN_ROUTES: &str = "  - { path: /admin, chain: [deny_all], upstream: app }\n  - { path: /nows, upgrades: [], upstream: app }\n  - { path: /, upstream: app }\n";

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
    ("/Admin", Passes("/Admin"), Passes("/Admin")),
    ("/adminx", Passes("/adminx"), Passes("/adminx")),
    ("/admin..", Passes("/admin.."), Passes("/admin..")),
    ("/admin%3B", Passes("/admin%3B"), Passes("/admin%3B")),
    ("/%2561dmin", Passes("/%2561dmin"), Passes("/%2561dmin")),
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

async fn admin_get(proxy: &Proxy, path: &str) -> String {
    let mut conn = testkit::RawConn::connect(proxy.admin()).await;
    conn.get(path).await.text()
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

/// An upgrade request's head, with `extra` fields.
fn upgrade_request(path: &str, offer: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: Upgrade{extra}\r\nUpgrade: {offer}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_upgrades_are_never_relayed() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    let mut conn = proxy.conn().await;
    let h2c = "GET / HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n";
    conn.send(h2c).await;
    let response = conn.read_response(false).await;
    assert_eq!(
        response.status, 200,
        "the upgrade is dropped, the request served"
    );
    let received = upstream.last();
    assert_eq!((received.upgrade, received.http2_settings), (None, false));
    // Still HTTP, still routed: the next request meets the guard.
    assert_eq!(conn.get("/admin").await.status, 403);
    // Among other offers, h2c alone is taken out.
    conn.send(upgrade_request(
        "/",
        "h2c, websocket",
        "\r\nSec-WebSocket-Version: 12",
    ))
    .await;
    assert_eq!(conn.read_response(false).await.status, 426);
    assert_eq!(upstream.last().upgrade.as_deref(), Some("websocket"));
    assert_eq!(conn.get("/admin").await.status, 403);
    let metrics = admin_get(&proxy, "/metrics").await;
    assert!(
        metrics.contains("sluice_upgrades_removed_total 2\n"),
        "{metrics}"
    );
    upstream.assert_admin_never_reached();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_tunnels_end_to_end_and_the_chain_sees_the_upgrade() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    let mut conn = proxy.conn().await;
    conn.send(upgrade_request(
        "/admin/ws",
        "websocket",
        "\r\nSec-WebSocket-Version: 13",
    ))
    .await;
    assert_eq!(conn.read_response(false).await.status, 403);

    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    let request = upgrade_request("/ws", "websocket", "\r\nSec-WebSocket-Version: 13");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut chunk = [0u8; 1024];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed before the 101");
        seen.extend_from_slice(&chunk[..n]);
    }
    assert!(
        seen.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    stream.write_all(b"hello").await.unwrap();
    let mut echoed = [0u8; 5];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut echoed))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&echoed, b"HELLO");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upgrade_leaves_the_connection_routed() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    // The upstream refuses the upgrade (426): the connection stays HTTP.
    let mut conn = proxy.conn().await;
    conn.send(upgrade_request(
        "/ws",
        "websocket",
        "\r\nSec-WebSocket-Version: 8",
    ))
    .await;
    assert_eq!(conn.read_response(false).await.status, 426);
    assert_eq!(conn.get("/admin").await.status, 403);
    // The route lists no upgrades: the offer is taken out, the request served plain.
    conn.send(upgrade_request(
        "/nows",
        "websocket",
        "\r\nSec-WebSocket-Version: 13",
    ))
    .await;
    assert_eq!(conn.read_response(false).await.status, 200);
    assert_eq!(upstream.last().upgrade, None);
    assert_eq!(conn.get("/admin").await.status, 403);
    // A 101 to a request that offered nothing is not a tunnel: 502, and HTTP goes on.
    assert_eq!(conn.get("/sneaky-101").await.status, 502);
    assert_eq!(conn.get("/admin").await.status, 403);
    // Pipelined behind a refused upgrade, a guarded request is still routed.
    let pipelined = format!(
        "{}GET /admin HTTP/1.1\r\nHost: t\r\n\r\n",
        upgrade_request("/ws", "websocket", "\r\nSec-WebSocket-Version: 8")
    );
    conn.send(pipelined).await;
    assert_eq!(conn.read_response(false).await.status, 426);
    assert_eq!(conn.read_response(false).await.status, 403);
    upstream.assert_admin_never_reached();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_asterisk_is_answered_by_the_proxy() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    let mut conn = proxy.conn().await;
    assert_eq!(conn.request("OPTIONS", "*", &[], b"").await.status, 204);
    assert_eq!(conn.get("/admin").await.status, 403);
    assert_eq!(upstream.count(), 0);
}

#[test]
fn routes_must_be_written_in_normal_form() {
    let config = |routes: &str| {
        let yaml = format!(
            "listeners: [{{ address: 127.0.0.1:0 }}]\nupstreams:\n  app: {{ hosts: [\"http://127.0.0.1:1\"] }}\nroutes:\n{routes}"
        );
        let config = proxy::config::parse(&yaml, std::path::Path::new("t.yaml"), |_| None).unwrap();
        proxy::gateway::Gateway::new(&config)
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
