//! What a Gateway API controller would write in the objects' status:
//! each Gateway's and listener's conditions, and each HTTPRoute's per
//! parent (Accepted, ResolvedRefs, with the API's reasons). `sluice proxy
//! --check` prints it.

use std::{collections::BTreeMap, fmt};

/// One condition: its status, the API's reason, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Condition {
    pub(super) fn ok(reason: &'static str) -> Self {
        Self {
            status: true,
            reason,
            message: String::new(),
        }
    }

    pub(super) fn failed(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            status: false,
            reason,
            message: message.into(),
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", if self.status { "True" } else { "False" })?;
        write!(f, " ({})", self.reason)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub gateways: Vec<GatewayReport>,
    pub routes: Vec<RouteReport>,
    /// Objects of kinds the proxy does not read, counted by kind.
    pub ignored: BTreeMap<String, usize>,
}

#[derive(Debug, Clone)]
pub struct GatewayReport {
    /// `NAMESPACE/NAME`.
    pub name: String,
    /// `FILE:LINE`.
    pub at: String,
    pub accepted: Condition,
    pub listeners: Vec<ListenerReport>,
}

#[derive(Debug, Clone)]
pub struct ListenerReport {
    pub name: String,
    pub port: u16,
    /// Where it is served (`IP:PORT`), when it is.
    pub bound: Option<String>,
    pub accepted: Condition,
    pub resolved_refs: Condition,
    pub attached_routes: usize,
}

#[derive(Debug, Clone)]
pub struct RouteReport {
    pub name: String,
    pub at: String,
    pub parents: Vec<ParentReport>,
}

#[derive(Debug, Clone)]
pub struct ParentReport {
    /// `NAMESPACE/NAME` of the Gateway, `/SECTION` and `:PORT` when given.
    pub parent: String,
    pub accepted: Condition,
    pub resolved_refs: Condition,
}

impl Report {
    /// Whether every Gateway, listener and route is accepted with its references resolved.
    pub fn all_accepted(&self) -> bool {
        self.gateways.iter().all(|g| {
            g.accepted.status
                && g.listeners
                    .iter()
                    .all(|l| l.accepted.status && l.resolved_refs.status)
        }) && self.routes.iter().all(|r| {
            r.parents
                .iter()
                .all(|p| p.accepted.status && p.resolved_refs.status)
        })
    }

    /// The route `name`'s status toward `parent` (for tests and tools).
    pub fn route(&self, name: &str, parent: &str) -> Option<&ParentReport> {
        let route = self.routes.iter().find(|r| r.name == name)?;
        route.parents.iter().find(|p| {
            p.parent
                .strip_prefix(parent)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', ':']))
        })
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for gateway in &self.gateways {
            writeln!(
                f,
                "Gateway {} ({}): Accepted={}",
                gateway.name, gateway.at, gateway.accepted
            )?;
            for l in &gateway.listeners {
                let bound = l.bound.as_deref().unwrap_or("not served");
                writeln!(
                    f,
                    "  listener {} port {} ({bound}): Accepted={} ResolvedRefs={} attachedRoutes={}",
                    l.name, l.port, l.accepted, l.resolved_refs, l.attached_routes
                )?;
            }
        }
        for route in &self.routes {
            writeln!(f, "HTTPRoute {} ({}):", route.name, route.at)?;
            if route.parents.is_empty() {
                writeln!(f, "  no parentRefs: attached nowhere")?;
            }
            for p in &route.parents {
                writeln!(
                    f,
                    "  parent {}: Accepted={} ResolvedRefs={}",
                    p.parent, p.accepted, p.resolved_refs
                )?;
            }
        }
        for (kind, count) in &self.ignored {
            writeln!(
                f,
                "{count} {kind} object(s) not read (not a kind the proxy acts on)"
            )?;
        }
        Ok(())
    }
}
