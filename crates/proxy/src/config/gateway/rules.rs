//! HTTPRoute rules into routes: one route per rule and match (a rule
//! without matches matches every path), its filters as the route's
//! header changes, redirect, rewrite and mirrors, its backendRefs as
//! weighted backends, its timeouts and retry. Anything the proxy does not
//! support fails the whole route (Accepted: False, UnsupportedValue) with
//! its file, line and key: nothing is dropped silently.

use http::Method;
use serde_saphyr::{Location, Spanned};

use super::{
    attach::Served,
    backends::{Backends, Resolved},
    documents::Doc,
    objects::{BackendRef, Filter, HttpRouteSpec, Rule},
    values::{conditions, duration, header_rules, hostname, path_modifier, path_value},
    GatewayApiSettings,
};
use crate::config::{
    BackendSettings, HeaderRuleSettings, MirrorSettings, PathMatch, PathRewriteSettings, Pattern,
    RedirectSettings, RetryOn, RewriteSettings, RouteOrigin, RouteRetrySettings, RouteSettings,
    RouteTimeoutSettings, Setting,
};

/// A route of a rule, before it is placed in a listener's table.
#[derive(Debug, Clone)]
pub(super) struct Template {
    route: RouteSettings,
    /// The redirect's scheme and port as the filter gave them (the
    /// listener's fill in what it left out).
    redirect: Option<(Option<String>, Option<u16>)>,
}

pub(super) fn spanned<T>(value: T) -> Spanned<T> {
    Spanned::new(value, Location::UNKNOWN, Location::UNKNOWN)
}

/// Every route of `spec`'s rules, or what the proxy does not support.
pub(super) fn translate(
    doc: &Doc,
    spec: &HttpRouteSpec,
    backends: &mut Backends<'_>,
) -> Result<Vec<Template>, String> {
    for (i, host) in spec.hostnames.iter().enumerate() {
        hostname(host, true)
            .map_err(|m| format!("{}: spec.hostnames[{i}]: {m}", doc.at_line(1)))?;
    }
    let mut templates = Vec::new();
    for (r, rule) in spec.rules.iter().enumerate() {
        let at = |key: String, message: String| {
            format!(
                "{}: spec.rules[{r}]{key}: {message}",
                doc.at_line(rule.referenced.line())
            )
        };
        let rule_name = rule.value.name.clone().unwrap_or_else(|| r.to_string());
        let base = rule_route(doc, &rule.value, backends).map_err(|(key, m)| at(key, m))?;
        let matches = match rule.value.matches.is_empty() {
            true => vec![Default::default()],
            false => rule.value.matches.iter().map(|m| m.value.clone()).collect(),
        };
        let several = matches.len() > 1;
        for (m, matched) in matches.iter().enumerate() {
            let mut route = base.route.clone();
            let key = |k: &str| format!(".matches[{m}]{k}");
            let path = matched.path.clone().unwrap_or(super::objects::PathMatch {
                kind: None,
                value: None,
            });
            let value = path.value.unwrap_or_else(|| "/".into());
            route.match_kind = match path.kind.as_deref().unwrap_or("PathPrefix") {
                "Exact" => PathMatch::Exact,
                "PathPrefix" => PathMatch::Prefix,
                "RegularExpression" => PathMatch::Regex,
                other => return Err(at(key(".path.type"), format!("`{other}` is not supported"))),
            };
            route.path = spanned(match route.match_kind {
                PathMatch::Regex => {
                    Pattern::parse(&value).map_err(|e| at(key(".path.value"), format!("{e:#}")))?;
                    value
                }
                PathMatch::Prefix if value.len() > 1 => {
                    path_value(&value).map_err(|e| at(key(".path.value"), e))?;
                    value.trim_end_matches('/').to_string()
                }
                _ => {
                    path_value(&value).map_err(|e| at(key(".path.value"), e))?;
                    value
                }
            });
            route.headers =
                conditions(&matched.headers, true).map_err(|e| at(key(".headers"), e))?;
            route.query =
                conditions(&matched.query_params, false).map_err(|e| at(key(".queryParams"), e))?;
            if let Some(method) = &matched.method {
                Method::from_bytes(method.as_bytes())
                    .map_err(|_| at(key(".method"), format!("`{method}` is not a method")))?;
                route.methods = vec![spanned(method.clone())];
            }
            let prefix_rule =
                |p: &Option<PathRewriteSettings>| matches!(p, Some(PathRewriteSettings::Prefix(_)));
            let prefix_used = route
                .rewrite
                .as_ref()
                .is_some_and(|w| prefix_rule(&w.value.path))
                || route
                    .redirect
                    .as_ref()
                    .is_some_and(|w| prefix_rule(&w.value.path));
            if prefix_used && route.match_kind != PathMatch::Prefix {
                return Err(at(
                    key(".path"),
                    "ReplacePrefixMatch needs a PathPrefix match".into(),
                ));
            }
            let name = match several {
                true => format!("{}/{rule_name}.{m}", doc.key()),
                false => format!("{}/{rule_name}", doc.key()),
            };
            route.origin.name = Some(name);
            templates.push(Template {
                route,
                redirect: base.redirect.clone(),
            });
        }
    }
    Ok(templates)
}

/// A rule's routes without their matches.
fn rule_route(
    doc: &Doc,
    rule: &Rule,
    backends: &mut Backends<'_>,
) -> Result<Template, (String, String)> {
    let namespace = doc.namespace();
    let mut route = RouteSettings {
        path: spanned("/".into()),
        match_kind: PathMatch::Prefix,
        methods: Vec::new(),
        host: None,
        hosts: Vec::new(),
        headers: Vec::new(),
        query: Vec::new(),
        upstream: None,
        backends: Vec::new(),
        chain: None,
        upgrades: crate::config::routes::default_upgrades(),
        request_trailers: Default::default(),
        request_headers: None,
        response_headers: None,
        redirect: None,
        rewrite: None,
        respond: None,
        mirror: Vec::new(),
        timeouts: RouteTimeoutSettings::default(),
        retries: None,
        origin: RouteOrigin {
            no_405: true,
            ..RouteOrigin::default()
        },
    };
    let mut redirect_parts = None;
    let mut seen: Vec<&str> = Vec::new();
    for (f, filter) in rule.filters.iter().enumerate() {
        let key = format!(".filters[{f}]");
        let filter = &filter.value;
        if filter.kind != "RequestMirror" && seen.contains(&filter.kind.as_str()) {
            return Err((key, format!("a second {} filter", filter.kind)));
        }
        seen.push(&filter.kind);
        match filter.kind.as_str() {
            "RequestHeaderModifier" | "ResponseHeaderModifier" => {
                let (rules, which) = header_filter(filter).map_err(|m| (key.clone(), m))?;
                *which_of(&mut route, which) = Some(rules);
            }
            "RequestRedirect" => {
                let r = filter
                    .request_redirect
                    .as_ref()
                    .ok_or((key.clone(), "requestRedirect is missing".to_string()))?;
                if let Some(scheme) = r
                    .scheme
                    .as_deref()
                    .filter(|s| *s != "http" && *s != "https")
                {
                    return Err((key, format!("scheme `{scheme}` is not supported")));
                }
                let status = r.status_code.unwrap_or(302);
                if ![301, 302, 303, 307, 308].contains(&status) {
                    return Err((key, format!("statusCode {status} is not a redirect")));
                }
                if let Some(host) = &r.hostname {
                    hostname(host, false).map_err(|m| (key.clone(), m))?;
                }
                route.redirect = Some(spanned(RedirectSettings {
                    scheme: r.scheme.clone(),
                    hostname: r.hostname.clone(),
                    port: r.port,
                    path: path_modifier(r.path.as_ref()).map_err(|m| (key.clone(), m))?,
                    status,
                }));
                redirect_parts = Some((r.scheme.clone(), r.port));
            }
            "URLRewrite" => {
                let w = filter
                    .url_rewrite
                    .as_ref()
                    .ok_or((key.clone(), "urlRewrite is missing".to_string()))?;
                if let Some(host) = &w.hostname {
                    hostname(host, false).map_err(|m| (key.clone(), m))?;
                }
                route.rewrite = Some(spanned(RewriteSettings {
                    hostname: w.hostname.clone(),
                    path: path_modifier(w.path.as_ref()).map_err(|m| (key.clone(), m))?,
                }));
            }
            "RequestMirror" => {
                let m = filter
                    .request_mirror
                    .as_ref()
                    .ok_or((key.clone(), "requestMirror is missing".to_string()))?;
                let b = &m.backend_ref;
                let percent = match (m.percent, &m.fraction) {
                    (Some(p), _) => f64::from(p.min(100)),
                    (None, Some(f)) => {
                        let d = f.denominator.unwrap_or(100).max(1);
                        (f64::from(f.numerator) / f64::from(d) * 100.0).min(100.0)
                    }
                    (None, None) => 100.0,
                };
                let target = (
                    b.group.as_deref(),
                    b.kind.as_deref(),
                    b.name.as_str(),
                    b.namespace.as_deref(),
                    b.port,
                );
                if let Resolved::Upstream(upstream) = backends.resolve(namespace, target) {
                    route.mirror.push(spanned(MirrorSettings {
                        upstream: spanned(upstream),
                        percent,
                        max_in_flight: 64,
                    }));
                }
            }
            "ExtensionRef" => {
                let name = filter
                    .extension_ref
                    .as_ref()
                    .map_or("", |e| e.name.as_str());
                return Err((
                    format!("{key}.extensionRef"),
                    format!("extension `{name}`: extension filters are not supported"),
                ));
            }
            other => return Err((format!("{key}.type"), format!("`{other}` is not supported"))),
        }
    }
    if route.redirect.is_some() && route.rewrite.is_some() {
        return Err((
            ".filters".into(),
            "RequestRedirect and URLRewrite cannot be combined".into(),
        ));
    }
    if route.redirect.is_none() {
        for (b, backend) in rule.backend_refs.iter().enumerate() {
            let key = format!(".backendRefs[{b}]");
            route.backends.push(spanned(
                backend_settings(&backend.value, namespace, backends).map_err(|m| (key, m))?,
            ));
        }
        if route.backends.is_empty() {
            // No backend: the Gateway API's 500.
            route.backends.push(spanned(BackendSettings {
                upstream: spanned(String::new()),
                weight: 1,
                request_headers: None,
                response_headers: None,
                status: Some(500),
            }));
        }
    }
    if let Some(timeouts) = &rule.timeouts {
        let parse = |text: &Option<String>, key: &str| {
            text.as_deref()
                .map(duration)
                .transpose()
                .map_err(|m| (format!(".timeouts.{key}"), m))
        };
        route.timeouts.request = parse(&timeouts.request, "request")?;
        route.timeouts.backend_request = parse(&timeouts.backend_request, "backendRequest")?;
        if let (Some(request), Some(backend)) =
            (route.timeouts.request, route.timeouts.backend_request)
        {
            if !request.is_zero() && (backend.is_zero() || backend > request) {
                return Err((
                    ".timeouts".into(),
                    "backendRequest must not exceed request".into(),
                ));
            }
        }
    }
    if let Some(retry) = &rule.retry {
        let mut on = vec![RetryOn::ConnectFailure];
        for code in &retry.codes {
            if !(500..600).contains(code) {
                return Err((
                    ".retry.codes".into(),
                    format!("{code}: statuses 500-599 are retried"),
                ));
            }
            on.push(RetryOn::Status(*code));
        }
        let backoff = retry
            .backoff
            .as_deref()
            .map(duration)
            .transpose()
            .map_err(|m| (".retry.backoff".to_string(), m))?;
        route.retries = Some(spanned(RouteRetrySettings {
            attempts: retry.attempts.unwrap_or(1).min(10),
            on,
            backoff: backoff.unwrap_or(std::time::Duration::from_millis(25)),
        }));
    }
    Ok(Template {
        route,
        redirect: redirect_parts,
    })
}

/// Which header rules of a route a modifier fills.
fn which_of(route: &mut RouteSettings, request: bool) -> &mut Option<HeaderRuleSettings> {
    match request {
        true => &mut route.request_headers,
        false => &mut route.response_headers,
    }
}

/// A header modifier filter: its rules, and whether they are the request's.
fn header_filter(filter: &Filter) -> Result<(HeaderRuleSettings, bool), String> {
    let (modifier, request) = match filter.kind.as_str() {
        "RequestHeaderModifier" => (&filter.request_header_modifier, true),
        _ => (&filter.response_header_modifier, false),
    };
    let modifier = modifier.as_ref().ok_or("the modifier is missing")?;
    Ok((header_rules(modifier)?, request))
}

fn backend_settings(
    backend: &BackendRef,
    namespace: &str,
    backends: &mut Backends<'_>,
) -> Result<BackendSettings, String> {
    let mut settings = BackendSettings {
        upstream: spanned(String::new()),
        weight: backend.weight.unwrap_or(1),
        request_headers: None,
        response_headers: None,
        status: None,
    };
    for (f, filter) in backend.filters.iter().enumerate() {
        match filter.value.kind.as_str() {
            "RequestHeaderModifier" | "ResponseHeaderModifier" => {
                let (rules, request) =
                    header_filter(&filter.value).map_err(|m| format!("filters[{f}]: {m}"))?;
                match request {
                    true => settings.request_headers = Some(rules),
                    false => settings.response_headers = Some(rules),
                }
            }
            other => {
                return Err(format!(
                    "filters[{f}].type: `{other}` is not supported on a backendRef"
                ))
            }
        }
    }
    let target = (
        backend.group.as_deref(),
        backend.kind.as_deref(),
        backend.name.as_str(),
        backend.namespace.as_deref(),
        backend.port,
    );
    match backends.resolve(namespace, target) {
        Resolved::Upstream(name) => settings.upstream = spanned(name),
        Resolved::Status(status) => settings.status = Some(status),
    }
    Ok(settings)
}

/// The routes of `templates` in the table of `served`, with `hostnames`
/// (empty: any), the source's chain, and redirects completed with the
/// listener's scheme and port.
pub(super) fn emit(
    templates: &[Template],
    served: &Served,
    hostnames: &[String],
    settings: &GatewayApiSettings,
) -> Vec<RouteSettings> {
    let (scheme, port) = served.scheme_and_port();
    templates
        .iter()
        .map(|template| {
            let mut route = template.route.clone();
            route.origin.table = served.table;
            let name = route.origin.name.take().unwrap_or_default();
            route.origin.name = Some(format!("{name}@{}", served.label()));
            route.hosts = hostnames.iter().cloned().map(spanned).collect();
            route.chain = settings.chain.clone();
            if let (Some(redirect), Some((given_scheme, given_port))) =
                (&mut route.redirect, &template.redirect)
            {
                let redirect = &mut redirect.value;
                redirect.scheme = Some(given_scheme.clone().unwrap_or_else(|| scheme.into()));
                redirect.port = match (given_port, given_scheme) {
                    (Some(p), _) => Some(*p),
                    (None, Some(_)) => None,
                    (None, None) => Some(port),
                };
            }
            route
        })
        .collect()
}
