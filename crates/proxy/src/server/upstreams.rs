//! The admin API's view of the balancers: `/upstreams` (each upstream's
//! policy and hosts with their state) and the per-host metrics.

use serde_json::json;

use crate::{
    ids::HostId,
    plan::Plan,
    telemetry::{Exposition, MetricKind},
    upstream::balance::HostHealth,
};

/// `/upstreams`: every upstream, its hosts and their state now.
pub(super) fn render(plan: &Plan) -> serde_json::Value {
    let now = plan.clock();
    let upstreams: serde_json::Map<String, serde_json::Value> = plan
        .upstreams
        .iter()
        .map(|upstream| {
            let limits = upstream.balancer.limits();
            let hosts: Vec<serde_json::Value> = (0..upstream.hosts.len())
                .map(|h| {
                    let host = HostId::new(h);
                    let view = upstream.balancer.view(host, now);
                    json!({
                        "host": upstream.host_name(host),
                        "address": upstream.hosts[h].to_string(),
                        "state": view.health.as_str(),
                        "weight": view.weight,
                        "in_flight": view.in_flight,
                        "waiting": limits.map(|l| l.waiting(host)),
                        "connecting": upstream.balancer.opening().connecting(host),
                        "latency_ewma_ms": view.latency_ewma.as_secs_f64() * 1e3,
                        "requests": view.requests,
                        "failures": view.failures,
                        "ejections": view.ejections,
                    })
                })
                .collect();
            (
                upstream.name.clone(),
                json!({
                    "balance": upstream.balancer.policy_name(),
                    "healthy_hosts": upstream.balancer.healthy(now),
                    "active_health_checks": upstream.active_health.is_some(),
                    "hosts": hosts,
                }),
            )
        })
        .collect();
    json!({ "upstreams": upstreams })
}

/// Per-host series: answers, failures, ejections, state and weight.
pub(super) fn host_metrics(plan: &Plan, out: &mut Exposition) {
    let now = plan.clock();
    let mut family =
        |name: &'static str, help: &str, kind: MetricKind, value: &dyn Fn(usize, usize) -> u64| {
            let mut family = out.family(name, kind, help);
            for (u, upstream) in plan.upstreams.iter().enumerate() {
                for h in 0..upstream.hosts.len() {
                    let host = HostId::new(h);
                    let address = upstream.hosts[h].to_string();
                    // `host` as written and the `address` it resolved to: a
                    // name with several addresses is several hosts, and each
                    // needs a label set of its own.
                    let labels = [
                        ("upstream", upstream.name.as_str()),
                        ("host", upstream.host_name(host)),
                        ("address", &address),
                    ];
                    family.sample(&labels, value(u, h));
                }
            }
        };
    let view = |u: usize, h: usize| plan.upstreams[u].balancer.view(HostId::new(h), now);
    family(
        "sluice_upstream_host_requests_total",
        "Response heads from each host.",
        MetricKind::Counter,
        &|u, h| view(u, h).requests,
    );
    family(
        "sluice_upstream_host_failures_total",
        "Failures counted against each host (connect, reset, timeout, 5xx).",
        MetricKind::Counter,
        &|u, h| view(u, h).failures,
    );
    family(
        "sluice_upstream_host_ejections_total",
        "Times passive health ejected each host.",
        MetricKind::Counter,
        &|u, h| view(u, h).ejections,
    );
    family(
        "sluice_upstream_host_healthy",
        "Whether each host takes traffic (1) or not (0).",
        MetricKind::Gauge,
        &|u, h| {
            u64::from(matches!(
                view(u, h).health,
                HostHealth::Healthy | HostHealth::Ramping
            ))
        },
    );
    family(
        "sluice_upstream_host_weight",
        "Each host's configured weight.",
        MetricKind::Gauge,
        &|u, h| u64::from(view(u, h).weight),
    );
}
