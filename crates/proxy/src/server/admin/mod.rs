//! The admin listener, on its own address, on the control thread: `/health` (the
//! process is up), `/ready` (every upstream has a healthy host), `/metrics`
//! (Prometheus text), `/config` (the effective configuration as JSON, with
//! the reload status, secrets hidden: `shown`), `/upstreams` (each
//! upstream's hosts and their state) and `POST /reload` (read the file
//! again), and the live dashboard (`/`, `/stats.json`: `dashboard`). Who
//! may ask what: `access` (docs/CONFIG.md, "Admin API").

mod access;
mod dashboard;

use std::{
    net::{SocketAddr, TcpListener as StdListener},
    sync::Arc,
    time::Duration,
};

use http::{Method, StatusCode};
use serde_json::json;
use tokio::{io::AsyncReadExt, net::TcpStream, sync::watch};
use tracing::warn;

use super::reload::{ReloadError, Reloader};
use crate::{
    config::READ_ENDPOINTS,
    plan::{Plan, Plans},
    telemetry::{Exposition, MetricKind, Metrics},
};
use access::Verdict;

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
    /// Reloads, and the `/config` it renders; the `admin` settings in use.
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
    // Bound beyond loopback, state changes need a token (settings can
    // change at a reload; the address cannot).
    let beyond_loopback = listener
        .local_addr()
        .map_or(true, |addr| !addr.ip().is_loopback());
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(err) => return warn!(%err, "cannot register the admin listener"),
    };
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => if let Ok((stream, peer)) = accepted {
                tokio::spawn(serve(stream, peer, state.clone(), beyond_loopback));
            }
        }
    }
}

/// A status, a content type and a body; 401s also challenge, and the
/// dashboard's answers carry its fields.
struct Answer {
    status: StatusCode,
    content_type: &'static str,
    body: Vec<u8>,
    challenge: Option<&'static str>,
    fields: &'static [(&'static str, &'static str)],
}

impl From<(StatusCode, &'static str, Vec<u8>)> for Answer {
    fn from((status, content_type, body): (StatusCode, &'static str, Vec<u8>)) -> Self {
        Self {
            status,
            content_type,
            body,
            challenge: None,
            fields: &[],
        }
    }
}

/// One request per connection: the admin API is for probes and scrapers.
async fn serve(mut stream: TcpStream, peer: SocketAddr, state: AdminState, beyond_loopback: bool) {
    let mut buf = Vec::with_capacity(1024);
    let mut fields: Vec<http1::Field> = Vec::new();
    let head = loop {
        fields.clear();
        match http1::parse_head_into(&buf, &LIMITS, &mut fields) {
            Ok(Some(head)) => break Ok(head),
            Ok(None) => {}
            Err(rejection) => break Err(rejection),
        }
        match tokio::time::timeout(READ_TIMEOUT, stream.read_buf(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return,
        }
    };
    let answer = match head {
        Err(rejection) => problem(rejection.status, rejection.detail).into(),
        Ok(head) => {
            let request = Request {
                buf: &buf,
                head: &head,
                fields: &fields,
                peer,
            };
            answer(&state, beyond_loopback, &request).await
        }
    };
    let mut out = Vec::with_capacity(answer.body.len() + 256);
    let content_type = (&b"content-type"[..], answer.content_type.as_bytes());
    let challenge = answer
        .challenge
        .map(|c| (&b"www-authenticate"[..], c.as_bytes()));
    http1::io::with_date(|date| {
        http1::encode_head(
            &mut out,
            answer.status,
            std::iter::once(content_type).chain(challenge).chain(
                answer
                    .fields
                    .iter()
                    .map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            ),
            answer.body.len(),
            date,
            http1::Persistence::Close,
        );
    });
    out.extend_from_slice(&answer.body);
    let _ = http1::io::write_bounded(&mut stream, &out, READ_TIMEOUT).await;
}

/// A parsed request and where it came from.
struct Request<'a> {
    buf: &'a [u8],
    head: &'a http1::Head,
    fields: &'a [http1::Field],
    peer: SocketAddr,
}

impl Request<'_> {
    /// The first field named `name`.
    fn field(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(n, _)| self.buf[n.clone()].eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, value)| http1::request::trim(&self.buf[value.clone()]))
    }

    /// The names the client used: `Host`, and an absolute-form target's authority.
    fn authorities(&self) -> impl Iterator<Item = &[u8]> {
        let target = &self.buf[self.head.target.clone()];
        let absolute = [&b"http://"[..], b"https://"]
            .iter()
            .find_map(|scheme| target.strip_prefix(*scheme))
            .map(|rest| {
                let end = rest.iter().position(|&b| b == b'/' || b == b'?');
                &rest[..end.unwrap_or(rest.len())]
            });
        let host = self.head.host.clone().map(|range| &self.buf[range]);
        host.into_iter().chain(absolute)
    }
}

/// Host, then path and method, then the token; then the endpoint.
async fn answer(state: &AdminState, beyond_loopback: bool, request: &Request<'_>) -> Answer {
    let config = state.reloader.config();
    let admin = config.admin.as_ref();
    let names: &[serde_saphyr::Spanned<String>] = admin.map_or(&[], |a| &a.hosts);
    let names: Vec<&str> = names.iter().map(|n| n.value.as_str()).collect();
    if let Some(host) = request
        .authorities()
        .find(|host| !access::host_allowed(host, &names))
    {
        let host = String::from_utf8_lossy(host);
        return problem(
            StatusCode::MISDIRECTED_REQUEST,
            format!("the admin listener answers for IP addresses, localhost and admin.hosts, not `{host}`"),
        )
        .into();
    }
    let path = std::str::from_utf8(&request.buf[request.head.path.clone()]).unwrap_or("");
    let method = &request.head.method;
    let reload = path == "/reload";
    if let Some((content_type, body)) = dashboard::asset(path) {
        // The page holds no data: it needs no token (docs/DASHBOARD.md).
        if method != Method::GET && method != Method::HEAD {
            return problem(
                StatusCode::METHOD_NOT_ALLOWED,
                "the dashboard answers GET and HEAD".into(),
            )
            .into();
        }
        return Answer {
            fields: dashboard::HEADERS,
            ..(StatusCode::OK, content_type, body.as_bytes().to_vec()).into()
        };
    }
    if !reload && !READ_ENDPOINTS.contains(&path) {
        return problem(
            StatusCode::NOT_FOUND,
            format!("no admin resource at {path}; try /health, /ready, /metrics, /config, /upstreams, /stats.json, / (the dashboard) or POST /reload"),
        )
        .into();
    }
    if reload && method != Method::POST {
        return problem(
            StatusCode::METHOD_NOT_ALLOWED,
            "POST /reload reads the configuration file again".into(),
        )
        .into();
    }
    if !reload && method != Method::GET && method != Method::HEAD {
        return problem(
            StatusCode::METHOD_NOT_ALLOWED,
            "the admin API answers GET and HEAD (and POST /reload)".into(),
        )
        .into();
    }
    let authorization = request.field("authorization");
    match access::authorize(admin, beyond_loopback, path, reload, authorization) {
        Verdict::Allowed if reload => reload_now(&state.reloader).await.into(),
        Verdict::Allowed if path == "/stats.json" => Answer {
            fields: dashboard::HEADERS,
            ..dashboard::stats(state, &state.plans.load()).into()
        },
        Verdict::Allowed => route(state, path).into(),
        Verdict::Unauthorized { wrong } => {
            warn!(client = %request.peer, %method, path, wrong_token = wrong, "admin request refused: no valid bearer token");
            Answer {
                challenge: Some(if wrong {
                    r#"Bearer realm="sluice-admin", error="invalid_token""#
                } else {
                    r#"Bearer realm="sluice-admin""#
                }),
                ..problem(
                    StatusCode::UNAUTHORIZED,
                    format!("{method} {path} needs `Authorization: Bearer TOKEN` with admin.token"),
                )
                .into()
            }
        }
        Verdict::NoToken => problem(
            StatusCode::FORBIDDEN,
            format!("{method} {path} changes state: on an admin listener beyond loopback it needs admin.token (or admin.token_file), and none is set"),
        )
        .into(),
    }
}

/// `POST /reload`: 200 with the new generation, or the reason it failed
/// (the configuration in use stays).
async fn reload_now(reloader: &Reloader) -> (StatusCode, &'static str, Vec<u8>) {
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
                let mut text = Exposition::new();
                state.metrics.render(&mut text);
                healthy_hosts(&plan, &mut text);
                super::upstreams::host_metrics(&plan, &mut text);
                plan.chains.render_metrics(&mut text);
                text.finish().into_bytes()
            },
        ),
        "/config" => (
            StatusCode::OK,
            JSON,
            state.reloader.shown().as_ref().clone(),
        ),
        "/upstreams" => (
            StatusCode::OK,
            JSON,
            serde_json::to_vec_pretty(&super::upstreams::render(&plan)).unwrap_or_default(),
        ),
        _ => problem(
            StatusCode::NOT_FOUND,
            format!("no admin resource at {path}"),
        ),
    }
}

/// `sluice_upstream_healthy_hosts`: hosts not ejected, per upstream.
fn healthy_hosts(plan: &Plan, out: &mut Exposition) {
    let now = plan.clock();
    let mut family = out.family(
        "sluice_upstream_healthy_hosts",
        MetricKind::Gauge,
        "Hosts not ejected by passive health checks.",
    );
    for upstream in &plan.upstreams {
        family.sample(
            &[("upstream", &upstream.name)],
            upstream.balancer.healthy(now),
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
