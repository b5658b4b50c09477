//! The exchange's decisions over real sockets, the same scenarios on each
//! of the six client/upstream protocol pairs (HTTP/1.1, HTTP/2 or HTTP/3
//! client, HTTP/1.1 or h2c upstream): `retry_on` statuses and resets, a refused
//! stream resent, requests after a GOAWAY sent on a new connection, a stale
//! pooled connection replayed. The rules are the
//! loop's (`session/attempts/decide.rs`, tested there without sockets);
//! this shows every pair asks them.

use crate::h3_support;
use crate::support;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use support::{h2_client, h2_exchange, Proxy};
use testkit::{H2Options, H2Server, HostileUpstream, RawConn, Step, TestCerts};
use tokio::{io::AsyncWriteExt, net::TcpStream};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    Http1,
    Http2,
    /// Over QUIC, to the listener's TLS address.
    Http3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upstream {
    Http1,
    H2c,
}

const PAIRS: [(Client, Upstream); 6] = [
    (Client::Http1, Upstream::Http1),
    (Client::Http1, Upstream::H2c),
    (Client::Http2, Upstream::Http1),
    (Client::Http2, Upstream::H2c),
    (Client::Http3, Upstream::Http1),
    (Client::Http3, Upstream::H2c),
];

/// How the upstream fails, counting its requests from the first.
#[derive(Debug, Clone, Copy, Default)]
struct Fails {
    /// The first n are closed (HTTP/1.1) or reset (HTTP/2) unanswered.
    reset_first: u64,
    /// The next n are answered 503.
    unavailable_first: u64,
    /// HTTP/2 only: the first n streams are refused unprocessed.
    refuse_first: u64,
    /// HTTP/1.1 only: the second request, on the connection kept from
    /// the first, finds it closed (the upstream's keep-alive ran out).
    stale_second: bool,
    /// HTTP/2 only: each connection goes away (GOAWAY) after this many
    /// streams; a request sent meanwhile was not processed.
    goaway_after: Option<u64>,
}

struct Scenario {
    why: &'static str,
    /// The upstream's keys.
    settings: &'static str,
    fails: Fails,
    /// Requests in order: method, body, the status the client gets.
    requests: &'static [(&'static str, &'static [u8], u16)],
    /// Requests the upstream received (refused streams not counted).
    received: u64,
    /// The upstream protocol it applies to (`None`: both).
    only: Option<Upstream>,
}

const RETRY_503: &str = "    retries: 1\n    retry_on: [503]\n    retry_backoff: 1ms\n";
const RETRY_RESET: &str = "    retries: 1\n    retry_on: [reset]\n    retry_backoff: 1ms\n";

const SCENARIOS: &[Scenario] = &[
    Scenario {
        why: "a GET answered with a listed status goes again",
        settings: RETRY_503,
        fails: Fails {
            unavailable_first: 1,
            ..NO_FAILS
        },
        requests: &[("GET", b"", 200)],
        received: 2,
        only: None,
    },
    Scenario {
        why: "a POST answered with a listed status does not",
        settings: RETRY_503,
        fails: Fails {
            unavailable_first: 1,
            ..NO_FAILS
        },
        requests: &[("POST", b"hi", 503)],
        received: 1,
        only: None,
    },
    Scenario {
        why: "a GET reset before any answer goes again with `retry_on: [reset]`",
        settings: RETRY_RESET,
        fails: Fails {
            reset_first: 1,
            ..NO_FAILS
        },
        requests: &[("GET", b"", 200)],
        received: 2,
        only: None,
    },
    Scenario {
        why: "a reset is not retried unless listed",
        settings: "    retries: 1\n    retry_backoff: 1ms\n",
        fails: Fails {
            reset_first: 1,
            ..NO_FAILS
        },
        requests: &[("GET", b"", 502)],
        received: 1,
        only: None,
    },
    Scenario {
        why: "a POST reset before any answer does not go again",
        settings: RETRY_RESET,
        fails: Fails {
            reset_first: 1,
            ..NO_FAILS
        },
        requests: &[("POST", b"hi", 502)],
        received: 1,
        only: None,
    },
    Scenario {
        why: "a refused stream is sent again, within `retries`",
        settings: "    retries: 1\n    retry_on: []\n",
        fails: Fails {
            refuse_first: 1,
            ..NO_FAILS
        },
        requests: &[("GET", b"", 200)],
        received: 1,
        only: Some(Upstream::H2c),
    },
    Scenario {
        why: "a refused stream past `retries` is a 502",
        settings: "    retries: 1\n    retry_on: []\n",
        fails: Fails {
            refuse_first: 2,
            ..NO_FAILS
        },
        requests: &[("GET", b"", 502)],
        received: 0,
        only: Some(Upstream::H2c),
    },
    Scenario {
        why: "a GET on a stale pooled connection is replayed on a new one",
        settings: "    retries: 0\n",
        fails: Fails {
            stale_second: true,
            ..NO_FAILS
        },
        requests: &[("GET", b"", 200), ("GET", b"", 200)],
        received: 3,
        only: Some(Upstream::Http1),
    },
    Scenario {
        why: "a POST on a stale pooled connection is not",
        settings: "    retries: 0\n",
        fails: Fails {
            stale_second: true,
            ..NO_FAILS
        },
        requests: &[("GET", b"", 200), ("POST", b"hi", 502)],
        received: 2,
        only: Some(Upstream::Http1),
    },
    Scenario {
        why: "requests after a GOAWAY go on a new connection, POST too",
        settings: "    retries: 1\n    retry_on: []\n",
        fails: Fails {
            goaway_after: Some(1),
            ..NO_FAILS
        },
        requests: &[("GET", b"", 200), ("POST", b"hi", 200), ("GET", b"", 200)],
        received: 3,
        only: Some(Upstream::H2c),
    },
    Scenario {
        why: "a body past `limits.max_body_bytes` is refused before it goes upstream",
        settings: "    retries: 1\n    retry_on: [reset, 503]\nlimits: { max_body_bytes: 4 }\n",
        fails: NO_FAILS,
        requests: &[("POST", b"too long", 413), ("GET", b"", 200)],
        received: 1,
        only: None,
    },
];

const NO_FAILS: Fails = Fails {
    reset_first: 0,
    unavailable_first: 0,
    refuse_first: 0,
    stale_second: false,
    goaway_after: None,
};

/// An upstream of the given protocol that fails as `fails` says and
/// answers `200 ok` otherwise.
enum Fake {
    Http1(HostileUpstream),
    H2c(H2Server),
}

impl Fake {
    fn start(upstream: Upstream, fails: Fails) -> Self {
        match upstream {
            Upstream::Http1 => {
                let seen = AtomicU64::new(0);
                Self::Http1(HostileUpstream::start(move |_| {
                    let n = seen.fetch_add(1, SeqCst) + 1;
                    let unavailable = fails.reset_first + fails.unavailable_first;
                    if n <= fails.reset_first || (fails.stale_second && n == 2) {
                        vec![Step::Close]
                    } else if n <= unavailable {
                        vec![Step::Write(answer(
                            "503 Service Unavailable",
                            "unavailable",
                        ))]
                    } else {
                        vec![Step::Write(answer("200 OK", "ok"))]
                    }
                }))
            }
            Upstream::H2c => Self::H2c(H2Server::start_with(H2Options {
                refuse_first: fails.refuse_first,
                reset_first: fails.reset_first,
                unavailable_first: fails.unavailable_first,
                goaway_after: fails.goaway_after,
                ..H2Options::default()
            })),
        }
    }

    fn config(&self, settings: &str) -> String {
        let (addr, protocol) = match self {
            Self::Http1(fake) => (fake.addr(), "http1"),
            Self::H2c(fake) => (fake.addr(), "h2c"),
        };
        format!("upstreams:\n  up:\n    hosts: [\"http://{addr}\"]\n    protocol: {protocol}\n{settings}routes:\n  - {{ path: /, upstream: up }}\n")
    }

    fn received(&self) -> u64 {
        match self {
            Self::Http1(fake) => fake.requests().len() as u64,
            Self::H2c(fake) => fake.requests(),
        }
    }
}

fn answer(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The proxy for `client`'s pairs: a plaintext listener, or for HTTP/3 a
/// TLS one that serves `h3` too.
fn proxy_for(client: Client, certs: &TestCerts, config: &str) -> Proxy {
    match client {
        Client::Http1 | Client::Http2 => Proxy::start(config),
        Client::Http3 => h3_support::proxy(certs, "", config),
    }
}

/// Sends one request through the proxy as `client` speaks: its status and body.
async fn send(
    client: Client,
    (proxy, certs): (&Proxy, &TestCerts),
    method: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    match client {
        Client::Http3 => {
            let mut client = h3_support::Client::connect(proxy.addr(), certs).await;
            let request = http::Request::builder()
                .method(method)
                .uri("https://localhost/")
                .header("content-length", body.len())
                .body(())
                .unwrap();
            let (response, body) = client.exchange(request, body).await;
            (response.status().as_u16(), body.into_bytes())
        }
        Client::Http1 => {
            let mut conn = RawConn::connect(proxy.addr()).await;
            let response = conn.request(method, "/", &[], body).await;
            (response.status, response.text().into_bytes())
        }
        Client::Http2 => {
            let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
            let request = http::Request::builder()
                .method(method)
                .uri("http://pairs.test/")
                .header("content-length", body.len())
                .body(())
                .unwrap();
            let (response, body, _) = h2_exchange(&sender, request, body).await;
            (response.status().as_u16(), body)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_decides_alike() {
    let certs = TestCerts::generate();
    for scenario in SCENARIOS {
        for (client, upstream) in PAIRS {
            if scenario.only.is_some_and(|only| only != upstream) {
                continue;
            }
            let pair = format!("{client:?} client, {upstream:?} upstream");
            let fake = Fake::start(upstream, scenario.fails);
            let proxy = proxy_for(client, &certs, &fake.config(scenario.settings));
            for (n, (method, body, status)) in scenario.requests.iter().enumerate() {
                let (got, answer) = send(client, (&proxy, &certs), method, body).await;
                let answer = String::from_utf8_lossy(&answer);
                assert_eq!(
                    got, *status,
                    "{}: {pair}: request {n}: {answer}",
                    scenario.why
                );
                if got == 200 {
                    assert_eq!(answer, "ok", "{}: {pair}", scenario.why);
                }
            }
            assert_eq!(
                fake.received(),
                scenario.received,
                "{}: {pair}: requests the upstream received",
                scenario.why
            );
        }
    }
}

/// An HTTP/1.1 upstream answering `/interim/N` with N `103 Early Hints`
/// (a `link`, and a hop-by-hop field that must not pass) before `FIRST`,
/// as the HTTP/2 fake (`H2Server`) answers the same path.
fn interim_h1_upstream() -> HostileUpstream {
    HostileUpstream::start(|request| {
        let head = String::from_utf8_lossy(request);
        let path = head.split(' ').nth(1).unwrap_or("/");
        let count: usize = path
            .strip_prefix("/interim/")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let hint = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nConnection: x-hop\r\nX-Hop: 1\r\n\r\n";
        let mut answer = hint.repeat(count).into_bytes();
        answer.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nFIRST");
        vec![Step::Write(answer)]
    })
}

/// The interim answers `client` gets for a GET of `path` (each one's
/// status and `link`; an interim head with the upstream's hop field
/// fails the test), then the final status and body.
async fn interim(
    client: Client,
    (proxy, certs): (&Proxy, &TestCerts),
    path: &str,
) -> (Vec<(u16, bool)>, u16, String) {
    use support::interim::{h2_interim, h3_interim};
    match client {
        Client::Http1 => {
            let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
            let request = format!("GET {path} HTTP/1.1\r\nhost: pairs.test\r\n\r\n");
            conn.write_all(request.as_bytes()).await.unwrap();
            let text = read_until_any(&mut conn, &["\r\n\r\nFIRST", "}"]).await;
            assert!(!text.to_ascii_lowercase().contains("x-hop"), "{text}");
            let mut heads: Vec<(u16, bool)> = text
                .split("HTTP/1.1 ")
                .skip(1)
                .map(|head| {
                    let status = head[..3].parse().unwrap();
                    let end = head.find("\r\n\r\n").unwrap_or(head.len());
                    (
                        status,
                        head[..end].to_ascii_lowercase().contains("\r\nlink:"),
                    )
                })
                .collect();
            let (status, _) = heads.pop().unwrap();
            let body = text[text.rfind("\r\n\r\n").unwrap() + 4..].to_string();
            (heads, status, body)
        }
        Client::Http2 => {
            let sender = h2_client(TcpStream::connect(proxy.addr()).await.unwrap()).await;
            let (heads, status, body) = h2_interim(&sender, path).await;
            let heads = heads
                .into_iter()
                .map(|(s, link)| (s.as_u16(), link.is_some()));
            let body = String::from_utf8_lossy(&body).into_owned();
            (heads.collect(), status.as_u16(), body)
        }
        Client::Http3 => {
            let mut client = h3_support::Client::connect(proxy.addr(), certs).await;
            let (heads, status, body) = h3_interim(&mut client, path).await;
            let heads = heads.into_iter().map(|link| (103, link.is_some()));
            (heads.collect(), status.as_u16(), body)
        }
    }
}

/// What `conn` sends until one of `markers` has come (or 5 s pass).
async fn read_until_any(conn: &mut TcpStream, markers: &[&str]) -> String {
    use tokio::io::AsyncReadExt;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut seen = Vec::new();
    while !markers
        .iter()
        .any(|marker| String::from_utf8_lossy(&seen).contains(marker))
    {
        let mut chunk = [0u8; 4096];
        match tokio::time::timeout_at(deadline, conn.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// Interim answers (RFC 9110 15.2) pass from either upstream to every
/// client with their fields and without the hop-by-hop ones, and a flood
/// of them stops at 16 with a 502, on all six pairs alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interim_answers_reach_every_client_alike() {
    let certs = TestCerts::generate();
    for (client, upstream) in PAIRS {
        let pair = format!("{client:?} client, {upstream:?} upstream");
        let (_h1, _h2, url, protocol);
        match upstream {
            Upstream::Http1 => {
                let fake = interim_h1_upstream();
                url = fake.url();
                (_h1, protocol) = (Some(fake), "http1");
            }
            Upstream::H2c => {
                let fake = H2Server::start();
                url = fake.url("");
                (_h2, protocol) = (Some(fake), "h2c");
            }
        }
        let config = format!("upstreams:\n  up:\n    hosts: [\"{url}\"]\n    protocol: {protocol}\nroutes:\n  - {{ path: /, upstream: up }}\n");
        let proxy = proxy_for(client, &certs, &config);

        let (heads, status, body) = interim(client, (&proxy, &certs), "/interim/2").await;
        assert_eq!(heads, [(103, true), (103, true)], "{pair}");
        assert_eq!((status, body.as_str()), (200, "FIRST"), "{pair}");

        let (heads, status, _) = interim(client, (&proxy, &certs), "/interim/20").await;
        assert_eq!((heads.len(), status), (16, 502), "{pair}: the bound");
    }
}
