//! The checks of `listeners[].proxy_protocol` and
//! `upstreams.NAME.proxy_protocol` that need more than one key.

use serde_saphyr::Location;

use crate::config::{
    error::Problem,
    schema::{Config, Protocol},
};

/// The checks of both keys that need more than one key.
pub(crate) fn check(config: &Config) -> Result<(), Problem> {
    for (i, listener) in config.listeners.iter().enumerate() {
        let Some(proxy) = &listener.proxy_protocol else {
            continue;
        };
        if proxy.trusted.is_empty() {
            return Err((
                listener.address.referenced,
                format!("listeners[{i}].proxy_protocol.trusted"),
                "name the networks of the load balancers that send the header".into(),
            ));
        }
    }
    for (name, upstream) in &config.upstreams {
        if upstream.proxy_protocol.is_some() && upstream.protocol != Protocol::Http1 {
            return Err((
                Location::UNKNOWN,
                format!("upstreams.{name}.proxy_protocol"),
                "a PROXY header names one client, and an HTTP/2 connection carries many: use protocol: http1".into(),
            ));
        }
    }
    Ok(())
}
