//! `oidc` against a real OpenID Connect provider on loopback (panva's
//! oidc-provider, bench/oidc): login, callback, session, refresh and
//! logout over each client protocol; a forged state, a replayed code, a
//! tampered cookie and a cookie sealed with another key all refused, and
//! a rotated key list still opening the old cookies.

use std::{
    collections::HashMap,
    io::{BufRead as _, BufReader},
    net::SocketAddr,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use base64::Engine as _;
use testkit::TestCerts;
use tokio::net::TcpStream;

use super::{h1_exchange, send, Reply, PROTOCOLS};
use crate::support::{Echo, Proxy};

/// The provider, killed on drop.
struct Provider {
    child: Child,
    issuer: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Provider {
    fn start(test: &str, redirect: &str, after_logout: &str, id_ttl: u64) -> Option<Self> {
        let script = std::env::var_os("SLUICE_OIDC_PROVIDER")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                Some(
                    std::path::PathBuf::from(std::env::var_os("HOME")?)
                        .join(".cache/sluice/oidc/provider.mjs"),
                )
            })
            .filter(|path| path.is_file());
        let Some(script) = script else {
            testkit::skip(
                test,
                testkit::Need::Oidc,
                "no OIDC provider (bash bench/oidc/install.sh; needs node and npm)",
            );
            return None;
        };
        let mut child = Command::new("node")
            .arg(script)
            .args([
                "--redirect",
                redirect,
                "--after-logout",
                after_logout,
                "--id-ttl",
                &id_ttl.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let issuer = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("provider said {line:?}"))
            .to_string();
        Some(Self { child, issuer })
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn key(byte: u8) -> String {
    base64::engine::general_purpose::STANDARD.encode([byte; 32])
}

/// A proxy on `port` (TLS for `[h2, http1, h3]`) whose `/` is behind `oidc`.
fn proxy(certs: &TestCerts, port: u16, echo: SocketAddr, issuer: &str, keys: &[String]) -> Proxy {
    let keys = keys
        .iter()
        .map(|k| format!("\"{k}\""))
        .collect::<Vec<_>>()
        .join(", ");
    Proxy::start_yaml(&format!(
        "workers: 1\nlisteners:\n  - address: 127.0.0.1:{port}\n    protocols: [h2, http1, h3]\n    tls: {{ cert: \"{}\", key: \"{}\" }}\n\
         admin: {{ address: 127.0.0.1:0 }}\nupstreams:\n  echo:\n    hosts: [\"http://{echo}\"]\n\
         middleware:\n  oidc: {{ issuer: \"{issuer}\", client_id: sluice, client_secret: sluice-test-client-secret, redirect_url: \"https://localhost:{port}/oauth2/callback\", after_logout: \"https://localhost:{port}/bye\", cookie_keys: [{keys}], leeway: 0s, forward_claims: {{ sub: x-user, email: x-email }} }}\n\
         routes:\n  - {{ path: /, chain: [oidc], upstream: echo }}\n",
        certs.cert_path.display(),
        certs.key_path.display(),
    ))
}

/// A browser: cookies by origin, redirects followed.
#[derive(Default)]
struct Browser {
    jar: HashMap<String, HashMap<String, String>>,
}

impl Browser {
    fn cookies(&self, origin: &str) -> String {
        self.jar
            .get(origin)
            .map(|c| {
                c.iter()
                    .map(|(n, v)| format!("{n}={v}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default()
    }

    fn keep(&mut self, origin: &str, reply: &Reply) {
        for value in reply.headers.get_all("set-cookie") {
            let text = value.to_str().unwrap();
            let (pair, attributes) = text.split_once(';').unwrap_or((text, ""));
            let (name, value) = pair.split_once('=').unwrap();
            let jar = self.jar.entry(origin.to_string()).or_default();
            if attributes.to_ascii_lowercase().contains("max-age=0") || value.is_empty() {
                jar.remove(name.trim());
            } else {
                jar.insert(name.trim().to_string(), value.to_string());
            }
        }
    }

    /// One request: to the proxy over `protocol`, or to the provider over HTTP/1.1.
    async fn request(
        &mut self,
        protocol: &'static str,
        proxy: SocketAddr,
        certs: &TestCerts,
        url: &str,
    ) -> Reply {
        let uri: http::Uri = url.parse().unwrap();
        let origin = format!("{}", uri.authority().unwrap());
        let path = uri.path_and_query().unwrap().as_str().to_string();
        let cookies = self.cookies(&origin);
        let mut headers = vec![("accept", "text/html")];
        if !cookies.is_empty() {
            headers.push(("cookie", cookies.as_str()));
        }
        let reply = if uri.scheme_str() == Some("https") {
            send(protocol, proxy, certs, "GET", &path, &headers, b"").await
        } else {
            let tcp = TcpStream::connect(origin.as_str())
                .await
                .unwrap_or_else(|err| panic!("{url}: {err}"));
            let mut headers = headers.clone();
            headers.push(("host", origin.as_str()));
            h1_exchange(tcp, "GET", &path, &headers, b"").await
        };
        self.keep(&origin, &reply);
        reply
    }

    /// Follows redirects from `url` until an answer that is not one, or
    /// until one to `stop` (a URL prefix); that answer and the last URL.
    async fn follow(
        &mut self,
        protocol: &'static str,
        proxy: SocketAddr,
        certs: &TestCerts,
        url: &str,
        stop: Option<&str>,
    ) -> (Reply, String) {
        let mut url = url.to_string();
        for _ in 0..12 {
            let reply = self.request(protocol, proxy, certs, &url).await;
            if !matches!(reply.status, 301 | 302 | 303 | 307) {
                return (reply, url);
            }
            let location = reply.header("location").unwrap().to_string();
            let base: http::Uri = url.parse().unwrap();
            url = if location.starts_with('/') {
                format!(
                    "{}://{}{location}",
                    base.scheme_str().unwrap(),
                    base.authority().unwrap()
                )
            } else {
                location
            };
            if stop.is_some_and(|stop| url.starts_with(stop)) {
                return (reply, url);
            }
        }
        panic!("too many redirects, last {url}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_logs_in_keeps_refreshes_and_ends_a_session_over_every_protocol() {
    let test = "oidc_logs_in_keeps_refreshes_and_ends_a_session_over_every_protocol";
    let port = free_port();
    let app = format!("https://localhost:{port}");
    let Some(provider) = Provider::start(
        test,
        &format!("{app}/oauth2/callback"),
        &format!("{app}/bye"),
        3,
    ) else {
        return;
    };
    let echo = Echo::start("e").await;
    let certs = TestCerts::generate();
    let proxy = proxy(&certs, port, echo.addr, &provider.issuer, &[key(1)]);
    let addr = proxy.addr();
    let mut browsers = Vec::new();
    for protocol in PROTOCOLS {
        let mut browser = Browser::default();
        let first = browser
            .request(protocol, addr, &certs, &format!("{app}/app/page?x=1"))
            .await;
        assert_eq!(first.status, 302, "{first:?}");
        assert!(
            first
                .header("location")
                .unwrap()
                .starts_with(&format!("{}/auth?", provider.issuer)),
            "{first:?}"
        );
        assert!(first
            .header("location")
            .unwrap()
            .contains("code_challenge_method=S256"));
        let (reply, url) = browser
            .follow(protocol, addr, &certs, &format!("{app}/app/page?x=1"), None)
            .await;
        assert_eq!(reply.status, 200, "{protocol} ended at {url}: {reply:?}");
        assert_eq!(url, format!("{app}/app/page?x=1"), "{protocol}");
        assert_eq!(
            reply.upstream_saw("x-user").as_deref(),
            Some("alice"),
            "{protocol}"
        );
        assert_eq!(
            reply.upstream_saw("x-email").as_deref(),
            Some("alice@example.test"),
            "{protocol}"
        );
        let cookie = reply.upstream_saw("cookie").unwrap_or_default();
        assert!(
            !cookie.contains("sluice_session"),
            "the session cookie went upstream over {protocol}: {cookie}"
        );
        let forged = browser.cookies(&format!("localhost:{port}"));
        let again = send(
            protocol,
            addr,
            &certs,
            "GET",
            "/other",
            &[("cookie", &forged), ("x-user", "mallory")],
            b"",
        )
        .await;
        assert_eq!(again.status, 200, "{again:?}");
        assert_eq!(
            again.upstream_saw("x-user").as_deref(),
            Some("alice"),
            "a forged claim header passed"
        );
        browsers.push((protocol, browser));
    }

    // The ID tokens live 3 s: each session is refreshed once it expires.
    let deadline = Instant::now() + Duration::from_secs(15);
    for (protocol, browser) in &mut browsers {
        loop {
            let reply = browser
                .request(protocol, addr, &certs, &format!("{app}/later"))
                .await;
            assert_eq!(reply.status, 200, "{protocol}: {reply:?}");
            assert_eq!(reply.upstream_saw("x-user").as_deref(), Some("alice"));
            if reply
                .header("set-cookie")
                .is_some_and(|c| c.starts_with("sluice_session="))
            {
                break;
            }
            assert!(Instant::now() < deadline, "{protocol}: never refreshed");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    for (protocol, browser) in &mut browsers {
        let logout = browser
            .request(protocol, addr, &certs, &format!("{app}/oauth2/logout"))
            .await;
        assert_eq!(logout.status, 302, "{logout:?}");
        let location = logout.header("location").unwrap();
        assert!(
            location.starts_with(&format!("{}/session/end?id_token_hint=", provider.issuer)),
            "{location}"
        );
        assert!(
            browser.cookies(&format!("localhost:{port}")).is_empty()
                || !browser
                    .cookies(&format!("localhost:{port}"))
                    .contains("sluice_session=")
        );
        let after = browser
            .request(protocol, addr, &certs, &format!("{app}/app"))
            .await;
        assert_eq!(
            after.status, 302,
            "{protocol}: still logged in after logout: {after:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_refuses_forged_state_replayed_codes_and_foreign_or_tampered_cookies() {
    let test = "oidc_refuses_forged_state_replayed_codes_and_foreign_or_tampered_cookies";
    let port = free_port();
    let app = format!("https://localhost:{port}");
    let Some(provider) = Provider::start(
        test,
        &format!("{app}/oauth2/callback"),
        &format!("{app}/bye"),
        3600,
    ) else {
        return;
    };
    let echo = Echo::start("e").await;
    let certs = TestCerts::generate();
    let proxy = proxy(&certs, port, echo.addr, &provider.issuer, &[key(1)]);
    let addr = proxy.addr();
    let origin = format!("localhost:{port}");

    for protocol in PROTOCOLS {
        // Up to the provider's redirect to the callback.
        let mut browser = Browser::default();
        let (_, callback) = browser
            .follow(
                protocol,
                addr,
                &certs,
                &format!("{app}/x"),
                Some(&format!("{app}/oauth2/callback")),
            )
            .await;
        let forged_state = callback.replace("state=", "state=forged");
        let forged = browser.request(protocol, addr, &certs, &forged_state).await;
        assert_eq!(forged.status, 400, "{protocol}: {forged:?}");
        assert!(forged.body.contains("state does not match"), "{forged:?}");
        let login_cookie = browser.cookies(&origin);
        let good = browser.request(protocol, addr, &certs, &callback).await;
        assert_eq!(good.status, 302, "{protocol}: {good:?}");
        let session = browser.jar[&origin]["sluice_session"].clone();
        // The same callback again, with the login cookie it had: the code is spent.
        let path = callback.strip_prefix(&app).unwrap();
        let replayed = send(
            protocol,
            addr,
            &certs,
            "GET",
            path,
            &[("cookie", &login_cookie)],
            b"",
        )
        .await;
        assert_eq!(
            replayed.status, 401,
            "{protocol}: a replayed code was taken: {replayed:?}"
        );
        let no_cookie = send(protocol, addr, &certs, "GET", path, &[], b"").await;
        assert_eq!(no_cookie.status, 400, "{no_cookie:?}");

        let ok = send(
            protocol,
            addr,
            &certs,
            "GET",
            "/y",
            &[("cookie", &format!("sluice_session={session}"))],
            b"",
        )
        .await;
        assert_eq!(ok.status, 200, "{ok:?}");
        let mut tampered = session.clone().into_bytes();
        let middle = tampered.len() / 2;
        tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        let refused = send(
            protocol,
            addr,
            &certs,
            "GET",
            "/y",
            &[("cookie", &format!("sluice_session={tampered}"))],
            b"",
        )
        .await;
        assert_eq!(
            refused.status, 302,
            "{protocol}: a tampered cookie was taken: {refused:?}"
        );
        // A login cookie is no session cookie.
        let swapped = login_cookie.replace("sluice_session_login=", "sluice_session=");
        let refused = send(
            protocol,
            addr,
            &certs,
            "GET",
            "/y",
            &[("cookie", &swapped)],
            b"",
        )
        .await;
        assert_eq!(refused.status, 302, "{refused:?}");
        let post = send(protocol, addr, &certs, "POST", "/y", &[], b"{}").await;
        assert_eq!(post.status, 401, "{post:?}");
    }

    // Another proxy with another key refuses the cookie; one whose keys
    // were rotated (a new key first, the old one after) still opens it.
    let mut browser = Browser::default();
    let (reply, _) = browser
        .follow("HTTP/1.1", addr, &certs, &format!("{app}/z"), None)
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let session = format!("sluice_session={}", browser.jar[&origin]["sluice_session"]);
    drop(proxy);
    let other = self::proxy(&certs, free_port(), echo.addr, &provider.issuer, &[key(2)]);
    let refused = send(
        "HTTP/2",
        other.addr(),
        &certs,
        "GET",
        "/z",
        &[("cookie", &session)],
        b"",
    )
    .await;
    assert_eq!(
        refused.status, 302,
        "a cookie of another key was taken: {refused:?}"
    );
    drop(other);
    let rotated = self::proxy(
        &certs,
        free_port(),
        echo.addr,
        &provider.issuer,
        &[key(2), key(1)],
    );
    let kept = send(
        "HTTP/2",
        rotated.addr(),
        &certs,
        "GET",
        "/z",
        &[("cookie", &session)],
        b"",
    )
    .await;
    assert_eq!(
        kept.status, 200,
        "the rotated keys lost the session: {kept:?}"
    );
    assert_eq!(kept.upstream_saw("x-user").as_deref(), Some("alice"));
}
