//! The admin listener, on its own address, on the control thread: `/health` (the
//! process is up), `/ready` (every upstream has a healthy host), `/metrics`
//! (Prometheus text), `/config` (the effective configuration as JSON, with
//! the reload status), `/upstreams` (each upstream's hosts and their
//! state) and `POST /reload` (read the file again).

use std::{net::TcpListener as StdListener, sync::Arc, time::Duration};

use http::{Method, StatusCode};
use serde_json::json;
use tokio::{io::AsyncReadExt, net::TcpStream, sync::watch};
use tracing::warn;

use super::reload::{ReloadError, Reloader};
use crate::{
    config::Config,
    plan::{Plan, Plans},
    telemetry::Metrics,
};

/// Admin clients get this long to send a request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
const LIMITS: http1::Limits = http1::Limits {
    max_head: 8 * 1024,
    max_body: 0,
};

#[derive(Debug, Clone)]
pub(crate) struct AdminState {
    plans: Arc<Plans>,
    metrics: Arc<Metrics>,
    /// Reloads, and the `/config` it renders.
    reloader: Arc<Reloader>,
}

impl AdminState {
    pub(crate) fn new(plans: Arc<Plans>, metrics: Arc<Metrics>, reloader: Arc<Reloader>) -> Self {
        Self {
            plans,
            metrics,
            reloader,
        }
    }
}

/// Serves the admin API on `listener` until shutdown (on the control
/// thread's runtime: the admin API and reloads share one thread).
pub(crate) async fn run(
    listener: StdListener,
    state: AdminState,
    mut shutdown: watch::Receiver<bool>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(err) => return warn!(%err, "cannot register the admin listener"),
    };
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => if let Ok((stream, _)) = accepted {
                tokio::spawn(serve(stream, state.clone()));
            }
        }
    }
}

/// One request per connection: the admin API is for probes and scrapers.
async fn serve(mut stream: TcpStream, state: AdminState) {
    let mut buf = Vec::with_capacity(1024);
    let head = loop {
        match http1::parse_head(&buf, &LIMITS) {
            Ok(Some(head)) => break Ok(head),
            Ok(None) => {}
            Err(rejection) => break Err(rejection),
        }
        match tokio::time::timeout(READ_TIMEOUT, stream.read_buf(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return,
        }
    };
    let (status, content_type, body) = match head {
        Err(rejection) => problem(rejection.status, rejection.detail),
        Ok(head) if &buf[head.path.clone()] == b"/reload" => {
            if head.method == Method::POST {
                reload(&state.reloader).await
            } else {
                problem(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "POST /reload reads the configuration file again".into(),
                )
            }
        }
        Ok(head) if head.method != Method::GET && head.method != Method::HEAD => problem(
            StatusCode::METHOD_NOT_ALLOWED,
            "the admin API answers GET and HEAD (and POST /reload)".into(),
        ),
        Ok(head) => route(&state, std::str::from_utf8(&buf[head.path]).unwrap_or("")),
    };
    let mut out = Vec::with_capacity(body.len() + 256);
    http1::io::with_date(|date| {
        http1::encode_head(
            &mut out,
            status,
            [(&b"content-type"[..], content_type.as_bytes())],
            body.len(),
            date,
            http1::Persistence::Close,
        );
    });
    out.extend_from_slice(&body);
    let _ = http1::io::write_bounded(&mut stream, &out, READ_TIMEOUT).await;
}

/// `POST /reload`: 200 with the new generation, or the reason it failed
/// (the configuration in use stays).
async fn reload(reloader: &Reloader) -> (StatusCode, &'static str, Vec<u8>) {
    match reloader.reload("POST /reload").await {
        Ok(generation) => (
            StatusCode::OK,
            "application/json",
            json!({ "status": "reloaded", "generation": generation })
                .to_string()
                .into_bytes(),
        ),
        Err(ReloadError::NoFile) => problem(
            StatusCode::CONFLICT,
            "the proxy was not started from a file; there is nothing to reload".into(),
        ),
        Err(ReloadError::Invalid(message)) => problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("the configuration in use stays: {message}"),
        ),
    }
}

fn route(state: &AdminState, path: &str) -> (StatusCode, &'static str, Vec<u8>) {
    const JSON: &str = "application/json";
    let plan = state.plans.load();
    match path {
        "/health" => (StatusCode::OK, JSON, br#"{"status":"ok"}"#.to_vec()),
        "/ready" => {
            let now = plan.clock();
            let down: Vec<&str> = plan
                .upstreams
                .iter()
                .filter(|u| u.balancer.healthy(now) == 0)
                .map(|u| u.name.as_str())
                .collect();
            if down.is_empty() {
                (StatusCode::OK, JSON, br#"{"status":"ready"}"#.to_vec())
            } else {
                let body = json!({ "status": "not ready", "upstreams_without_healthy_host": down });
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    JSON,
                    body.to_string().into_bytes(),
                )
            }
        }
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            {
                let mut text = state.metrics.render();
                healthy_hosts(&plan, &mut text);
                super::upstreams::host_metrics(&plan, &mut text);
                plan.chains.render_metrics(&mut text);
                text.into_bytes()
            },
        ),
        "/config" => (StatusCode::OK, JSON, state.reloader.shown().as_ref().clone()),
        "/upstreams" => (
            StatusCode::OK,
            JSON,
            serde_json::to_vec_pretty(&super::upstreams::render(&plan)).unwrap_or_default(),
        ),
        _ => problem(
            StatusCode::NOT_FOUND,
            format!("no admin resource at {path}; try /health, /ready, /metrics, /config, /upstreams or POST /reload"),
        ),
    }
}

/// `sluice_upstream_healthy_hosts`: hosts not ejected, per upstream.
fn healthy_hosts(plan: &Plan, out: &mut String) {
    use std::fmt::Write as _;
    let now = plan.clock();
    out.push_str("# HELP sluice_upstream_healthy_hosts Hosts not ejected by passive health checks.\n# TYPE sluice_upstream_healthy_hosts gauge\n");
    for upstream in &plan.upstreams {
        let _ = writeln!(
            out,
            "sluice_upstream_healthy_hosts{{upstream=\"{}\"}} {}",
            crate::telemetry::escape(&upstream.name),
            upstream.balancer.healthy(now)
        );
    }
}

fn problem(status: StatusCode, detail: String) -> (StatusCode, &'static str, Vec<u8>) {
    (
        status,
        http1::problem::PROBLEM_JSON,
        http1::Problem::new(status, detail).to_json(),
    )
}

/// The configuration after `${VAR}` substitution and defaults. Secrets are
/// never in it: keys live in files it only names, and a JWKS URL loses its
/// user information and query.
pub(super) fn effective(config: &Config) -> serde_json::Value {
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
                    "sticky": u.sticky.as_ref().map(|s| json!({ "cookie": s.cookie, "app_cookie": s.app_cookie, "key": s.key.as_ref().map(|_| "(set)") })),
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
                "match": match r.match_kind { crate::config::PathMatch::Prefix => "prefix", crate::config::PathMatch::Exact => "exact" },
                "methods": r.methods.iter().map(|m| m.value.clone()).collect::<Vec<_>>(),
                "host": r.host,
                "upstream": r.upstream.value,
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
        "admin": config.admin.as_ref().map(|a| json!({ "address": a.address.value })),
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
