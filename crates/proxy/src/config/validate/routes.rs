//! The checks of `routes` that need more than one key: a route has one
//! destination (an upstream, backends, a redirect or a response), names
//! defined upstreams, and its conditions, redirect and rewrite are whole.
//! (That paths and host names are in the normal form requests are
//! matched in is checked where normalisation lives, when the plan is
//! compiled.)

use serde_saphyr::Location;

use crate::config::{
    error::Problem,
    route_patterns::Pattern,
    routes::{FieldMatchSettings, PathMatch, PathRewriteSettings, RouteSettings},
    schema::Config,
    typed::Setting,
};

/// The most a weight may be (their sum stays far from overflowing).
const MAX_WEIGHT: u32 = 1_000_000;
/// The most retries a route may ask for.
const MAX_ATTEMPTS: u32 = 10;

pub(super) fn check(config: &Config) -> Result<(), Problem> {
    for (i, route) in config.routes.iter().enumerate() {
        let at = |location: Location, key: &str, message: String| {
            (location, format!("routes[{i}]{key}"), message)
        };
        check_path(route).map_err(|m| at(route.path.referenced, ".path", m))?;
        for (j, method) in route.methods.iter().enumerate() {
            if http::Method::from_bytes(method.value.as_bytes()).is_err() || method.value.is_empty()
            {
                let message = format!("`{}` is not an HTTP method", method.value);
                return Err(at(method.referenced, &format!(".methods[{j}]"), message));
            }
        }
        for (j, protocol) in route.upgrades.iter().enumerate() {
            check_upgrade(&protocol.value)
                .map_err(|m| at(protocol.referenced, &format!(".upgrades[{j}]"), m))?;
        }
        for (kind, list) in [("headers", &route.headers), ("query", &route.query)] {
            for (j, field) in list.iter().enumerate() {
                check_field(kind, &field.value)
                    .map_err(|m| at(field.referenced, &format!(".{kind}[{j}]"), m))?;
            }
        }
        check_destination(route).map_err(|(key, m)| at(route.path.referenced, key, m))?;
        for name in route
            .upstream_names()
            .chain(route.mirror.iter().map(|m| &m.value.upstream))
        {
            if !config.upstreams.contains_key(&name.value) {
                let known: Vec<&str> = config.upstreams.keys().map(String::as_str).collect();
                let known = match known.is_empty() {
                    true => "none".to_string(),
                    false => known.join(", "),
                };
                let message = format!("no upstream named `{}`; defined: {known}", name.value);
                let key = key_of(route, name);
                return Err(at(name.referenced, &key, message));
            }
        }
        check_filters(route).map_err(|(key, m)| at(route.path.referenced, key, m))?;
    }
    Ok(())
}

fn check_path(route: &RouteSettings) -> Result<(), String> {
    match route.match_kind {
        PathMatch::Regex => Pattern::parse(&route.path.value)
            .map(drop)
            .map_err(|err| format!("{err:#}")),
        _ if !route.path.value.starts_with('/') => Err("must start with `/`".into()),
        _ => Ok(()),
    }
}

fn check_upgrade(name: &str) -> Result<(), String> {
    if name.eq_ignore_ascii_case("h2c") {
        return Err(
            "h2c is never relayed: a switched connection would carry requests no route sees".into(),
        );
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~/".contains(&b))
    {
        return Err(format!("`{name}` is not a protocol name"));
    }
    Ok(())
}

/// A header name is a token; exactly one of `value`, `regex`, `present`.
fn check_field(kind: &str, field: &FieldMatchSettings) -> Result<(), String> {
    if field.name.is_empty() {
        return Err("`name` is empty".into());
    }
    if kind == "headers" && http::HeaderName::from_bytes(field.name.as_bytes()).is_err() {
        return Err(format!("`{}` is not a header name", field.name));
    }
    let given = [
        field.value.is_some(),
        field.regex.is_some(),
        field.present.is_some(),
    ];
    if given.iter().filter(|&&g| g).count() != 1 {
        return Err("give one of `value`, `regex` and `present`".into());
    }
    Ok(())
}

/// One of `upstream`, `backends`, `redirect`, `respond`; `rewrite` and
/// `mirror` only where requests are forwarded.
fn check_destination(route: &RouteSettings) -> Result<(), (&'static str, String)> {
    let given = [
        route.upstream.is_some(),
        !route.backends.is_empty(),
        route.redirect.is_some(),
        route.respond.is_some(),
    ];
    if given.iter().filter(|&&g| g).count() != 1 {
        return Err((
            "",
            "give one of `upstream`, `backends`, `redirect` and `respond`".into(),
        ));
    }
    let forwards = route.upstream.is_some() || !route.backends.is_empty();
    if !forwards && route.rewrite.is_some() {
        return Err((
            ".rewrite",
            "a rewrite needs `upstream` or `backends`".into(),
        ));
    }
    if !forwards && !route.mirror.is_empty() {
        return Err((".mirror", "mirroring needs `upstream` or `backends`".into()));
    }
    if route.backends.iter().any(|b| b.value.weight > MAX_WEIGHT) {
        return Err((".backends", format!("a weight is at most {MAX_WEIGHT}")));
    }
    Ok(())
}

/// Statuses, schemes, ports, and prefix replacements only where a prefix matched.
fn check_filters(route: &RouteSettings) -> Result<(), (&'static str, String)> {
    let prefix_only = |path: &Option<PathRewriteSettings>| match path {
        Some(PathRewriteSettings::Prefix(_)) if route.match_kind != PathMatch::Prefix => Err(
            "a prefix replacement needs `match: prefix` (it replaces what the prefix matched)"
                .to_string(),
        ),
        _ => Ok(()),
    };
    if let Some(redirect) = &route.redirect {
        let redirect = &redirect.value;
        if ![301, 302, 303, 307, 308].contains(&redirect.status) {
            let message = format!(
                "{}: a redirect is 301, 302, 303, 307 or 308",
                redirect.status
            );
            return Err((".redirect.status", message));
        }
        if let Some(scheme) = &redirect.scheme {
            if scheme != "http" && scheme != "https" {
                return Err((".redirect.scheme", format!("`{scheme}`: http or https")));
            }
        }
        if redirect.port == Some(0) {
            return Err((".redirect.port", "1 to 65535".into()));
        }
        prefix_only(&redirect.path).map_err(|m| (".redirect.path", m))?;
    }
    if let Some(rewrite) = &route.rewrite {
        prefix_only(&rewrite.value.path).map_err(|m| (".rewrite.path", m))?;
    }
    if let Some(respond) = &route.respond {
        if !(200..=599).contains(&respond.value.status) {
            return Err((".respond.status", "200 to 599".into()));
        }
    }
    if let Some(retries) = &route.retries {
        if retries.value.attempts > MAX_ATTEMPTS {
            let message = format!("at most {MAX_ATTEMPTS}");
            return Err((".retries.attempts", message));
        }
    }
    Ok(())
}

/// The key of an upstream name in `route`.
fn key_of(route: &RouteSettings, name: &serde_saphyr::Spanned<String>) -> String {
    let same = |other: &serde_saphyr::Spanned<String>| std::ptr::eq(other, name);
    if route.upstream.as_ref().is_some_and(same) {
        return ".upstream".into();
    }
    if let Some(j) = route.backends.iter().position(|b| same(&b.value.upstream)) {
        return format!(".backends[{j}].upstream");
    }
    let j = route
        .mirror
        .iter()
        .position(|m| same(&m.value.upstream))
        .unwrap_or_default();
    format!(".mirror[{j}].upstream")
}
