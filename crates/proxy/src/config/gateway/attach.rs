//! Gateways into listeners (one per Gateway and port, each with a route
//! table), and HTTPRoutes onto them: which parent and listeners a route
//! attaches to (sectionName, port, allowedRoutes), with which host names
//! (the intersection of the route's and the listener's), and the
//! statuses that follow.

use std::collections::BTreeMap;

pub(super) use super::index::Index;
use super::{
    backends::{self, Backends},
    documents::at,
    objects::{AllowedRoutes, GatewaySpec, HttpRouteSpec, ParentRef, WithSpec},
    rules, Condition, GatewayApiSettings, GatewayReport, ListenerReport, ParentReport, RouteReport,
    Translated,
};
use crate::config::schema::ListenerSettings;

pub(super) use super::index::GROUP;

/// One listener of a served Gateway.
#[derive(Debug)]
pub(super) struct Served {
    gateway: String,
    namespace: String,
    name: String,
    port: u16,
    https: bool,
    hostname: Option<String>,
    allowed: Option<AllowedRoutes>,
    /// Its route table.
    pub table: usize,
    /// Its place in the report: gateway, listener.
    report: (usize, usize),
}

/// Every served listener, by Gateway (`NAMESPACE/NAME`).
pub(super) type Sockets = BTreeMap<String, Vec<Served>>;

/// Makes the listeners of every Gateway; reports each.
pub(super) fn gateways(
    index: &Index<'_>,
    settings: &GatewayApiSettings,
    (secrets, taken): (&std::path::Path, &mut std::collections::HashSet<String>),
    first_table: usize,
    out: &mut Translated,
) -> Sockets {
    let mut sockets = Sockets::new();
    let mut table = first_table;
    for doc in &index.gateways {
        let spec = doc.typed::<WithSpec<GatewaySpec>>().map(|s| s.spec);
        let gateway = doc.key();
        let report_at = out.report.gateways.len();
        let mut report = GatewayReport {
            name: gateway.clone(),
            at: at(&doc.file, doc.line),
            accepted: Condition::ok("Accepted"),
            listeners: Vec::new(),
        };
        let spec = match spec {
            Ok(spec) => spec,
            Err(message) => {
                report.accepted = Condition::failed("InvalidParameters", message);
                out.report.gateways.push(report);
                continue;
            }
        };
        // Listeners by port: the first protocol (and certificate) of a port wins.
        let mut ports: BTreeMap<u16, (bool, Option<(String, String)>)> = BTreeMap::new();
        let mut hostnames: Vec<(u16, Option<String>)> = Vec::new();
        let mut served = Vec::new();
        for listener in &spec.listeners {
            let l = &listener.value;
            let mut item = ListenerReport {
                name: l.name.clone(),
                port: l.port,
                bound: None,
                accepted: Condition::ok("Accepted"),
                resolved_refs: Condition::ok("ResolvedRefs"),
                attached_routes: 0,
            };
            let https = match l.protocol.as_str() {
                "HTTP" => false,
                "HTTPS" => true,
                other => {
                    let message = format!(
                        "{}: protocol `{other}` is not served (HTTP and HTTPS are)",
                        doc.at_line(listener.referenced.line())
                    );
                    item.accepted = Condition::failed("UnsupportedProtocol", message);
                    report.listeners.push(item);
                    continue;
                }
            };
            if let Err(message) = kinds_allowed(l.allowed_routes.as_ref()) {
                item.resolved_refs = Condition::failed("InvalidRouteKinds", message);
            }
            let certificate = match https {
                true => match backends::certificate(index, doc, l, secrets) {
                    Ok(files) => Some(files),
                    Err((reason, message)) => {
                        item.resolved_refs = Condition::failed(reason, message);
                        item.accepted =
                            Condition::failed("Invalid", "the listener has no usable certificate");
                        report.listeners.push(item);
                        continue;
                    }
                },
                false => None,
            };
            let host = l.hostname.as_ref().map(|h| h.to_ascii_lowercase());
            match ports.get(&l.port) {
                Some((first_https, _)) if *first_https != https => {
                    item.accepted = Condition::failed(
                        "ProtocolConflict",
                        format!("port {} serves another protocol", l.port),
                    );
                    report.listeners.push(item);
                    continue;
                }
                _ => {}
            }
            if hostnames.contains(&(l.port, host.clone())) {
                item.accepted = Condition::failed(
                    "HostnameConflict",
                    format!("another listener of port {} has the same hostname", l.port),
                );
                report.listeners.push(item);
                continue;
            }
            hostnames.push((l.port, host.clone()));
            ports.entry(l.port).or_insert((https, certificate));
            served.push(Served {
                gateway: gateway.clone(),
                namespace: doc.namespace().into(),
                name: l.name.clone(),
                port: l.port,
                https,
                hostname: host,
                allowed: l.allowed_routes.clone(),
                table: 0,
                report: (report_at, report.listeners.len()),
            });
            report.listeners.push(item);
        }
        for (port, (https, certificate)) in ports {
            let bound_port = settings.ports.get(&port).copied().unwrap_or(port);
            let address = match settings.address.contains(':') {
                true => format!("[{}]:{bound_port}", settings.address),
                false => format!("{}:{bound_port}", settings.address),
            };
            // Port 0 is any free port: it never conflicts.
            if bound_port != 0 && !taken.insert(address.clone()) {
                served.retain(|s| {
                    if s.port == port {
                        let message = format!("{address} is bound already (another Gateway, or a listener of the file)");
                        report.listeners[s.report.1].accepted = Condition::failed("PortUnavailable", message);
                    }
                    s.port != port
                });
                continue;
            }
            let listener = listener_settings(&address, &gateway, port, https, certificate, table);
            out.listeners.push(listener);
            for s in served.iter_mut().filter(|s| s.port == port) {
                s.table = table;
                report.listeners[s.report.1].bound = Some(address.clone());
            }
            table += 1;
        }
        out.report.gateways.push(report);
        sockets.insert(gateway, served);
    }
    sockets
}

/// A listener of a Gateway's port, as the configuration's own are.
fn listener_settings(
    address: &str,
    gateway: &str,
    port: u16,
    https: bool,
    certificate: Option<(String, String)>,
    table: usize,
) -> ListenerSettings {
    let tls = match certificate.filter(|_| https) {
        Some((cert, key)) => format!(", tls: {{ cert: {cert:?}, key: {key:?} }}"),
        None => String::new(),
    };
    let yaml = format!("{{ address: {address:?}, name: \"gateway/{gateway}:{port}\"{tls} }}");
    let mut listener: ListenerSettings =
        serde_saphyr::from_str(&yaml).unwrap_or_else(|err| unreachable!("{yaml}: {err}"));
    listener.route_table = table;
    listener
}

/// `allowedRoutes.kinds`, when given, names HTTPRoute.
fn kinds_allowed(allowed: Option<&AllowedRoutes>) -> Result<(), String> {
    let Some(kinds) = allowed.and_then(|a| a.kinds.as_ref()) else {
        return Ok(());
    };
    let http = |k: &super::objects::GroupKind| {
        k.kind == "HTTPRoute" && k.group.as_deref().is_none_or(|g| g == GROUP)
    };
    match kinds.iter().any(http) {
        true => Ok(()),
        false => Err("allowedRoutes.kinds names no HTTPRoute".into()),
    }
}

/// Whether a route in `namespace` may attach to `listener`.
fn allows(index: &Index<'_>, listener: &Served, namespace: &str) -> bool {
    if kinds_allowed(listener.allowed.as_ref()).is_err() {
        return false;
    }
    let from = listener
        .allowed
        .as_ref()
        .and_then(|a| a.namespaces.as_ref());
    match from.and_then(|n| n.from.as_deref()).unwrap_or("Same") {
        "All" => true,
        "Same" => namespace == listener.namespace,
        "Selector" => {
            let selector = from.and_then(|n| n.selector.as_ref());
            selector.is_some_and(|s| backends::selects(s, &index.namespace_labels(namespace)))
        }
        _ => false,
    }
}

/// The host names a route has on a listener: `Some(vec![])` for any,
/// `None` when none intersect.
pub(super) fn intersect(listener: Option<&str>, route: &[String]) -> Option<Vec<String>> {
    let route: Vec<String> = route.iter().map(|h| h.to_ascii_lowercase()).collect();
    let Some(listener) = listener else {
        return Some(route);
    };
    if route.is_empty() {
        return Some(vec![listener.to_string()]);
    }
    let below = |name: &str, wildcard: &str| {
        let suffix = &wildcard[1..];
        name.len() > suffix.len() && name.ends_with(suffix)
    };
    let both: Vec<String> = route
        .iter()
        .filter_map(
            |r| match (listener.starts_with("*."), r.starts_with("*.")) {
                (false, false) => (r == listener).then(|| r.clone()),
                (false, true) => below(listener, r).then(|| listener.to_string()),
                (true, false) => below(r, listener).then(|| r.clone()),
                (true, true) if r == listener || below(&r[1..], listener) => Some(r.clone()),
                (true, true) => below(&listener[1..], r).then(|| listener.to_string()),
            },
        )
        .collect();
    (!both.is_empty()).then_some(both)
}

/// Attaches every route; reports each.
pub(super) fn routes(
    index: &Index<'_>,
    settings: &GatewayApiSettings,
    sockets: &Sockets,
    out: &mut Translated,
) {
    for doc in &index.routes {
        let name = doc.key();
        let mut report = RouteReport {
            name: name.clone(),
            at: at(&doc.file, doc.line),
            parents: Vec::new(),
        };
        let spec = doc.typed::<WithSpec<HttpRouteSpec>>().map(|s| s.spec);
        let parents = match &spec {
            Ok(spec) => spec.parent_refs.clone(),
            Err(_) => doc
                .typed::<WithSpec<ParentsOnly>>()
                .map(|s| s.spec.parent_refs)
                .unwrap_or_default(),
        };
        let mut backends = Backends::new(index, &mut out.upstreams);
        let translated = spec.and_then(|spec| {
            let templates = rules::translate(doc, &spec, &mut backends)?;
            Ok((spec, templates))
        });
        let resolved = backends.condition();
        for parent in &parents {
            let label = parent_label(parent, doc.namespace());
            let (spec, templates) = match &translated {
                Ok(pair) => pair,
                Err(message) => {
                    report.parents.push(ParentReport {
                        parent: label,
                        accepted: Condition::failed("UnsupportedValue", message.clone()),
                        resolved_refs: resolved.clone(),
                    });
                    continue;
                }
            };
            let accepted = match attach(index, sockets, parent, doc.namespace(), &spec.hostnames) {
                Err(condition) => condition,
                Ok(attached) => {
                    for (served, hostnames) in attached {
                        let routes = rules::emit(templates, served, &hostnames, settings);
                        out.routes.extend(routes);
                        let (g, l) = served.report;
                        out.report.gateways[g].listeners[l].attached_routes += 1;
                    }
                    Condition::ok("Accepted")
                }
            };
            report.parents.push(ParentReport {
                parent: label,
                accepted,
                resolved_refs: resolved.clone(),
            });
        }
        out.report.routes.push(report);
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ParentsOnly {
    #[serde(default)]
    parent_refs: Vec<ParentRef>,
}

fn parent_label(parent: &ParentRef, namespace: &str) -> String {
    let mut label = format!(
        "{}/{}",
        parent.namespace.as_deref().unwrap_or(namespace),
        parent.name
    );
    if let Some(section) = &parent.section_name {
        label.push('/');
        label.push_str(section);
    }
    if let Some(port) = parent.port {
        label.push_str(&format!(":{port}"));
    }
    label
}

/// The listeners of `parent` the route attaches to, with its host names
/// on each (merged per route table), or why it attaches to none.
fn attach<'s>(
    index: &Index<'_>,
    sockets: &'s Sockets,
    parent: &ParentRef,
    namespace: &str,
    hostnames: &[String],
) -> Result<Vec<(&'s Served, Vec<String>)>, Condition> {
    let group_ok = parent.group.as_deref().is_none_or(|g| g == GROUP);
    let kind_ok = parent.kind.as_deref().is_none_or(|k| k == "Gateway");
    let gateway = format!(
        "{}/{}",
        parent.namespace.as_deref().unwrap_or(namespace),
        parent.name
    );
    let Some(listeners) = sockets.get(&gateway).filter(|_| group_ok && kind_ok) else {
        return Err(Condition::failed(
            "NoMatchingParent",
            format!("no Gateway {gateway} served from these files"),
        ));
    };
    let candidates: Vec<&Served> = listeners
        .iter()
        .filter(|l| parent.section_name.as_ref().is_none_or(|s| *s == l.name))
        .filter(|l| parent.port.is_none_or(|p| p == l.port))
        .collect();
    if candidates.is_empty() {
        return Err(Condition::failed(
            "NoMatchingParent",
            "no listener of the Gateway has that sectionName and port",
        ));
    }
    let allowed: Vec<&Served> = candidates
        .into_iter()
        .filter(|l| allows(index, l, namespace))
        .collect();
    if allowed.is_empty() {
        return Err(Condition::failed(
            "NotAllowedByListeners",
            "the listeners' allowedRoutes do not take this route",
        ));
    }
    let mut by_table: Vec<(&Served, Option<Vec<String>>)> = Vec::new();
    for listener in allowed {
        let Some(names) = intersect(listener.hostname.as_deref(), hostnames) else {
            continue;
        };
        match by_table.iter_mut().find(|(s, _)| s.table == listener.table) {
            // Any host on one listener of the table: any host.
            Some((_, merged)) => match (merged.as_mut(), names.is_empty()) {
                (_, true) => *merged = None,
                (Some(list), false) => list.extend(names),
                (None, false) => {}
            },
            None => by_table.push((listener, (!names.is_empty()).then_some(names))),
        }
    }
    if by_table.is_empty() {
        return Err(Condition::failed(
            "NoMatchingListenerHostname",
            "no listener's hostname intersects the route's",
        ));
    }
    Ok(by_table
        .into_iter()
        .map(|(served, names)| (served, names.unwrap_or_default()))
        .collect())
}

impl Served {
    /// The scheme and port a redirect without them keeps.
    pub(super) fn scheme_and_port(&self) -> (&'static str, u16) {
        (if self.https { "https" } else { "http" }, self.port)
    }

    /// `NAMESPACE/NAME:PORT` of its Gateway, for route names.
    pub(super) fn label(&self) -> String {
        format!("{}:{}", self.gateway, self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::intersect;

    #[test]
    fn host_names_intersect_as_the_gateway_api_says() {
        let names = |l: Option<&str>, r: &[&str]| {
            intersect(l, &r.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(names(None, &[]), Some(vec![]));
        assert_eq!(
            names(
                Some("very.specific.com"),
                &["non.matching.com", "*.specific.com"]
            ),
            Some(vec!["very.specific.com".into()])
        );
        assert_eq!(
            names(
                Some("*.wildcard.io"),
                &["wildcard.io", "foo.wildcard.io", "foo.bar.wildcard.io"]
            ),
            Some(vec!["foo.wildcard.io".into(), "foo.bar.wildcard.io".into()])
        );
        assert_eq!(
            names(Some("*.anotherwildcard.io"), &["*.anotherwildcard.io"]),
            Some(vec!["*.anotherwildcard.io".into()])
        );
        assert_eq!(
            names(Some("*.example.com"), &["*.a.example.com"]),
            Some(vec!["*.a.example.com".into()])
        );
        assert_eq!(
            names(Some("*.a.example.com"), &["*.example.com"]),
            Some(vec!["*.a.example.com".into()])
        );
        assert_eq!(names(Some("bar.com"), &[]), Some(vec!["bar.com".into()]));
        assert_eq!(
            names(
                Some("specific.com"),
                &["specific.but.wrong.com", "wildcard.io"]
            ),
            None
        );
    }
}
