//! The IO-heavy service of seeds/003: `POST /passthrough/message` forwards
//! the message to a downstream over a pooled, non-blocking client.

use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::{TokioExecutor, TokioTimer},
};
use serde::de::IgnoredAny;

use crate::{
    message::{Request, Response, APPLICATION_JSON},
    problem::{method_not_allowed, not_found, problem},
    request::json_body,
};

/// Largest downstream answer relayed; a larger one is a 502.
const MAX_ANSWER: usize = 8 * 1024 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// One worker's client to the downstream.
#[derive(Debug, Clone)]
pub(crate) struct Passthrough {
    client: Client<HttpConnector, Full<Bytes>>,
    target: Uri,
    timeout: Duration,
}

impl Passthrough {
    /// `downstream` is a base URL; messages go to its `/messages`.
    pub(crate) fn new(downstream: &Uri, timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(connector);
        Self {
            client,
            target: messages_uri(downstream),
            timeout,
        }
    }

    pub(crate) async fn handle(&self, req: &Request<'_>) -> Response {
        if req.path != "/passthrough/message" {
            return not_found(req.path);
        }
        if req.method != Method::POST {
            return method_not_allowed(&req.method, "POST");
        }
        let body = match json_body(req) {
            Ok(body) => body,
            Err(response) => return response,
        };
        // Only well-formed JSON is worth a trip downstream.
        if let Err(err) = serde_json::from_slice::<IgnoredAny>(body) {
            return problem(
                StatusCode::BAD_REQUEST,
                format!("malformed JSON body: {err}"),
            );
        }
        let body = Bytes::copy_from_slice(body);
        match tokio::time::timeout(self.timeout, self.forward(body)).await {
            Ok(response) => response,
            Err(_) => problem(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "downstream {} did not answer within {:?}",
                    self.target, self.timeout
                ),
            ),
        }
    }

    async fn forward(&self, body: Bytes) -> Response {
        let mut request = http::Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.target.clone();
        request
            .headers_mut()
            .insert(header::CONTENT_TYPE, APPLICATION_JSON);
        let answer = match self.client.request(request).await {
            Ok(answer) => answer,
            Err(err) => return self.bad_gateway(format!("request failed: {err}")),
        };
        let (parts, body) = answer.into_parts();
        if parts.status.is_server_error() {
            return self.bad_gateway(format!("answered {}", parts.status));
        }
        let body = match Limited::new(body, MAX_ANSWER).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) => return self.bad_gateway(format!("answer could not be read: {err}")),
        };
        let content_type = parts
            .headers
            .get(header::CONTENT_TYPE)
            .cloned()
            .unwrap_or(APPLICATION_JSON);
        Response::new(parts.status, content_type, body)
    }

    fn bad_gateway(&self, detail: String) -> Response {
        tracing::warn!(target = %self.target, %detail, "downstream failed");
        problem(
            StatusCode::BAD_GATEWAY,
            format!("downstream {} {detail}", self.target),
        )
    }
}

fn messages_uri(downstream: &Uri) -> Uri {
    let base = downstream.path().trim_end_matches('/');
    let mut parts = downstream.clone().into_parts();
    parts.path_and_query = format!("{base}/messages").parse().ok();
    Uri::from_parts(parts).unwrap_or_else(|_| downstream.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_path_is_appended() {
        let uri = |s: &'static str| messages_uri(&Uri::from_static(s)).to_string();
        assert_eq!(
            uri("http://127.0.0.1:8081"),
            "http://127.0.0.1:8081/messages"
        );
        assert_eq!(uri("http://h:1/base/"), "http://h:1/base/messages");
    }
}
