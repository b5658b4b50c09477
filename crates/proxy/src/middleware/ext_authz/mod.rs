//! `ext_authz`: an authorization service decides each request
//! (docs/MIDDLEWARE.md). Over HTTP it is forward auth with Traefik's and
//! Caddy's semantics: the service gets the request's headers with
//! `X-Forwarded-Method`, `-Proto`, `-Host`, `-Uri` and `-For`; a 2xx lets
//! the request through with the `upstream_headers` of its answer copied
//! onto it, and any other answer is the client's, status, headers and
//! body (forward_auth.rs). Over gRPC it is Envoy's `Authorization/Check`
//! (grpc.rs).
//!
//! The `upstream_headers` are the ones the service is trusted to set, so
//! the client's own are removed from every request first, whatever the
//! decision. A decision that does not come within `timeout` (or a broken
//! one) is decided by `on_failure`. Allow answers can be remembered for a
//! TTL under the method, path and chosen headers.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{atomic::Ordering::Relaxed, Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use anyhow::bail;
use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode};
use http_body_util::Full;
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::{TokioExecutor, TokioTimer},
};
use tracing::debug;

mod counts;
mod forward_auth;
pub(super) mod grpc;
#[cfg(test)]
mod tests;

use counts::AuthzCounts;

use super::{
    build::{Build, Builder},
    Answer, CallTrace, Exchange, Flow, Handler, RequestView,
};
use crate::config::{ExtAuthzSettings, OnFailure};
use crate::telemetry::{
    trace::{Span, SpanKind},
    Exposition,
};

/// What the service is asked about: the request, owned.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    pub method: String,
    /// The path and query, as the upstream would get them.
    pub uri: String,
    pub host: String,
    pub scheme: &'static str,
    pub headers: Vec<(HeaderName, String)>,
    pub client_ip: IpAddr,
    pub body_len: Option<usize>,
    pub body: Option<Bytes>,
    /// The call's own `traceparent` (its CLIENT span as the parent), in
    /// place of any the client sent, when the request is traced.
    pub traceparent: Option<[u8; 55]>,
}

/// What the service decided.
#[derive(Debug, Clone)]
pub(crate) enum Decision {
    Allow {
        /// Fields for the upstream request (only `upstream_headers` are kept).
        upstream: Vec<(HeaderName, HeaderValue)>,
        /// Request fields to drop (gRPC's `headers_to_remove`).
        remove: Vec<HeaderName>,
        /// Fields for the client's answer (gRPC's `response_headers_to_add`).
        client: Vec<(HeaderName, HeaderValue)>,
    },
    Deny {
        status: StatusCode,
        headers: Vec<(HeaderName, HeaderValue)>,
        body: Bytes,
    },
}

/// Why there is no decision.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Failed {
    Unreachable,
    TimedOut,
    Broken(&'static str),
}

/// Framing and hop-by-hop fields never pass from the service to anyone.
pub(super) fn passable(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "content-length"
            | "te"
            | "trailer"
            | "upgrade"
            | "host"
    )
}

#[derive(Debug)]
enum Transport {
    Http(http::Uri),
    Grpc(http::Uri),
}

type Allowed = (
    Vec<(HeaderName, HeaderValue)>,
    Vec<HeaderName>,
    Vec<(HeaderName, HeaderValue)>,
);

/// An allow answer and until when it stands.
type Remembered = (Instant, Arc<Allowed>);

#[derive(Debug)]
struct Cache {
    ttl: Duration,
    key: Vec<HeaderName>,
    max_entries: usize,
    entries: Mutex<HashMap<Vec<u8>, Remembered>>,
}

#[derive(Debug)]
pub(crate) struct ExternalAuthorizer {
    shared: Arc<Shared>,
    request_headers: Option<Vec<HeaderName>>,
    body: Option<usize>,
    cache: Option<Arc<Cache>>,
}

/// What a decision's future needs.
#[derive(Debug)]
struct Shared {
    /// The handler's name (`middleware.NAME`), for its trace spans.
    name: String,
    transport: Transport,
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
    on_failure: OnFailure,
    upstream_headers: Vec<HeaderName>,
    counts: AuthzCounts,
}

impl Build for ExtAuthzSettings {
    fn build(&self, builder: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(ExternalAuthorizer::new(self, &builder.name)?))
    }
}

impl ExternalAuthorizer {
    pub(crate) fn new(settings: &ExtAuthzSettings, name: &str) -> anyhow::Result<Self> {
        let transport = match (&settings.http, &settings.grpc) {
            (Some(url), None) => Transport::Http(url.0.clone()),
            (None, Some(url)) => Transport::Grpc(url.0.clone()),
            _ => bail!("give exactly one of `http` (forward auth) and `grpc` (Envoy's Authorization/Check)"),
        };
        let url = match &transport {
            Transport::Http(url) | Transport::Grpc(url) => url,
        };
        if url.scheme_str() != Some("http") {
            bail!("the authorization service is reached over http:// (h2c for gRPC), on loopback or a private network");
        }
        if settings.timeout.is_zero() {
            bail!("timeout: 0 would decide every request by on_failure");
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(settings.timeout));
        let mut builder = Client::builder(TokioExecutor::new());
        builder
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(60));
        if matches!(transport, Transport::Grpc(_)) {
            builder.http2_only(true);
        }
        let cache = settings.cache.as_ref().map(|c| {
            Arc::new(Cache {
                ttl: c.ttl,
                key: c.key.iter().map(|h| h.0.clone()).collect(),
                max_entries: c.max_entries.max(1),
                entries: Mutex::default(),
            })
        });
        Ok(Self {
            shared: Arc::new(Shared {
                name: name.to_string(),
                transport,
                client: builder.build(connector),
                timeout: settings.timeout,
                on_failure: settings.on_failure,
                upstream_headers: settings
                    .upstream_headers
                    .iter()
                    .map(|h| h.0.clone())
                    .collect(),
                counts: AuthzCounts::default(),
            }),
            request_headers: settings
                .request_headers
                .as_ref()
                .map(|list| list.iter().map(|h| h.0.clone()).collect()),
            body: settings
                .body
                .map(|b| usize::try_from(b).unwrap_or(usize::MAX)),
            cache,
        })
    }

    /// `query`: the request's as the upstream would get it (without an
    /// `api_key` parameter taken out before); `removed`: the fields the
    /// handlers before this one take out of the upstream request (an
    /// `api_key` header, a `basic_auth` Authorization), which the service
    /// is not sent either unless `request_headers` names them: a
    /// credential checked here stays here.
    fn asked(
        &self,
        request: &RequestView<'_>,
        query: Option<&str>,
        removed: &[HeaderName],
    ) -> Asked {
        let mut headers = Vec::new();
        for (name, value) in request.headers() {
            let Ok(name) = HeaderName::from_bytes(name) else {
                continue;
            };
            let chosen = match &self.request_headers {
                Some(list) => list.contains(&name),
                None => {
                    passable(&name)
                        && !name.as_str().starts_with("x-forwarded-")
                        && !removed.contains(&name)
                }
            };
            if chosen {
                headers.push((name, String::from_utf8_lossy(value).into_owned()));
            }
        }
        let uri = match query.filter(|q| !q.is_empty()) {
            Some(query) => format!("{}?{query}", request.path),
            None => request.path.to_string(),
        };
        Asked {
            method: request.method.as_str().to_string(),
            uri,
            host: request.host.unwrap_or_default().to_string(),
            scheme: if request.secure { "https" } else { "http" },
            headers,
            client_ip: request.client_ip,
            body_len: request.body_len,
            body: request.body.map(Bytes::copy_from_slice),
            traceparent: None,
        }
    }

    fn cache_key(&self, cache: &Cache, request: &RequestView<'_>, query: Option<&str>) -> Vec<u8> {
        let mut key = Vec::with_capacity(128);
        key.extend_from_slice(request.method.as_str().as_bytes());
        key.push(0);
        key.extend_from_slice(request.path.as_bytes());
        key.push(0);
        key.extend_from_slice(query.unwrap_or_default().as_bytes());
        for name in &cache.key {
            key.push(0);
            for value in request.fields.get_all(name.as_str()) {
                key.extend_from_slice(value);
                key.push(1);
            }
        }
        key
    }
}

/// `span` ended with the call's outcome: `sluice.authz.decision`
/// (`allowed` or `denied`), or an error whose type says why there is none.
fn called(mut span: Box<Span>, decided: &Result<Decision, Failed>) -> Box<Span> {
    match decided {
        Ok(Decision::Allow { .. }) => span.str("sluice.authz.decision", b"allowed"),
        Ok(Decision::Deny { status, .. }) => {
            span.str("sluice.authz.decision", b"denied");
            span.int("sluice.authz.status", i64::from(status.as_u16()));
        }
        Err(failed) => {
            span.error = true;
            let why: &[u8] = match failed {
                Failed::Unreachable => b"unreachable",
                Failed::TimedOut => b"timeout",
                Failed::Broken(_) => b"broken_answer",
            };
            span.str("error.type", why);
        }
    }
    span.end();
    span
}

/// The allowed request's edits: the trusted fields set, the removed ones dropped.
fn apply(allowed: &Allowed, exchange: &mut Exchange) {
    let (upstream, remove, client) = allowed;
    for name in remove {
        if passable(name) {
            exchange.request_headers.remove.push(name.clone());
        }
    }
    for (name, value) in upstream {
        exchange
            .request_headers
            .add
            .push((name.clone(), value.clone()));
    }
    for (name, value) in client {
        if passable(name) {
            exchange
                .response_headers
                .add
                .push((name.clone(), value.clone()));
        }
    }
}

impl Shared {
    async fn decide(&self, asked: &Asked) -> Result<Decision, Failed> {
        let call = async {
            match &self.transport {
                Transport::Http(url) => forward_auth::check(&self.client, url, asked).await,
                Transport::Grpc(url) => grpc::check(&self.client, url, asked).await,
            }
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .unwrap_or(Err(Failed::TimedOut))
    }

    /// The CLIENT span of one call to the service, a child of the
    /// request's SERVER span (docs/OBSERVABILITY.md).
    fn call_span(&self, trace: &CallTrace) -> Box<Span> {
        let mut span = Box::new(Span::new(
            trace.parent.child(),
            Some(trace.parent.span_id),
            SpanKind::Client,
        ));
        let (url, method, full) = match &self.transport {
            Transport::Http(url) => (url, "GET", url.to_string()),
            Transport::Grpc(url) => (url, "POST", grpc::url(url)),
        };
        span.name = format!("ext_authz {}", self.name);
        span.str("http.request.method", method.as_bytes());
        span.str("url.full", full.as_bytes());
        span.str("server.address", url.host().unwrap_or_default().as_bytes());
        span.int("server.port", i64::from(url.port_u16().unwrap_or(80)));
        if matches!(self.transport, Transport::Grpc(_)) {
            span.str("rpc.system", b"grpc");
            span.str("rpc.service", b"envoy.service.auth.v3.Authorization");
            span.str("rpc.method", b"Check");
        }
        span.str("sluice.handler", self.name.as_bytes());
        span
    }

    /// The flow for a decision, or for its failure.
    fn flow(&self, decided: Result<Decision, Failed>, cache: Option<(&Cache, Vec<u8>)>) -> Flow {
        match decided {
            Ok(Decision::Allow {
                upstream,
                remove,
                client,
            }) => {
                self.counts.allowed.fetch_add(1, Relaxed);
                let upstream = upstream
                    .into_iter()
                    .filter(|(name, _)| self.upstream_headers.contains(name))
                    .collect();
                let allowed = Arc::new((upstream, remove, client));
                if let Some((cache, key)) = cache {
                    let mut entries = cache.entries.lock().unwrap_or_else(PoisonError::into_inner);
                    if entries.len() >= cache.max_entries {
                        let now = Instant::now();
                        entries.retain(|_, (until, _)| *until > now);
                        if entries.len() >= cache.max_entries {
                            entries.clear();
                        }
                    }
                    entries.insert(key, (Instant::now() + cache.ttl, Arc::clone(&allowed)));
                }
                Flow::Apply(Box::new(move |exchange| {
                    apply(&allowed, exchange);
                    Flow::Next
                }))
            }
            Ok(Decision::Deny {
                status,
                headers,
                body,
            }) => {
                self.counts.denied.fetch_add(1, Relaxed);
                let mut answer = Answer {
                    body: Some(body),
                    ..Answer::problem(status, "the authorization service refused the request")
                };
                answer.headers = headers.into_iter().filter(|(n, _)| passable(n)).collect();
                if answer.body.as_ref().is_some_and(Bytes::is_empty) {
                    answer.body = None;
                    answer.detail = None;
                }
                Flow::Answer(answer)
            }
            Err(failed) => {
                self.counts.fallbacks.fetch_add(1, Relaxed);
                debug!(?failed, "ext_authz gave no decision");
                match self.on_failure {
                    OnFailure::FailOpen => Flow::Next,
                    OnFailure::FailClosed => Flow::Answer(match failed {
                        Failed::TimedOut => Answer::problem(
                            StatusCode::GATEWAY_TIMEOUT,
                            "the authorization service did not decide in time",
                        ),
                        Failed::Unreachable => Answer::problem(
                            StatusCode::SERVICE_UNAVAILABLE,
                            "the authorization service cannot be reached",
                        ),
                        Failed::Broken(why) => Answer::problem(
                            StatusCode::BAD_GATEWAY,
                            format!("the authorization service's answer is broken: {why}"),
                        ),
                    }),
                }
            }
        }
    }
}

impl Handler for ExternalAuthorizer {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        // What the handlers before this one removed (not what it removes).
        let removed_before = exchange.request_headers.remove.len();
        for name in &self.shared.upstream_headers {
            exchange.request_headers.remove.push(name.clone());
        }
        // The query as the upstream gets it (an `api_key` before may have
        // taken its parameter out): the service is asked about that one.
        let query = exchange.request_headers.query.as_deref().or(request.query);
        let key = self.cache.as_ref().map(|cache| {
            let key = self.cache_key(cache, request, query);
            let entries = cache.entries.lock().unwrap_or_else(PoisonError::into_inner);
            let hit = entries
                .get(&key)
                .filter(|(until, _)| *until > Instant::now())
                .map(|(_, allowed)| Arc::clone(allowed));
            (key, hit)
        });
        if let Some((_, Some(allowed))) = &key {
            self.shared.counts.cache_hits.fetch_add(1, Relaxed);
            apply(allowed, exchange);
            return Flow::Next;
        }
        let removed = &exchange.request_headers.remove[..removed_before];
        let mut asked = self.asked(request, query, removed);
        let shared = Arc::clone(&self.shared);
        let cache = self.cache.clone();
        let trace = exchange.trace.clone();
        Flow::Wait(Box::pin(async move {
            let span = trace.map(|trace| {
                let span = shared.call_span(&trace);
                asked.traceparent = Some(span.context.traceparent());
                (trace.tracer, span)
            });
            let decided = shared.decide(&asked).await;
            if let Some((tracer, span)) = span {
                tracer.send(called(span, &decided));
            }
            let cache = cache.as_deref().zip(key.map(|(k, _)| k));
            shared.flow(decided, cache)
        }))
    }

    /// With `body`, the body is held whole up to it (a longer one is 413,
    /// as Traefik's `maxBodySize` refuses it) and sent along.
    fn wants_body(&self, _request: &RequestView<'_>) -> Option<usize> {
        self.body
    }

    fn render_metrics(&self, name: &str, out: &mut Exposition) {
        self.shared.counts.render(name, out);
    }
}
