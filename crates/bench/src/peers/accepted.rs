//! Every installed peer takes every configuration the bench writes for it:
//! its own check accepts the files where it has one (`envoy --mode
//! validate`, `caddy validate`, `nginx -t`, `haproxy -c`), and started on
//! them it answers requests through to a real backend (HTTP/1.1, TLS,
//! h2c or HTTP/3 clients; HTTP/1.1, h2c or h2 over TLS upstreams) with 200s only.
//! A peer that is not installed is skipped with a line saying so.

use std::{net::SocketAddr, path::Path, process::Command, time::Duration};

use load::{LoadConfig, Protocol, RunControl};
use testkit::{serve, serve_with, test_options, Backend};

use super::{setup, GatewayChain, Handler, ProxySite, Site, TlsFiles, UpstreamProtocol};
use crate::{
    machine::{find_peers, PeerKind},
    process::{Component, Launch, Probe},
};

/// A site and how clients reach it.
struct Case<'a> {
    name: &'static str,
    site: Site<'a>,
    listen: SocketAddr,
    tls_clients: bool,
    h2_clients: bool,
}

fn case<'a>(name: &'static str, tls_clients: bool, h2_clients: bool, site: Site<'a>) -> Case<'a> {
    let listen = match &site {
        Site::Static { listen, .. } => *listen,
        Site::Proxy(proxy) => proxy.listen,
    };
    Case {
        name,
        site,
        listen,
        tls_clients,
        h2_clients,
    }
}

fn free_port() -> SocketAddr {
    testkit::closed_port()
}

fn check(kind: PeerKind) {
    let Some(peer) = find_peers(&[kind]).pop() else {
        return testkit::skip(
            &format!("{}_takes_its_configurations", kind.name()),
            testkit::Need::Peer,
            &format!(
                "{} is not installed, its configurations are not checked ({})",
                kind.name(),
                kind.install()
            ),
        );
    };
    let dir =
        std::env::temp_dir().join(format!("bench-peer-{}-{}", kind.name(), std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let tls = TlsFiles::write(&dir.join("tls")).expect("TLS files");
    let plain = [serve(Backend::Petstore), serve(Backend::Petstore)];
    let secure = serve_with(
        Backend::Petstore,
        backends::ServeOptions {
            tls: Some(backends::TlsFiles {
                cert: tls.cert.clone(),
                key: tls.key.clone(),
            }),
            ..test_options()
        },
    );
    let (jwks, token) = jwt_files(&dir);
    let access_log = dir.join("access.log");
    let upstreams = [plain[0].addr(), plain[1].addr()];
    let secure_upstream = [secure.addr()];
    let proxy = |listen| ProxySite::plain(listen, &upstreams, 128);
    let cases = [
        case(
            "static",
            false,
            false,
            Site::Static {
                listen: free_port(),
                body: backends::PETS,
                content_type: "application/json",
            },
        ),
        case("HTTP/1.1", false, false, Site::Proxy(proxy(free_port()))),
        case(
            "fewest connections",
            false,
            false,
            Site::Proxy(ProxySite {
                least_conn: true,
                ..proxy(free_port())
            }),
        ),
        case(
            "TLS listener",
            true,
            false,
            Site::Proxy(ProxySite {
                tls: Some(&tls),
                ..proxy(free_port())
            }),
        ),
        case(
            "HTTP/3 clients",
            true,
            false,
            Site::Proxy(ProxySite {
                tls: Some(&tls),
                h3_clients: true,
                ..proxy(free_port())
            }),
        ),
        case(
            "h2c clients",
            false,
            true,
            Site::Proxy(ProxySite {
                h2c_clients: true,
                ..proxy(free_port())
            }),
        ),
        case(
            "h2c upstreams",
            false,
            false,
            Site::Proxy(ProxySite {
                upstream_protocol: UpstreamProtocol::H2c,
                ..proxy(free_port())
            }),
        ),
        case(
            "rate limit",
            false,
            false,
            Site::Proxy(ProxySite {
                handler: Some(Handler::RateLimit {
                    per_second: 1_000_000,
                }),
                ..proxy(free_port())
            }),
        ),
        case(
            "jwt",
            false,
            false,
            Site::Proxy(ProxySite {
                handler: Some(Handler::Jwt {
                    jwks: &jwks,
                    issuer: ISSUER,
                    audience: "petstore",
                }),
                ..proxy(free_port())
            }),
        ),
        case(
            "gateway chain",
            false,
            false,
            Site::Proxy(ProxySite {
                handler: Some(Handler::Gateway(GatewayChain {
                    jwks: &jwks,
                    issuer: ISSUER,
                    audience: "petstore",
                    per_second: 1_000_000,
                    access_log: &access_log,
                })),
                ..proxy(free_port())
            }),
        ),
        case(
            "h2 (TLS) upstream",
            false,
            false,
            Site::Proxy(ProxySite {
                upstream_protocol: UpstreamProtocol::H2Tls { ca: &tls.ca },
                ..ProxySite::plain(free_port(), &secure_upstream, 128)
            }),
        ),
    ];
    let mut played = 0;
    for case in &cases {
        let case_dir = dir.join(case.name.replace([' ', '/', '(', ')'], "-"));
        std::fs::create_dir_all(&case_dir).expect("case dir");
        let Ok(setup) = setup(kind, &case.site, &case_dir) else {
            continue;
        };
        played += 1;
        let what = format!("{} {}", kind.name(), case.name);
        for (file, text) in &setup.files {
            std::fs::write(file, text).expect("write the configuration");
        }
        if let Some(check) = &setup.check {
            let output = Command::new(&peer.path)
                .args(check)
                .envs(setup.env.iter().map(|(k, v)| (k, v)))
                .output()
                .expect("run the peer's check");
            assert!(
                output.status.success(),
                "{what}: {} {check:?} refused the configuration:\n{}{}\n{:#?}",
                peer.path.display(),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                setup.files
            );
        }
        let mut component = Component::start(Launch {
            name: what.clone(),
            program: &peer.path,
            args: setup.args.clone(),
            env: setup.env.clone(),
            cpus: None,
            log: case_dir.join("peer.log"),
            listens: vec![case.listen],
            probe: setup.ready.clone().map(Probe::answering),
        })
        .unwrap_or_else(|err| panic!("{what}: {err:#}\n{:#?}", setup.files));
        answers(&what, case, &tls.ca, &token);
        component.check_alive(&what).expect("alive");
        component.stop();
    }
    assert!(played >= 4, "{}: only {played} cases played", kind.name());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A short load through the peer, with a Host that names no site (as the
/// protocols group sends): every answer a 200 with the petstore's body.
fn answers(what: &str, case: &Case<'_>, ca: &Path, token: &str) {
    let bearer = format!("Bearer {token}");
    let scheme = if case.tls_clients { "https" } else { "http" };
    let url = format!("{scheme}://{}/v1/pets", case.listen);
    let mut config = LoadConfig::new(&[(http::Method::GET, url)]).expect("a load for one URL");
    config.connections = 2;
    config.duration = Duration::from_millis(300);
    config.warmup = Duration::ZERO;
    config.cacert = Some(ca.to_path_buf());
    config.headers = vec![
        (http::header::HOST, http::HeaderValue::from_static("h1")),
        (
            http::header::AUTHORIZATION,
            http::HeaderValue::from_str(&bearer).expect("a header value"),
        ),
    ];
    if case.h2_clients {
        config.protocol = Protocol::Http2;
        config.streams = 4;
    }
    if matches!(&case.site, Site::Proxy(proxy) if proxy.h3_clients) {
        // QUIC on the TLS listener's port.
        config.protocol = Protocol::Http3;
        config.streams = 4;
    }
    // A peer that has just started (or a loaded machine) may answer nothing
    // within the first 300 ms: the load goes again until it has answers.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let report = loop {
        let report = load::run(&config, RunControl::default()).expect("the load runs");
        if report.requests > 0 || std::time::Instant::now() > deadline {
            break report;
        }
    };
    assert!(report.requests > 0, "{what}: no answer within 15 s");
    assert_eq!(report.errors.total(), 0, "{what}: {:?}", report.errors);
    assert_eq!(report.non_2xx_3xx, 0, "{what}: {:?}", report.status);
    if !case.tls_clients && !case.h2_clients {
        let answer = get_closing(case.listen, &bearer);
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with(backends::PETS),
            "{what}: {answer}"
        );
        if let Site::Proxy(ProxySite {
            handler: Some(Handler::Jwt { .. } | Handler::Gateway(_)),
            ..
        }) = case.site
        {
            let refused = get_closing(case.listen, "Bearer not.a.token");
            assert!(refused.starts_with("HTTP/1.1 401"), "{what}: {refused}");
        }
        if let Site::Proxy(ProxySite {
            handler: Some(Handler::Gateway(chain)),
            ..
        }) = case.site
        {
            // The response header is set, and every request has its log
            // line (Envoy writes its file logs out every 10 s, its
            // --file-flush-interval-msec, or when 64 KiB are buffered).
            let lower = answer.to_ascii_lowercase();
            assert!(lower.contains("\r\nx-served-by: "), "{what}: {answer}");
            let lines = || {
                std::fs::read_to_string(chain.access_log)
                    .unwrap_or_default()
                    .lines()
                    .count() as u64
            };
            let deadline = std::time::Instant::now() + Duration::from_secs(12);
            while lines() < report.requests && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            assert!(
                lines() >= report.requests,
                "{what}: {} log lines for {} requests",
                lines(),
                report.requests
            );
        }
    }
    // HTTP/2's bytes are the bodies alone.
    let per_answer = report.bytes_read / report.requests;
    assert!(
        per_answer >= backends::PETS.len() as u64,
        "{what}: {per_answer} bytes per answer, less than the petstore's body"
    );
}

/// The issuer the test token names and the jwt sites require.
const ISSUER: &str = "https://issuer.example";

/// A JWKS file (RS256) and a token it verifies, for audience `petstore`.
fn jwt_files(dir: &Path) -> (std::path::PathBuf, String) {
    let key = jwt::generate_key(jwt::Algorithm::RS256, "check").expect("a key");
    let jwks = dir.join("jwks.json");
    std::fs::write(&jwks, key.jwks_json()).expect("write the JWKS");
    let token = key
        .sign(&serde_json::json!({
            "iss": ISSUER,
            "aud": "petstore",
            "sub": "check",
            "iat": jwt::unix_now(),
            "exp": jwt::unix_now() + 3600,
        }))
        .expect("a token");
    (jwks, token)
}

/// `GET /v1/pets` with `Host: h1`, this `Authorization` and `Connection:
/// close`: the whole answer.
fn get_closing(addr: SocketAddr, authorization: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    stream
        .write_all(
            format!(
                "GET /v1/pets HTTP/1.1\r\nHost: h1\r\nAuthorization: {authorization}\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[test]
fn haproxy_takes_its_configurations() {
    check(PeerKind::Haproxy);
}

#[test]
fn nginx_takes_its_configurations() {
    check(PeerKind::Nginx);
}

#[test]
fn envoy_takes_its_configurations() {
    check(PeerKind::Envoy);
}

#[test]
fn traefik_takes_its_configurations() {
    check(PeerKind::Traefik);
}

#[test]
fn caddy_takes_its_configurations() {
    check(PeerKind::Caddy);
}

#[test]
fn nghttpx_takes_its_configurations() {
    check(PeerKind::Nghttpx);
}
