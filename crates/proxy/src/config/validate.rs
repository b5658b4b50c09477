//! Checks that need more than one key, each pointing at the value at fault.

use std::{collections::HashSet, net::SocketAddr};

use serde_saphyr::Location;

use super::schema::Config;

/// Where, which key, and what is wrong.
pub(crate) type Problem = (Location, String, String);

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
            "at least one listener is needed".into(),
        ));
    }
    let mut addresses = HashSet::new();
    for (i, listener) in config.listeners.iter().enumerate() {
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
        for (i, host) in upstream.hosts.iter().enumerate() {
            http_host(&host.value).map_err(|message| {
                (
                    host.referenced,
                    format!("upstreams.{name}.hosts[{i}]"),
                    message,
                )
            })?;
        }
    }
    for (i, route) in config.routes.iter().enumerate() {
        if !route.path.value.starts_with('/') {
            return Err((
                route.path.referenced,
                format!("routes[{i}].path"),
                "must start with `/`".into(),
            ));
        }
        for (j, method) in route.methods.iter().enumerate() {
            if http::Method::from_bytes(method.value.as_bytes()).is_err() || method.value.is_empty()
            {
                return Err((
                    method.referenced,
                    format!("routes[{i}].methods[{j}]"),
                    format!("`{}` is not an HTTP method", method.value),
                ));
            }
        }
        if !config.upstreams.contains_key(&route.upstream.value) {
            let known: Vec<&str> = config.upstreams.keys().map(String::as_str).collect();
            return Err((
                route.upstream.referenced,
                format!("routes[{i}].upstream"),
                format!(
                    "no upstream named `{}`; defined: {}",
                    route.upstream.value,
                    if known.is_empty() {
                        "none".into()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        }
    }
    Ok(())
}

fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("`{text}` is not an IP:PORT address (e.g. 0.0.0.0:8000 or [::1]:8000)")
    })
}

/// `http://HOST:PORT` with nothing after the authority.
fn http_host(text: &str) -> Result<(), String> {
    let uri: http::Uri = text
        .parse()
        .map_err(|_| format!("`{text}` is not a URL like http://127.0.0.1:8080"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!(
            "`{text}`: only http:// upstreams are supported so far"
        ));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("`{text}` has no host"));
    }
    if uri.path_and_query().is_some_and(|pq| pq.as_str() != "/") {
        return Err(format!("`{text}`: an upstream host has no path"));
    }
    Ok(())
}
