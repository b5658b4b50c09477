//! One table of routing cases (matches, precedence, filters, backends),
//! asked by an HTTP/1.1, an HTTP/2 (h2c) and an HTTP/3 client of the same
//! proxy: every protocol gets the same routing.

use std::net::SocketAddr;

use http::Request;
use testkit::{RawConn, TestCerts};

use crate::h3_support::Client as H3Client;
use crate::support::{h2_client, h2_exchange, Echo, Proxy};

/// What a case asks.
struct Ask {
    method: &'static str,
    host: &'static str,
    target: &'static str,
    headers: &'static [(&'static str, &'static str)],
}

/// What it must get: the status, then what the answer must contain
/// (`upstream: NAME` for the echo that answered, a request line it saw,
/// a field of the answer as `name: value`).
struct Case {
    why: &'static str,
    ask: Ask,
    status: u16,
    has: &'static [&'static str],
}

const fn get(host: &'static str, target: &'static str) -> Ask {
    Ask {
        method: "GET",
        host,
        target,
        headers: &[],
    }
}

const CASES: &[Case] = &[
    Case {
        why: "the catch-all",
        ask: get("app.example", "/"),
        status: 200,
        has: &["upstream: a"],
    },
    Case {
        why: "a header condition",
        ask: Ask {
            headers: &[("x-canary", "yes")],
            ..get("app.example", "/api")
        },
        status: 200,
        has: &["upstream: b"],
    },
    Case {
        why: "a query condition",
        ask: get("app.example", "/api?v=2"),
        status: 200,
        has: &["upstream: c"],
    },
    Case {
        why: "headers count before query parameters",
        ask: Ask {
            headers: &[("x-canary", "yes")],
            ..get("app.example", "/api/x?v=2")
        },
        status: 200,
        has: &["upstream: b"],
    },
    Case {
        why: "a regex path",
        ask: get("app.example", "/items/42"),
        status: 200,
        has: &["upstream: b"],
    },
    Case {
        why: "a regex matches the whole path",
        ask: get("app.example", "/items/4x"),
        status: 200,
        has: &["upstream: a"],
    },
    Case {
        why: "a wildcard host",
        ask: get("foo.tenant.example", "/"),
        status: 200,
        has: &["upstream: c"],
    },
    Case {
        why: "a wildcard needs a label",
        ask: get("tenant.example", "/"),
        status: 200,
        has: &["upstream: a"],
    },
    Case {
        why: "a method condition",
        ask: Ask {
            method: "POST",
            ..get("app.example", "/only-post")
        },
        status: 200,
        has: &["upstream: b"],
    },
    Case {
        why: "another method falls through to the catch-all",
        ask: get("app.example", "/only-post"),
        status: 200,
        has: &["upstream: a"],
    },
    Case {
        why: "a redirect replaces the prefix and keeps the query",
        ask: get("app.example", "/old/page?q=1"),
        status: 301,
        has: &["location: https://new.example/new/page?q=1"],
    },
    Case {
        why: "a direct response",
        ask: get("app.example", "/maintenance"),
        status: 503,
        has: &["retry-after: 120", "down for maintenance"],
    },
    Case {
        why: "a rewrite and header changes",
        ask: get("app.example", "/v1/users?id=7"),
        status: 200,
        has: &[
            "upstream: b",
            "GET /v2/users?id=7 HTTP/1.1",
            "host: internal.example",
            "x-route: v1",
            "x-served-by: sluice",
        ],
    },
    Case {
        why: "weight 0 takes nothing",
        ask: get("app.example", "/split"),
        status: 200,
        has: &["upstream: c"],
    },
];

const ROUTES: &str = "
routes:
  - { path: /, upstream: a }
  - { path: /api, headers: [{ name: x-canary, value: 'yes' }], upstream: b }
  - { path: /api, query: [{ name: v, value: '2' }], upstream: c }
  - { path: '/items/[0-9]+', match: regex, upstream: b }
  - { path: /, hosts: ['*.tenant.example'], upstream: c }
  - { path: /only-post, methods: [POST], upstream: b }
  - { path: /old, redirect: { scheme: https, hostname: new.example, path: { prefix: /new }, status: 301 } }
  - { path: /maintenance, respond: { status: 503, headers: { retry-after: '120' }, body: down for maintenance } }
  - path: /v1
    rewrite: { hostname: internal.example, path: { prefix: /v2 } }
    request_headers: { set: { x-route: v1 } }
    response_headers: { add: { x-served-by: sluice } }
    upstream: b
  - { path: /split, backends: [{ upstream: a, weight: 0 }, { upstream: c, weight: 1 }] }
";

/// The answer as text: `status`, its fields as `name: value` lines, the body.
type Answer = (u16, String);

async fn over_h1(addr: SocketAddr, ask: &Ask) -> Answer {
    let mut conn = RawConn::connect(addr).await;
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\n",
        ask.method, ask.target, ask.host
    );
    for (name, value) in ask.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if ask.method == "POST" {
        head.push_str("Content-Length: 0\r\n");
    }
    head.push_str("\r\n");
    conn.send(head).await;
    let answer = conn.read_response(false).await;
    let fields: String = answer
        .headers
        .iter()
        .map(|(n, v)| format!("{}: {v}\n", n.to_ascii_lowercase()))
        .collect();
    (answer.status, format!("{fields}{}", answer.text()))
}

fn request(scheme: &str, ask: &Ask) -> Request<()> {
    let mut request = Request::builder()
        .method(ask.method)
        .uri(format!("{scheme}://{}{}", ask.host, ask.target));
    for (name, value) in ask.headers {
        request = request.header(*name, *value);
    }
    request.body(()).unwrap()
}

fn text(response: &http::Response<()>, body: &[u8]) -> Answer {
    let fields: String = response
        .headers()
        .iter()
        .map(|(n, v)| format!("{n}: {}\n", v.to_str().unwrap_or_default()))
        .collect();
    (
        response.status().as_u16(),
        format!("{fields}{}", String::from_utf8_lossy(body)),
    )
}

async fn over_h2(addr: SocketAddr, ask: &Ask) -> Answer {
    let send = h2_client(tokio::net::TcpStream::connect(addr).await.unwrap()).await;
    let (response, body, _) = h2_exchange(&send, request("http", ask), b"").await;
    text(&response, &body)
}

async fn over_h3(client: &mut H3Client, ask: &Ask) -> Answer {
    let (response, body) = client.exchange(request("https", ask), b"").await;
    text(&response, body.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_http2_and_http3_clients_get_the_same_routing() {
    let (a, b, c) = (
        Echo::start("a").await,
        Echo::start("b").await,
        Echo::start("c").await,
    );
    let certs = TestCerts::generate();
    let proxy = Proxy::start_yaml(&format!(
        "workers: 1\nlisteners:\n  - address: 127.0.0.1:0\n  - address: 127.0.0.1:0\n    protocols: [h2, http1, h3]\n    tls: {{ cert: \"{}\", key: \"{}\" }}\nupstreams:\n  a: {{ hosts: [\"http://{}\"] }}\n  b: {{ hosts: [\"http://{}\"] }}\n  c: {{ hosts: [\"http://{}\"] }}\n{ROUTES}",
        certs.cert_path.display(),
        certs.key_path.display(),
        a.addr,
        b.addr,
        c.addr,
    ));
    let plain = proxy.addr();
    let tls = proxy.listener(1);
    let mut h3 = H3Client::connect(tls, &certs).await;
    for case in CASES {
        let answers = [
            ("HTTP/1.1", over_h1(plain, &case.ask).await),
            ("HTTP/2", over_h2(plain, &case.ask).await),
            ("HTTP/3", over_h3(&mut h3, &case.ask).await),
        ];
        for (protocol, (status, text)) in answers {
            let at = format!("{protocol}, {}: {}", case.why, case.ask.target);
            assert_eq!(status, case.status, "{at}\n{text}");
            for wanted in case.has {
                assert!(text.contains(wanted), "{at}: no `{wanted}` in\n{text}");
            }
        }
    }
}
