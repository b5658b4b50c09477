//! `ext_authz`: an authorization service decides each request
//! (docs/MIDDLEWARE.md). Over HTTP it is forward auth with Traefik's and
//! Caddy's semantics: the service gets the request's headers with
//! `X-Forwarded-Method`, `-Proto`, `-Host`, `-Uri` and `-For`; a 2xx lets
//! the request through with the `upstream_headers` of its answer copied
//! onto it, and any other answer is the client's, status, headers and
//! body. Over gRPC it is Envoy's `Authorization/Check` (ext_authz_grpc.rs).
//!
//! The `upstream_headers` are the ones the service is trusted to set, so
//! the client's own are removed from every request first, whatever the
//! decision. A decision that does not come within `timeout` (or a broken
//! one) is decided by `on_failure`. Allow answers can be remembered for a
//! TTL under the method, path and chosen headers.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{
        atomic::{AtomicU64, Ordering::Relaxed},
        Arc, Mutex, PoisonError,
    },
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

use super::{
    build::{Build, Builder},
    ext_authz_grpc, ext_authz_http, Answer, Exchange, Flow, Handler, RequestView,
};
use crate::config::{ExtAuthzSettings, OnFailure};

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

/// Counts for `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct AuthzCounts {
    pub allowed: AtomicU64,
    pub denied: AtomicU64,
    pub fallbacks: AtomicU64,
    pub cache_hits: AtomicU64,
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
    transport: Transport,
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
    on_failure: OnFailure,
    upstream_headers: Vec<HeaderName>,
    counts: AuthzCounts,
}

impl Build for ExtAuthzSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(ExternalAuthorizer::new(self)?))
    }
}

impl ExternalAuthorizer {
    pub(crate) fn new(settings: &ExtAuthzSettings) -> anyhow::Result<Self> {
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
    /// `api_key` parameter taken out before).
    fn asked(&self, request: &RequestView<'_>, query: Option<&str>) -> Asked {
        let mut headers = Vec::new();
        for (name, value) in request.headers() {
            let Ok(name) = HeaderName::from_bytes(name) else {
                continue;
            };
            let chosen = match &self.request_headers {
                Some(list) => list.contains(&name),
                None => passable(&name) && !name.as_str().starts_with("x-forwarded-"),
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
                Transport::Http(url) => ext_authz_http::check(&self.client, url, asked).await,
                Transport::Grpc(url) => ext_authz_grpc::check(&self.client, url, asked).await,
            }
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .unwrap_or(Err(Failed::TimedOut))
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
        let asked = self.asked(request, query);
        let shared = Arc::clone(&self.shared);
        let cache = self.cache.clone();
        Flow::Wait(Box::pin(async move {
            let decided = shared.decide(&asked).await;
            let cache = cache.as_deref().zip(key.map(|(k, _)| k));
            shared.flow(decided, cache)
        }))
    }

    /// With `body`, the body is held whole up to it (a longer one is 413,
    /// as Traefik's `maxBodySize` refuses it) and sent along.
    fn wants_body(&self, _request: &RequestView<'_>) -> Option<usize> {
        self.body
    }

    fn authz_counts(&self) -> Option<&AuthzCounts> {
        Some(&self.shared.counts)
    }
}
