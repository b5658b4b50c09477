//! Checks that need more than one key, each pointing at the value at fault.

use std::{collections::HashSet, net::SocketAddr};

use serde_saphyr::Location;

use super::{
    handlers::JwtSettings,
    middleware::{ChainRef, HandlerSettings, HANDLER_TYPES},
    schema::{Config, Http2Settings, HttpVersion, Protocol, UpstreamSettings},
};

use super::error::Problem;

mod grpc_web;
mod proxy_protocol;
mod routes;

pub(crate) fn check(config: &Config) -> Result<(), Problem> {
    if config.workers == Some(0) {
        return Err((
            Location::UNKNOWN,
            "workers".into(),
            "must be at least 1".into(),
        ));
    }
    if config.listeners.is_empty() {
        return Err((
            Location::UNKNOWN,
            "listeners".into(),
            "at least one listener is needed (here, or a Gateway from gateway_api)".into(),
        ));
    }
    let mut addresses = HashSet::new();
    for (i, listener) in config.listeners.iter().enumerate() {
        if listener.protocols.is_empty() {
            return Err((
                Location::UNKNOWN,
                format!("listeners[{i}].protocols"),
                "name at least one of http1, h2".into(),
            ));
        }
        if listener.protocols.contains(&HttpVersion::H3) {
            let key = format!("listeners[{i}].protocols");
            if listener.tls.is_none() {
                return Err((
                    listener.address.referenced,
                    key,
                    "h3 needs `tls` (QUIC is always encrypted)".into(),
                ));
            }
            if listener.protocols == [HttpVersion::H3] {
                return Err((
                    listener.address.referenced,
                    key,
                    "h3 is served beside http1 or h2 (their responses advertise it by Alt-Svc)"
                        .into(),
                ));
            }
        }
        if let Some(tls) = &listener.tls {
            tls.check(&format!("listeners[{i}].tls"))?;
        }
        let key = format!("listeners[{i}].address");
        let address = socket_addr(&listener.address.value)
            .map_err(|message| (listener.address.referenced, key.clone(), message))?;
        // Port 0 asks for any free port, so it may appear more than once.
        if address.port() != 0 && !addresses.insert(address) {
            return Err((
                listener.address.referenced,
                key,
                format!("{address} is listed twice"),
            ));
        }
    }
    if let Some(admin) = &config.admin {
        let address = socket_addr(&admin.address.value)
            .map_err(|message| (admin.address.referenced, "admin.address".into(), message))?;
        if addresses.contains(&address) {
            return Err((
                admin.address.referenced,
                "admin.address".into(),
                format!("{address} is also a listener"),
            ));
        }
    }
    for (name, upstream) in &config.upstreams {
        if upstream.hosts.is_empty() {
            return Err((
                Location::UNKNOWN,
                format!("upstreams.{name}.hosts"),
                "at least one host is needed".into(),
            ));
        }
        let protocol = upstream.protocol;
        for (i, host) in upstream.hosts.iter().enumerate() {
            http_host(&host.value.url, protocol).map_err(|message| {
                (
                    host.referenced,
                    format!("upstreams.{name}.hosts[{i}]"),
                    message,
                )
            })?;
        }
        check_upstream_tls(name, upstream)?;
        check_balancing(upstream).map_err(|(key, message)| {
            (
                Location::UNKNOWN,
                format!("upstreams.{name}.{key}"),
                message.to_string(),
            )
        })?;
    }
    check_http2(&config.http2)?;
    proxy_protocol::check(config)?;
    super::compress::check(config)?;
    grpc_web::check(config)?;
    let discovery = &config.discovery;
    if discovery.min_interval.is_zero() || discovery.min_interval > discovery.max_interval {
        return Err((
            Location::UNKNOWN,
            "discovery.min_interval".into(),
            "must be more than 0 and at most discovery.max_interval".into(),
        ));
    }
    routes::check(config)?;
    check_middleware(config)
}

/// Chains name defined handlers; a `jwt` has keys and algorithms.
fn check_middleware(config: &Config) -> Result<(), Problem> {
    let known = |name: &str| {
        config.middleware.0.contains_key(name) || HandlerSettings::defaults(name).is_some()
    };
    let unknown = |name: &str| {
        let hint = if HANDLER_TYPES.contains(&name) {
            format!("`{name}` needs settings under `middleware.{name}`")
        } else {
            format!(
                "no middleware named `{name}`; handler types: {}",
                HANDLER_TYPES.join(", ")
            )
        };
        hint
    };
    for (chain, names) in &config.chains {
        for (i, name) in names.iter().enumerate() {
            if !known(&name.value) {
                return Err((
                    name.referenced,
                    format!("chains.{chain}[{i}]"),
                    unknown(&name.value),
                ));
            }
        }
    }
    let gateway_chain = config.gateway_api.as_ref().and_then(|g| g.chain.as_ref());
    if let Some(ChainRef::Named(name)) = gateway_chain.map(|c| &c.value) {
        if !config.chains.contains_key(name) {
            let at = gateway_chain.map_or(Location::UNKNOWN, |c| c.referenced);
            let message = format!("no chain named `{name}` under `chains`");
            return Err((at, "gateway_api.chain".into(), message));
        }
    }
    for (i, route) in config.routes.iter().enumerate() {
        let Some(chain) = &route.chain else { continue };
        let key = format!("routes[{i}].chain");
        match &chain.value {
            ChainRef::Named(name) if !config.chains.contains_key(name) => {
                return Err((
                    chain.referenced,
                    key,
                    format!("no chain named `{name}` under `chains`"),
                ));
            }
            ChainRef::Named(_) => {}
            ChainRef::List(names) => {
                if let Some(name) = names.iter().find(|n| !known(n)) {
                    return Err((chain.referenced, key, unknown(name)));
                }
            }
        }
    }
    for (name, handler) in &config.middleware.0 {
        if let HandlerSettings::JwtSettings(jwt) = handler {
            check_jwt(name, jwt)?;
        }
    }
    Ok(())
}

/// One source of keys, and at least one algorithm.
fn check_jwt(name: &str, jwt: &JwtSettings) -> Result<(), Problem> {
    if jwt.algorithms.is_empty() {
        return Err((
            Location::UNKNOWN,
            format!("middleware.{name}.algorithms"),
            "list the accepted algorithms, e.g. [RS256]; there is no default".into(),
        ));
    }
    match (&jwt.jwks, &jwt.jwks_url) {
        (Some(_), None) | (None, Some(_)) => Ok(()),
        (Some(file), Some(_)) => Err((
            file.referenced,
            format!("middleware.{name}.jwks"),
            "give `jwks` (a file) or `jwks_url`, not both".into(),
        )),
        (None, None) => Err((
            Location::UNKNOWN,
            format!("middleware.{name}"),
            "needs `jwks` (a file) or `jwks_url`".into(),
        )),
    }
}

/// Client certificate and key come together; TLS settings need an https:// host.
fn check_upstream_tls(name: &str, upstream: &UpstreamSettings) -> Result<(), Problem> {
    let Some(tls) = &upstream.tls else {
        return Ok(());
    };
    match (&tls.cert, &tls.key) {
        (Some(_), None) => {
            return Err((
                Location::UNKNOWN,
                format!("upstreams.{name}.tls.key"),
                "a client certificate needs its key".into(),
            ))
        }
        (None, Some(key)) => {
            return Err((
                key.referenced,
                format!("upstreams.{name}.tls.cert"),
                "a client key needs its certificate".into(),
            ))
        }
        _ => {}
    }
    if upstream
        .hosts
        .iter()
        .all(|h| h.value.url.starts_with("http://"))
    {
        return Err((
            Location::UNKNOWN,
            format!("upstreams.{name}.tls"),
            "TLS settings need https:// hosts".into(),
        ));
    }
    Ok(())
}

fn check_http2(http2: &Http2Settings) -> Result<(), Problem> {
    let window = |value: u64, key: &str| {
        if !(65_535..=(1 << 31) - 1).contains(&value) {
            return Err((
                Location::UNKNOWN,
                format!("http2.{key}"),
                "must be between 64KiB - 1 and 2GiB - 1 bytes (RFC 9113)".into(),
            ));
        }
        Ok(())
    };
    window(http2.stream_window, "stream_window")?;
    window(http2.connection_window, "connection_window")?;
    if !(16_384..=16_777_215).contains(&http2.max_frame_bytes) {
        return Err((
            Location::UNKNOWN,
            "http2.max_frame_bytes".into(),
            "must be between 16KiB and 16MiB - 1 (RFC 9113)".into(),
        ));
    }
    if http2.max_concurrent_streams == 0 {
        return Err((
            Location::UNKNOWN,
            "http2.max_concurrent_streams".into(),
            "must be at least 1".into(),
        ));
    }
    Ok(())
}

fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("`{text}` is not an IP:PORT address (e.g. 0.0.0.0:8000 or [::1]:8000)")
    })
}

/// `http://HOST:PORT` or `https://HOST:PORT` with nothing after the
/// authority, the scheme fitting the protocol.
fn http_host(text: &str, protocol: Protocol) -> Result<(), String> {
    let uri: http::Uri = text
        .parse()
        .map_err(|_| format!("`{text}` is not a URL like http://127.0.0.1:8080"))?;
    match (uri.scheme_str(), protocol) {
        (Some("http"), Protocol::Http1 | Protocol::H2c) | (Some("https"), Protocol::Http1) => {}
        (Some("https"), Protocol::H2) => {}
        (Some("srv"), Protocol::Http1 | Protocol::H2c) => {
            if uri.port().is_some() {
                return Err(format!(
                    "`{text}`: an srv:// host takes its ports from the SRV records; write srv://_http._tcp.NAME"
                ));
            }
        }
        (Some("srv"), Protocol::H2) => {
            return Err(format!(
                "`{text}`: srv:// hosts speak plain HTTP (http1 or h2c), not TLS"
            ))
        }
        (Some("https"), Protocol::H2c) => {
            return Err(format!(
                "`{text}`: h2c is HTTP/2 without TLS; use http://, or protocol: h2 for TLS"
            ))
        }
        (Some("http"), Protocol::H2) => {
            return Err(format!(
                "`{text}`: protocol h2 is HTTP/2 over TLS; use https://, or protocol: h2c"
            ))
        }
        _ => {
            return Err(format!(
                "`{text}`: the scheme must be http://, https:// or srv://"
            ))
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("`{text}` has no host"));
    }
    if uri.path_and_query().is_some_and(|pq| pq.as_str() != "/") {
        return Err(format!("`{text}`: an upstream host has no path"));
    }
    Ok(())
}

/// The load-balancing keys that depend on each other.
fn check_balancing(upstream: &UpstreamSettings) -> Result<(), (&'static str, &'static str)> {
    use crate::config::Balance;
    match (&upstream.hash, upstream.balance) {
        (None, Balance::Hash) => {
            return Err(("hash", "balance: hash needs `hash: { key: ... }`"));
        }
        (Some(_), balance) if balance != Balance::Hash => {
            return Err(("hash", "`hash` is only read with balance: hash"));
        }
        (Some(hash), _) if hash.bounded_load.is_some_and(|f| f.is_nan() || f < 1.0) => {
            return Err(("hash.bounded_load", "must be at least 1.0"));
        }
        _ => {}
    }
    if let Some(sticky) = &upstream.sticky {
        match (&sticky.cookie, &sticky.app_cookie) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(("sticky", "set one of `cookie` and `app_cookie`"));
            }
            (Some(name), None) | (None, Some(name)) if !is_token(name) => {
                return Err(("sticky", "a cookie name is a token (letters, digits, -_.)"));
            }
            _ => {}
        }
        if sticky.key.is_some() && sticky.cookie.is_none() {
            return Err((
                "sticky.key",
                "the key signs `cookie`; app cookies are not signed",
            ));
        }
    }
    if upstream.health.max_ejected_percent > 100 {
        return Err(("health.max_ejected_percent", "0 to 100"));
    }
    if let Some(active) = &upstream.health.active {
        if !active.path.starts_with('/') {
            return Err(("health.active.path", "must start with `/`"));
        }
        if active.rise == 0 || active.fall == 0 {
            return Err(("health.active", "rise and fall are at least 1"));
        }
        if active.interval.is_zero() || active.timeout.is_zero() {
            return Err(("health.active", "interval and timeout must be more than 0"));
        }
        if active.expect.is_empty() {
            return Err(("health.active.expect", "at least one status or range"));
        }
    }
    if upstream
        .retry_budget
        .as_ref()
        .is_some_and(|b| b.percent > 100)
    {
        return Err(("retry_budget.percent", "0 to 100"));
    }
    if upstream.max_pending.is_some() && upstream.max_connections.is_none() {
        return Err((
            "max_pending",
            "requests wait only for a host at `max_connections`",
        ));
    }
    if upstream.max_connections == Some(0) {
        return Err(("max_connections", "at least 1"));
    }
    Ok(())
}

fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}
