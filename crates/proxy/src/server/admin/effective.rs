//! `/config`'s document: the effective configuration, every default filled in.

use std::time::Duration;

use serde_json::json;

use super::redact::marker;
use crate::config::Config;

/// The configuration after `${VAR}` substitution and defaults, before
/// [`super::redact`] hides what must not be shown (which `/config`
/// always applies: `server/reload.rs`). Secrets known here are hidden
/// already; keys and certificates live in files it only names, and a
/// JWKS URL loses its user information and query.
pub(crate) fn effective(config: &Config) -> serde_json::Value {
    let duration = |d: Duration| humantime::format_duration(d).to_string();
    let upstreams: serde_json::Map<String, serde_json::Value> = config
        .upstreams
        .iter()
        .map(|(name, u)| {
            (
                name.clone(),
                json!({
                    "hosts": u.hosts.iter().map(|h| json!({ "url": h.value.url, "weight": h.value.weight })).collect::<Vec<_>>(),
                    "balance": format!("{:?}", u.balance),
                    "hash": u.hash.as_ref().map(|h| json!({ "key": format!("{:?}", h.key), "bounded_load": h.bounded_load })),
                    "sticky": u.sticky.as_ref().map(|s| json!({ "cookie": s.cookie, "app_cookie": s.app_cookie, "key": s.key.as_ref().map(|k| marker(k)) })),
                    "slow_start": u.slow_start.map(duration),
                    "retry_on": u.retry_on.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>(),
                    "retry_budget": u.retry_budget.as_ref().map(|b| json!({ "percent": b.percent, "min_per_second": b.min_per_second })),
                    "retry_backoff": duration(u.retry_backoff),
                    "max_connections": u.max_connections,
                    "max_pending": u.max_pending,
                    "timeouts": { "connect": duration(u.timeouts.connect), "request": duration(u.timeouts.request) },
                    "retries": u.retries,
                    "pool": { "max_idle": u.pool.max_idle, "idle_timeout": duration(u.pool.idle_timeout) },
                    "health": {
                        "failures": u.health.failures,
                        "backoff": duration(u.health.backoff),
                        "max_ejected_percent": u.health.max_ejected_percent,
                        "active": u.health.active.as_ref().map(|a| json!({ "path": a.path, "interval": duration(a.interval), "timeout": duration(a.timeout), "rise": a.rise, "fall": a.fall, "expect": a.expect.iter().map(|r| format!("{}..{}", r.0, r.1)).collect::<Vec<_>>() })),
                    },
                    "host_header": u.host_header,
                }),
            )
        })
        .collect();
    let routes: Vec<serde_json::Value> = config
        .routes
        .iter()
        .map(|r| {
            json!({
                "path": r.path.value,
                "name": r.name(),
                "match": match r.match_kind { crate::config::PathMatch::Prefix => "prefix", crate::config::PathMatch::Exact => "exact", crate::config::PathMatch::Regex => "regex" },
                "methods": r.methods.iter().map(|m| m.value.clone()).collect::<Vec<_>>(),
                "host": r.host,
                "hosts": r.hosts.iter().map(|h| &h.value).collect::<Vec<_>>(),
                "headers": r.headers.len(),
                "query": r.query.len(),
                "upstream": r.upstream.as_ref().map(|u| &u.value),
                "backends": r.backends.iter().map(|b| json!({ "upstream": b.value.upstream.value, "weight": b.value.weight, "status": b.value.status })).collect::<Vec<_>>(),
                "redirect": r.redirect.is_some(),
                "respond": r.respond.as_ref().map(|s| s.value.status),
                "rewrite": r.rewrite.is_some(),
                "mirror": r.mirror.iter().map(|m| json!({ "upstream": m.value.upstream.value, "percent": m.value.percent })).collect::<Vec<_>>(),
                "table": r.origin.table,
                "chain": r.chain.as_ref().map(|c| &c.value),
            })
        })
        .collect();
    let limits = &config.limits;
    json!({
        "workers": config.workers,
        "runtime": match config.runtime { crate::config::Runtime::PerCore => "per_core", crate::config::Runtime::MultiThread => "multi_thread" },
        "listeners": config.listeners.iter().map(|l| json!({ "address": l.address.value })).collect::<Vec<_>>(),
        "upstreams": upstreams,
        "routes": routes,
        "middleware": config.middleware,
        "chains": config.chains.iter().map(|(name, names)| (name.clone(), names.iter().map(|n| n.value.clone()).collect::<Vec<_>>())).collect::<std::collections::BTreeMap<_, _>>(),
        "admin": config.admin.as_ref().map(|a| json!({
            "address": a.address.value,
            "token": a.bearer.as_ref().map(|t| marker(t.expose())),
            "token_file": a.token_file.as_ref().map(|f| &f.value),
            "hosts": a.hosts.iter().map(|h| &h.value).collect::<Vec<_>>(),
            "open": a.open.iter().map(|p| &p.value).collect::<Vec<_>>(),
        })),
        "limits": {
            "header_read_timeout": duration(limits.header_read_timeout),
            "idle_timeout": duration(limits.idle_timeout),
            "max_header_bytes": limits.max_header_bytes,
            "max_body_bytes": limits.max_body_bytes,
            "max_connections": limits.max_connections,
            "shutdown_deadline": duration(limits.shutdown_deadline),
        },
        "forwarded": { "trust": config.forwarded.trust },
        "discovery": {
            "min_interval": duration(config.discovery.min_interval),
            "max_interval": duration(config.discovery.max_interval),
            "hosts_file": config.discovery.hosts_file,
            "resolv_conf": config.discovery.resolv_conf,
        },
        "log": {
            "format": match config.log.format { crate::config::LogFormat::Text => "text", crate::config::LogFormat::Json => "json" },
            "level": config.log.level,
        },
    })
}
