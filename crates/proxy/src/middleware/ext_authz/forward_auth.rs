//! `ext_authz` over HTTP: forward auth as Traefik's `forwardAuth` and
//! Caddy's `forward_auth` do it, so that services written for them
//! (Authelia, Authentik, oauth2-proxy) work unchanged. A GET to the
//! service's URL with the client's chosen headers and `X-Forwarded-Method`,
//! `-Proto`, `-Host`, `-Uri` and `-For` (the client's own are replaced);
//! the body, when `body` is set and the request's fits.

use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::client::legacy::{connect::HttpConnector, Client};

use super::{passable, Asked, Decision, Failed};

/// A denial's body is passed to the client up to this size.
const MAX_BODY: usize = 64 * 1024;

pub(super) async fn check(
    client: &Client<HttpConnector, Full<Bytes>>,
    url: &http::Uri,
    asked: &Asked,
) -> Result<Decision, Failed> {
    let mut request = http::Request::get(url.clone());
    for (name, value) in &asked.headers {
        if asked.traceparent.is_some() && name == "traceparent" {
            continue;
        }
        if let Ok(value) = HeaderValue::from_str(value) {
            request = request.header(name, value);
        }
    }
    let forwarded = [
        ("x-forwarded-method", asked.method.as_str()),
        ("x-forwarded-proto", asked.scheme),
        ("x-forwarded-host", asked.host.as_str()),
        ("x-forwarded-uri", asked.uri.as_str()),
    ];
    for (name, value) in forwarded {
        if let Ok(value) = HeaderValue::from_str(value) {
            request = request.header(name, value);
        }
    }
    request = request.header("x-forwarded-for", asked.client_ip.to_string());
    if let Some(traceparent) = &asked.traceparent {
        request = request.header("traceparent", &traceparent[..]);
    }
    let body = asked.body.clone().unwrap_or_default();
    let request = request
        .body(Full::new(body))
        .map_err(|_| Failed::Broken("the request could not be made"))?;
    let response = client
        .request(request)
        .await
        .map_err(|_| Failed::Unreachable)?;
    let (parts, body) = response.into_parts();
    let headers: Vec<(HeaderName, HeaderValue)> = parts
        .headers
        .iter()
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    if parts.status.is_success() {
        // Read to its end, so that the connection goes back to the pool.
        Limited::new(body, MAX_BODY)
            .collect()
            .await
            .map_err(|_| Failed::Broken("the allow answer's body is too large or broke off"))?;
        return Ok(Decision::Allow {
            upstream: headers,
            remove: Vec::new(),
            client: Vec::new(),
        });
    }
    let body = Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map_err(|_| Failed::Broken("the denial's body is too large or broke off"))?
        .to_bytes();
    let status = if parts.status.is_informational() {
        StatusCode::FORBIDDEN
    } else {
        parts.status
    };
    Ok(Decision::Deny {
        status,
        headers: headers.into_iter().filter(|(n, _)| passable(n)).collect(),
        body,
    })
}
