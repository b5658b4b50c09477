//! A route whose chain has a `grpc_web` handler sends to an HTTP/2
//! upstream (gRPC needs HTTP/2).

use crate::config::{
    error::Problem,
    middleware::{ChainRef, HandlerSettings},
    schema::{Config, Protocol},
};

/// A route whose chain has a `grpc_web` handler sends to `h2c` or `h2`.
pub(crate) fn check(config: &Config) -> Result<(), Problem> {
    let is_grpc_web = |name: &str| match config.middleware.0.get(name) {
        Some(handler) => matches!(handler, HandlerSettings::GrpcWebSettings(_)),
        None => name == "grpc_web",
    };
    for (i, route) in config.routes.iter().enumerate() {
        let Some(chain) = &route.chain else { continue };
        let names: Vec<&str> = match &chain.value {
            ChainRef::List(names) => names.iter().map(String::as_str).collect(),
            ChainRef::Named(name) => config
                .chains
                .get(name)
                .map(|names| names.iter().map(|n| n.value.as_str()).collect())
                .unwrap_or_default(),
        };
        if !names.into_iter().any(is_grpc_web) {
            continue;
        }
        // The route's upstream, or each of its weighted backends.
        let targets = route
            .upstream
            .iter()
            .chain(route.backends.iter().map(|b| &b.value.upstream));
        for target in targets {
            let http1 = config
                .upstreams
                .get(&target.value)
                .is_some_and(|upstream| upstream.protocol == Protocol::Http1);
            if http1 {
                return Err((
                    chain.referenced,
                    format!("routes[{i}].chain"),
                    format!(
                        "grpc_web translates to gRPC, which needs an HTTP/2 upstream: give `{}` protocol: h2c or h2",
                        target.value
                    ),
                ));
            }
        }
    }
    Ok(())
}
