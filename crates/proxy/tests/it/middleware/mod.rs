//! Each middleware handler through the proxy over real sockets: what it
//! does to good requests and how it refuses hostile ones. One module per
//! group of handlers; what they share is here.

mod auth;
mod fault;
mod headers;
mod limits;
mod metrics_and_access_log;
mod redirect_https;
mod validate;

use crate::support::Proxy;
use testkit::RawConn;

/// A proxy with one `echo` upstream at `addr`, the given middleware
/// section, and routes (`- { path: ..., chain: ..., upstream: echo }` lines).
fn proxy_with(addr: std::net::SocketAddr, middleware: &str, routes: &str) -> Proxy {
    Proxy::start(&format!(
        "upstreams:\n  echo:\n    hosts: [\"http://{addr}\"]\n{middleware}routes:\n{routes}"
    ))
}

/// The value of `name` in the request head the echo upstream received.
pub(crate) fn upstream_saw(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

/// A JWKS file holding the public keys of `keys`.
fn write_jwks(path: &std::path::Path, keys: &[&jwt::GeneratedKey]) {
    let mut all = Vec::new();
    for key in keys {
        let doc: serde_json::Value = serde_json::from_str(&key.jwks_json()).unwrap();
        all.extend(doc["keys"].as_array().unwrap().iter().cloned());
    }
    std::fs::write(path, serde_json::json!({ "keys": all }).to_string()).unwrap();
}

fn claims(scope: &str, exp_offset: i64) -> serde_json::Value {
    let now = jwt::unix_now() as i64;
    serde_json::json!({
        "iss": "https://issuer.example",
        "aud": "petstore",
        "sub": "alice",
        "scope": scope,
        "iat": now,
        "exp": now + exp_offset,
    })
}

/// The value of the unlabelled counter `name` on the admin's `/metrics`.
async fn counter(admin: std::net::SocketAddr, name: &str) -> u64 {
    let metrics = RawConn::connect(admin).await.get("/metrics").await.text();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
        .trim()
        .parse()
        .unwrap()
}
