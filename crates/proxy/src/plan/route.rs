//! One route as a request needs it: its backends (each an upstream, or
//! an answer of the route's own) with their weights and chains, the URL
//! rewrite, the mirrors, and its own timeouts and retries.

use std::{
    sync::{
        atomic::{AtomicU32, Ordering::Relaxed},
        Arc,
    },
    time::Duration,
};

use http::HeaderValue;

use super::filters::{named, Redirector, Responder};
use super::routes::rewrite::{new_path, segments};
use crate::{
    config::{HeaderRuleSettings, PathMatch, PathRewriteSettings, RouteSettings, TrailerPolicy},
    ids::UpstreamId,
    middleware::{headers::HeaderRewriter, Chain, Handler},
    upstream::{retry::RetryPolicy, Upstream},
};

/// What "no timeout" is when a route turns one off (`0s`).
const NO_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// One route as a request needs it.
#[derive(Debug)]
pub(crate) struct Route {
    /// At least one; picked by weight.
    backends: Vec<Backend>,
    /// The running sums of the backends' weights, when there are several.
    cumulative: Vec<u64>,
    /// The protocols its requests may upgrade to (lower case).
    pub upgrades: Vec<String>,
    /// `http.route` of its spans, its metrics label.
    pub name: String,
    /// Where an HTTP/2 client's request trailers go.
    pub request_trailers: TrailerPolicy,
    rewrite: Option<UrlRewrite>,
    pub mirrors: Vec<Mirror>,
    pub policy: RoutePolicy,
}

/// One of a route's backends.
#[derive(Debug)]
pub(crate) struct Backend {
    /// `None`: the chain answers (a redirect, a response, a 500).
    pub upstream: Option<UpstreamId>,
    /// The route's chain, then its filters and this backend's.
    pub chain: Arc<Chain>,
}

#[derive(Debug)]
struct UrlRewrite {
    host: Option<HeaderValue>,
    path: Option<PathRewriteSettings>,
    prefix_segments: usize,
}

/// A copy of the route's requests to another upstream.
#[derive(Debug)]
pub(crate) struct Mirror {
    pub upstream: UpstreamId,
    /// Requests copied, per million.
    per_million: u32,
    pub limit: Arc<MirrorLimit>,
}

/// The copies of one mirror in flight, bounded.
#[derive(Debug)]
pub(crate) struct MirrorLimit {
    max: u32,
    in_flight: AtomicU32,
}

/// One copy's place under its mirror's limit, given back when dropped.
#[derive(Debug)]
pub(crate) struct MirrorSlot(Arc<MirrorLimit>);

impl Drop for MirrorSlot {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

impl Mirror {
    /// Whether this request is one the mirror copies (by its share).
    pub(crate) fn chosen(&self) -> bool {
        self.per_million >= 1_000_000 || fastrand::u32(0..1_000_000) < self.per_million
    }

    /// A place for one more copy, unless `max_in_flight` are out.
    pub(crate) fn slot(&self) -> Option<MirrorSlot> {
        let limit = &self.limit;
        limit
            .in_flight
            .fetch_update(Relaxed, Relaxed, |n| (n < limit.max).then_some(n + 1))
            .ok()
            .map(|_| MirrorSlot(Arc::clone(limit)))
    }
}

/// A route's own timeouts and retries, over its upstream's.
#[derive(Debug, Default)]
pub(crate) struct RoutePolicy {
    /// From the first attempt to the response head, retries included.
    pub request_timeout: Option<Duration>,
    /// One attempt, in place of the upstream's `timeouts.request`.
    pub backend_timeout: Option<Duration>,
    pub retries: Option<RouteRetries>,
}

#[derive(Debug)]
pub(crate) struct RouteRetries {
    pub attempts: u32,
    pub policy: RetryPolicy,
}

impl Route {
    /// Compiles `route`, whose middleware is `chain`; `upstream` finds
    /// an upstream's id by name (validated: every name is defined).
    pub(crate) fn compile(
        route: &RouteSettings,
        chain: &Arc<Chain>,
        upstream: impl Fn(&str) -> Option<UpstreamId>,
    ) -> anyhow::Result<Self> {
        let mut filters = Vec::new();
        if route.request_headers.is_some() || route.response_headers.is_some() {
            filters.push(rewriter(&route.request_headers, &route.response_headers)?);
        }
        let with = |more: Vec<(Arc<str>, Arc<dyn Handler>)>| match more.is_empty() {
            true => Arc::clone(chain),
            false => Arc::new(chain.extended(more)),
        };
        let mut backends = Vec::new();
        let mut cumulative = Vec::new();
        if let Some(redirect) = &route.redirect {
            let mut more = filters.clone();
            more.push(named("redirect", Redirector::new(route, &redirect.value)));
            backends.push(Backend {
                upstream: None,
                chain: with(more),
            });
        } else if let Some(respond) = &route.respond {
            let mut more = filters.clone();
            more.push(named("respond", Responder::new(&respond.value)));
            backends.push(Backend {
                upstream: None,
                chain: with(more),
            });
        } else if let Some(name) = &route.upstream {
            backends.push(Backend {
                upstream: upstream(&name.value),
                chain: with(filters.clone()),
            });
        } else {
            let mut total = 0u64;
            for backend in &route.backends {
                let backend = &backend.value;
                let mut more = filters.clone();
                if backend.request_headers.is_some() || backend.response_headers.is_some() {
                    more.push(rewriter(
                        &backend.request_headers,
                        &backend.response_headers,
                    )?);
                }
                let target = match backend.status {
                    Some(status) => {
                        more.push(named("backend", Responder::status(status)));
                        None
                    }
                    None => upstream(&backend.upstream.value),
                };
                total += u64::from(backend.weight);
                cumulative.push(total);
                backends.push(Backend {
                    upstream: target,
                    chain: with(more),
                });
            }
            if total == 0 {
                // No backend takes traffic: the Gateway API's 500.
                let mut more = filters.clone();
                more.push(named("backend", Responder::status(500)));
                backends = vec![Backend {
                    upstream: None,
                    chain: with(more),
                }];
            }
            if backends.len() == 1 {
                cumulative.clear();
            }
        }
        Ok(Self {
            backends,
            cumulative,
            upgrades: route
                .upgrades
                .iter()
                .map(|p| p.value.to_ascii_lowercase())
                .collect(),
            name: route.name().to_string(),
            request_trailers: route.request_trailers,
            rewrite: url_rewrite(route)?,
            mirrors: route
                .mirror
                .iter()
                .filter_map(|m| {
                    let m = &m.value;
                    Some(Mirror {
                        upstream: upstream(&m.upstream.value)?,
                        per_million: share(m.percent),
                        limit: Arc::new(MirrorLimit {
                            max: m.max_in_flight,
                            in_flight: AtomicU32::new(0),
                        }),
                    })
                })
                .collect(),
            policy: policy(route),
        })
    }

    /// The backend a request takes (by weight, when there are several).
    #[inline]
    pub(crate) fn pick(&self) -> usize {
        match self.cumulative.last() {
            None => 0,
            Some(&total) => {
                let at = fastrand::u64(0..total);
                self.cumulative.partition_point(|&sum| sum <= at)
            }
        }
    }

    pub(crate) fn backend(&self, index: usize) -> &Backend {
        &self.backends[index.min(self.backends.len() - 1)]
    }

    /// The path the upstream receives instead of `path` (the normalised
    /// one), if the route rewrites it.
    pub(crate) fn rewritten_path(&self, path: &str) -> Option<String> {
        let rewrite = self.rewrite.as_ref()?;
        let rule = rewrite.path.as_ref()?;
        Some(new_path(path, rule, rewrite.prefix_segments))
    }

    /// The Host sent to `upstream`: the route's rewrite, else the
    /// upstream's `host_header`, else (`None`) the client's.
    pub(crate) fn host_header<'a>(&'a self, upstream: &'a Upstream) -> Option<&'a HeaderValue> {
        self.rewrite
            .as_ref()
            .and_then(|r| r.host.as_ref())
            .or(upstream.host_header.as_ref())
    }
}

/// A header changing handler for `request` and `response` rules.
fn rewriter(
    request: &Option<HeaderRuleSettings>,
    response: &Option<HeaderRuleSettings>,
) -> anyhow::Result<(Arc<str>, Arc<dyn Handler>)> {
    let none = HeaderRuleSettings::default();
    let rewriter = HeaderRewriter::new(
        request.as_ref().unwrap_or(&none),
        response.as_ref().unwrap_or(&none),
    )?;
    Ok(named("headers", rewriter))
}

fn url_rewrite(route: &RouteSettings) -> anyhow::Result<Option<UrlRewrite>> {
    let Some(rewrite) = &route.rewrite else {
        return Ok(None);
    };
    let rewrite = &rewrite.value;
    let host = rewrite
        .hostname
        .as_deref()
        .map(HeaderValue::from_str)
        .transpose()
        .map_err(|_| anyhow::anyhow!("rewrite.hostname is not a host name"))?;
    Ok(Some(UrlRewrite {
        host,
        path: rewrite.path.clone(),
        prefix_segments: match route.match_kind {
            PathMatch::Prefix => segments(&route.path.value),
            _ => 0,
        },
    }))
}

/// A percentage as parts per million.
fn share(percent: f64) -> u32 {
    // Validated: 0 to 100.
    (percent * 10_000.0).round().clamp(0.0, 1_000_000.0) as u32
}

fn policy(route: &RouteSettings) -> RoutePolicy {
    let off = |d: Duration| if d.is_zero() { NO_TIMEOUT } else { d };
    RoutePolicy {
        request_timeout: route.timeouts.request.filter(|d| !d.is_zero()),
        backend_timeout: route.timeouts.backend_request.map(off),
        retries: route.retries.as_ref().map(|r| RouteRetries {
            attempts: r.value.attempts,
            policy: RetryPolicy::for_route(&r.value.on, r.value.backoff),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(yaml: &str) -> Route {
        let settings: RouteSettings = serde_saphyr::from_str(yaml).unwrap();
        let names = ["a", "b", "c"];
        let id = |name: &str| {
            let at = names.iter().position(|n| *n == name)?;
            Some(UpstreamId::new(at))
        };
        Route::compile(&settings, &Arc::new(Chain::default()), id).unwrap()
    }

    #[test]
    fn weights_split_requests_and_zero_takes_none() {
        let r = route("{ path: /, backends: [{ upstream: a, weight: 90 }, { upstream: b, weight: 10 }, { upstream: c, weight: 0 }] }");
        let mut counts = [0u32; 3];
        fastrand::seed(7);
        for _ in 0..100_000 {
            counts[r.pick()] += 1;
        }
        assert_eq!(counts[2], 0, "weight 0: no traffic");
        let share = f64::from(counts[0]) / 100_000.0;
        assert!((share - 0.9).abs() < 0.01, "{counts:?}");
        assert_eq!(r.backend(1).upstream, Some(UpstreamId::new(1)));
    }

    #[test]
    fn a_route_of_zero_weights_answers_500_itself() {
        let r = route("{ path: /, backends: [{ upstream: a, weight: 0 }] }");
        assert_eq!(r.pick(), 0);
        assert_eq!(r.backend(0).upstream, None);
        assert!(!r.backend(0).chain.is_empty());
    }

    #[test]
    fn mirrors_copy_their_share_and_no_more_than_their_limit() {
        let r = route(
            "{ path: /, upstream: a, mirror: [{ upstream: b, percent: 25, max_in_flight: 2 }] }",
        );
        let mirror = &r.mirrors[0];
        fastrand::seed(9);
        let chosen = (0..100_000).filter(|_| mirror.chosen()).count();
        assert!((24_000..26_000).contains(&chosen), "{chosen}");
        let (one, two) = (mirror.slot(), mirror.slot());
        assert!(one.is_some() && two.is_some() && mirror.slot().is_none());
        drop(one);
        assert!(
            mirror.slot().is_some(),
            "a slot comes back when its copy ends"
        );
    }

    #[test]
    fn a_route_turns_its_timeouts_off_with_zero() {
        let r = route("{ path: /, upstream: a, timeouts: { request: 0s, backend_request: 0s } }");
        assert_eq!(r.policy.request_timeout, None);
        assert_eq!(r.policy.backend_timeout, Some(NO_TIMEOUT));
        let r = route(
            "{ path: /p, upstream: a, rewrite: { hostname: x.example, path: { prefix: /q } } }",
        );
        assert_eq!(r.rewritten_path("/p/1").as_deref(), Some("/q/1"));
    }
}
