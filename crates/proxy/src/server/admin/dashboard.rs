//! The live dashboard (docs/DASHBOARD.md): a page (`/` or `/ui`), its
//! script and style (`/ui.js`, `/ui.css`, served here so that a strict
//! Content-Security-Policy allows nothing from any other origin), and
//! `/stats.json`, the totals it polls (usable by other tools too).
//!
//! The page and its assets hold no data, so they need no token; the page
//! asks for one when `/stats.json` answers 401, keeps it in memory only,
//! and sends it as `Authorization: Bearer` on its fetches.

use std::time::{SystemTime, UNIX_EPOCH};

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::AdminState;
use crate::{plan::Plan, telemetry};

/// Nothing from another origin; script, style and fetches from this one.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The fields every dashboard answer carries.
pub(super) const HEADERS: &[(&str, &str)] = &[
    ("content-security-policy", CSP),
    ("cache-control", "no-store"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
];

const PAGE: &str = include_str!("dashboard/index.html");
const SCRIPT: &str = include_str!("dashboard/ui.js");
const STYLE: &str = include_str!("dashboard/ui.css");

/// The page or one of its assets at `path`: content type and body.
pub(super) fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/" | "/ui" => Some(("text/html; charset=utf-8", PAGE)),
        "/ui.js" => Some(("text/javascript; charset=utf-8", SCRIPT)),
        "/ui.css" => Some(("text/css; charset=utf-8", STYLE)),
        _ => None,
    }
}

/// `/stats.json`: the proxy's totals since start, each upstream's hosts
/// now, the handlers' counts, and the reload status.
pub(super) fn stats(state: &AdminState, plan: &Plan) -> (StatusCode, &'static str, Vec<u8>) {
    let mut body = state.metrics.snapshot();
    // The handlers' figures: each route's (`latency`, null when no
    // handler of its chain times it) and each instance's, by section
    // (`rate_limit_stores`, `{}` when there is none: the page reads both).
    let (route_figures, sections) = plan.chains.stats();
    if let Some(routes) = body["routes"].as_array_mut() {
        for route in routes {
            let name = route["route"].as_str().unwrap_or_default().to_string();
            route["latency"] = Value::Null;
            for (key, value) in route_figures.get(name.as_str()).into_iter().flatten() {
                route[key] = value.clone();
            }
        }
    }
    // The upstreams of the plan in use, with their counters (a removed
    // upstream keeps its counters in /metrics, but is not shown here).
    let mut counted = body["upstreams"].take();
    let views = super::super::upstreams::render(plan);
    let upstreams: Map<String, Value> = views["upstreams"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, view)| {
            let mut upstream = counted[name.as_str()].take();
            if let (Some(upstream), Some(view)) = (upstream.as_object_mut(), view.as_object()) {
                upstream.extend(view.clone());
            }
            (name.clone(), upstream)
        })
        .collect();
    body["upstreams"] = upstreams.into();
    body["rate_limit_stores"] = json!({});
    for (section, figures) in sections {
        body[section] = figures.into();
    }
    body["latency_bounds"] = telemetry::bounds().into();
    body["generation"] = state.plans.generation().into();
    // `/config` holds the reload status, already rendered at the last
    // reload: read back (a poll's cost, about a millisecond at most)
    // rather than kept twice.
    let shown: Value = serde_json::from_slice(&state.reloader.shown()).unwrap_or_default();
    let reload = &shown["reload"];
    body["reload"] = json!({
        "loaded_at": reload["loaded_at"],
        "last_error": reload["last_error"],
        "file": reload["file"],
        "success": body["reloads"]["success"],
        "error": body["reloads"]["error"],
    });
    if let Some(body) = body.as_object_mut() {
        body.remove("reloads");
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    body["at_ms"] = u64::try_from(now.as_millis()).unwrap_or(u64::MAX).into();
    (
        StatusCode::OK,
        "application/json",
        serde_json::to_vec(&body).unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_no_other_origin() {
        for (path, body) in [("/", PAGE), ("/ui.js", SCRIPT), ("/ui.css", STYLE)] {
            for scheme in [
                "http:", "https:", "ws:", "wss:", "data:", "\"//", "'//", "`//",
            ] {
                assert!(!body.contains(scheme), "{path} names `{scheme}`");
            }
        }
        assert!(PAGE.contains("<script src=\"ui.js\"></script>"));
        assert!(PAGE.contains("<link rel=\"stylesheet\" href=\"ui.css\">"));
        assert!(CSP.starts_with("default-src 'none';"));
    }
}
