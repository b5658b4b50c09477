//! The middleware group's `oidc` row. sluice's `oidc` handler needs an
//! OpenID provider to start (it reads the discovery document) and a
//! session to let a request through, so the row has both: panva's
//! oidc-provider (bench/oidc, installed by `bash bench/oidc/install.sh`)
//! on loopback, and one scripted login through sluice, as the oidc
//! integration test drives it: a browser following redirects (sluice's
//! 302 to the provider with a PKCE challenge, the provider's login page
//! that signs in at once, the callback that trades the code), keeping
//! cookies. The session cookie it ends with goes with every request of
//! the row, so that each pays what a logged-in browser's request pays:
//! the cookie opened (AES-256-GCM), the ID token verified (from the
//! verifier's cache), its `sub` forwarded, the cookie stripped upstream.
//!
//! Without node or the installed provider the row is left out with a
//! note; a login that does not end in the upstream's 200 leaves it out
//! too (the row would measure redirects to the login).

use std::{
    collections::{BTreeMap, HashMap},
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use base64::Engine as _;

use crate::{
    machine::find_program,
    process::{Component, Launch},
    stage::Bench,
};

/// The row's name, and its handler's.
pub(super) const OIDC_ROW: &str = "oidc";
/// The client the provider knows (bench/oidc/provider.mjs).
const CLIENT_SECRET: &str = "sluice-test-client-secret";
/// The session cookie's name (the handler's default).
const SESSION_COOKIE: &str = "sluice_session";
/// How long the provider gets to say where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// One exchange of the scripted login.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most redirects the login follows (it takes five).
const MAX_REDIRECTS: usize = 12;
/// Most bytes of one answer the login reads.
const MAX_ANSWER: usize = 1 << 20;

/// node and the installed provider script, or why the row cannot run.
pub(super) fn provider() -> Result<(PathBuf, PathBuf), String> {
    let node = find_program("node").ok_or("node is not installed")?;
    let script = std::env::var_os("SLUICE_OIDC_PROVIDER")
        .map(PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("SLUICE_CACHE")
                .map(PathBuf::from)
                .or_else(|| Some(PathBuf::from(std::env::var_os("HOME")?).join(".cache/sluice")))?;
            Some(cache.join("oidc/provider.mjs"))
        })
        .filter(|script| script.is_file())
        .ok_or("the OIDC provider is not installed (bash bench/oidc/install.sh; needs npm)")?;
    Ok((node, script))
}

/// The provider running, and its issuer URL.
pub(super) struct Provider {
    pub(super) component: Component,
    pub(super) issuer: String,
}

/// The provider on a loopback port of its own choosing, which knows
/// `redirect` as the client's callback; its ID tokens live a day, longer
/// than any run, so that no request of the row refreshes one.
pub(super) fn start(
    bench: &Bench<'_>,
    (node, script): (PathBuf, PathBuf),
    redirect: &str,
) -> anyhow::Result<Provider> {
    let name = "oidc-provider".to_string();
    let log = bench.log(&name);
    let mut component = Component::start(Launch {
        name,
        program: &node,
        args: vec![
            script.display().to_string(),
            "--redirect".into(),
            redirect.into(),
            "--after-logout".into(),
            redirect.into(),
            "--id-ttl".into(),
            "86400".into(),
            "--secret".into(),
            CLIENT_SECRET.into(),
        ],
        env: Vec::new(),
        cpus: bench.cpus(false),
        log: log.clone(),
        listens: Vec::new(),
        probe: None,
    })?;
    // It prints `listening http://127.0.0.1:PORT` once it serves.
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(issuer) = said.lines().find_map(|l| l.strip_prefix("listening ")) {
            return Ok(Provider {
                component,
                issuer: issuer.trim().to_string(),
            });
        }
        component.check_alive("its start")?;
        if Instant::now() >= deadline {
            bail!(
                "the OIDC provider did not say where it listens within {}s (its log: {})",
                START_TIMEOUT.as_secs(),
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The handler for the row: `issuer`, the callback on the route's host,
/// a fresh cookie key, `sub` forwarded as `x-user`.
pub(super) fn handler_yaml(issuer: &str, redirect: &str) -> anyhow::Result<String> {
    use ring::rand::SecureRandom as _;
    let mut key = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| anyhow::anyhow!("cannot draw a cookie key"))?;
    let key = base64::engine::general_purpose::STANDARD.encode(key);
    Ok(format!(
        "  {OIDC_ROW}: {{ issuer: \"{issuer}\", client_id: sluice, client_secret: \
         {CLIENT_SECRET}, redirect_url: \"{redirect}\", cookie_keys: [\"{key}\"], \
         forward_claims: {{ sub: x-user }} }}\n"
    ))
}

/// One answer of the login: status, headers, body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The login a browser makes, scripted: `GET path` on sluice at `listen`
/// as the site `host`, redirects followed (to the provider and back),
/// cookies kept per site. Returns the `Cookie` header a logged-in
/// browser sends, once a request with it got the upstream's 200.
pub(super) fn login(listen: SocketAddr, host: &str, path: &str) -> anyhow::Result<String> {
    let mut jar: HashMap<String, BTreeMap<String, String>> = HashMap::new();
    let mut url = format!("http://{host}{path}");
    let mut answer = None;
    for _ in 0..MAX_REDIRECTS {
        let (site, target) = split_url(&url)?;
        let addr = if site == host {
            listen
        } else {
            site.parse()
                .with_context(|| format!("a redirect to {url}, not to loopback"))?
        };
        let cookies = jar.get(&site).map(cookie_header).unwrap_or_default();
        let got = exchange(addr, &site, &target, &cookies).with_context(|| format!("GET {url}"))?;
        keep_cookies(jar.entry(site.clone()).or_default(), &got);
        if !matches!(got.status, 301 | 302 | 303 | 307 | 308) {
            answer = Some(got);
            break;
        }
        let location = got
            .header("location")
            .with_context(|| format!("GET {url}: a {} without a Location", got.status))?;
        url = if location.starts_with('/') {
            format!("http://{site}{location}")
        } else {
            location.to_string()
        };
    }
    let answer = answer.with_context(|| format!("more than {MAX_REDIRECTS} redirects"))?;
    if answer.status != 200 || url != format!("http://{host}{path}") {
        bail!(
            "the login ended at {url} with {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
                .chars()
                .take(300)
                .collect::<String>()
        );
    }
    let session = jar
        .get(host)
        .and_then(|cookies| cookies.get(SESSION_COOKIE))
        .with_context(|| format!("the login set no {SESSION_COOKIE} cookie"))?;
    let cookie = format!("{SESSION_COOKIE}={session}");
    // What every request of the row will send, alone: the upstream's 200.
    let check = exchange(listen, host, path, &cookie)?;
    if check.status != 200 {
        bail!(
            "a request with the session cookie got {} (Location: {}), not the upstream's 200",
            check.status,
            check.header("location").unwrap_or("none")
        );
    }
    Ok(cookie)
}

/// `http://SITE/TARGET` as (SITE, /TARGET).
fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("{url}: not an http:// URL"))?;
    let (site, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let target = if target.is_empty() { "/" } else { target };
    Ok((site.to_string(), target.to_string()))
}

fn cookie_header(cookies: &BTreeMap<String, String>) -> String {
    cookies
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Each `Set-Cookie` of `answer` into `jar`; one cleared (empty, or
/// `Max-Age=0`) taken out. Paths are not kept: every cookie of a site
/// goes with every request to it.
fn keep_cookies(jar: &mut BTreeMap<String, String>, answer: &Answer) {
    for (name, value) in &answer.headers {
        if !name.eq_ignore_ascii_case("set-cookie") {
            continue;
        }
        let (pair, attributes) = value.split_once(';').unwrap_or((value, ""));
        let Some((name, value)) = pair.split_once('=') else {
            continue;
        };
        let cleared = attributes.to_ascii_lowercase().contains("max-age=0");
        if cleared || value.trim().is_empty() {
            jar.remove(name.trim());
        } else {
            jar.insert(name.trim().to_string(), value.trim().to_string());
        }
    }
}

/// `GET target` on a fresh connection to `addr` with `Host: site`,
/// `Connection: close`, the answer read to its end.
fn exchange(addr: SocketAddr, site: &str, target: &str, cookies: &str) -> anyhow::Result<Answer> {
    let mut conn = TcpStream::connect_timeout(&addr, EXCHANGE_TIMEOUT)
        .with_context(|| format!("cannot connect to {addr}"))?;
    conn.set_read_timeout(Some(EXCHANGE_TIMEOUT))?;
    conn.set_write_timeout(Some(EXCHANGE_TIMEOUT))?;
    let mut request = format!(
        "GET {target} HTTP/1.1\r\nHost: {site}\r\nAccept: text/html\r\nConnection: close\r\n"
    );
    if !cookies.is_empty() {
        request.push_str(&format!("Cookie: {cookies}\r\n"));
    }
    request.push_str("\r\n");
    conn.write_all(request.as_bytes())?;
    let mut bytes = Vec::new();
    conn.take(MAX_ANSWER as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading the answer from {addr}"))?;
    if bytes.len() > MAX_ANSWER {
        bail!("an answer over {MAX_ANSWER} bytes");
    }
    parse_answer(&bytes)
}

fn parse_answer(bytes: &[u8]) -> anyhow::Result<Answer> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Response::new(&mut fields);
    let httparse::Status::Complete(length) = head.parse(bytes).context("not an HTTP answer")?
    else {
        bail!("the answer ended inside its head");
    };
    let headers = head
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_string(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    Ok(Answer {
        status: head.code.context("an answer without a status")?,
        headers,
        body: bytes[length..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_site_and_target() {
        let (site, target) = split_url("http://127.0.0.1:4000/auth?x=1").unwrap();
        assert_eq!(
            (site.as_str(), target.as_str()),
            ("127.0.0.1:4000", "/auth?x=1")
        );
        let (site, target) = split_url("http://oidc").unwrap();
        assert_eq!((site.as_str(), target.as_str()), ("oidc", "/"));
        assert!(split_url("https://oidc/").is_err());
    }

    #[test]
    fn cookies_are_kept_and_cleared() {
        let answer = parse_answer(
            b"HTTP/1.1 302 Found\r\nSet-Cookie: a=1; Path=/x; HttpOnly\r\n\
              Set-Cookie: b=2\r\nSet-Cookie: gone=; Max-Age=0\r\nLocation: /y\r\n\r\nbody",
        )
        .unwrap();
        assert_eq!(answer.status, 302);
        assert_eq!(answer.header("location"), Some("/y"));
        assert_eq!(answer.body, b"body");
        let mut jar = BTreeMap::from([("gone".to_string(), "old".to_string())]);
        keep_cookies(&mut jar, &answer);
        assert_eq!(cookie_header(&jar), "a=1; b=2");
        let cleared =
            parse_answer(b"HTTP/1.1 200 OK\r\nSet-Cookie: a=x; Max-Age=0\r\n\r\n").unwrap();
        keep_cookies(&mut jar, &cleared);
        assert_eq!(cookie_header(&jar), "b=2");
    }
}
