//! The answers a route gives instead of forwarding (a redirect, a direct
//! response, the 500 of a backend that does not resolve), as the last
//! handlers of its chain: so every client protocol answers them as it
//! answers a handler, with the route's other handlers (and its response
//! header changes) around them.

use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderName, HeaderValue, StatusCode};

use super::routes::rewrite::{host_port, new_path, segments};
use crate::{
    config::{PathMatch, PathRewriteSettings, RedirectSettings, RespondSettings, RouteSettings},
    middleware::{Answer, Exchange, Flow, Handler, RequestView},
    wire::{location::Location, normalize},
};

/// A route's `redirect`.
#[derive(Debug)]
pub(crate) struct Redirector {
    scheme: Option<String>,
    hostname: Option<String>,
    port: Option<u16>,
    path: Option<PathRewriteSettings>,
    /// Segments of the route's prefix (for a prefix replacement).
    prefix_segments: usize,
    status: StatusCode,
}

impl Redirector {
    pub(crate) fn new(route: &RouteSettings, redirect: &RedirectSettings) -> Self {
        Self {
            scheme: redirect.scheme.clone(),
            hostname: redirect.hostname.clone(),
            port: redirect.port,
            path: redirect.path.clone(),
            prefix_segments: match route.match_kind {
                PathMatch::Prefix => segments(&route.path.value),
                _ => 0,
            },
            status: StatusCode::from_u16(redirect.status).unwrap_or(StatusCode::FOUND),
        }
    }

    /// The `Location` for `request`, or `None` when its Host or query
    /// cannot be written in one (it is then refused, 400).
    pub(crate) fn location(&self, request: &RequestView<'_>) -> Option<String> {
        let default_port = if request.secure { 443 } else { 80 };
        let sent = match request.host {
            Some(host) => normalize::host::normalize(host, default_port).ok()?,
            None => None,
        };
        let scheme =
            self.scheme
                .as_deref()
                .unwrap_or(if request.secure { "https" } else { "http" });
        let host = match (&self.hostname, &sent) {
            (Some(name), _) => name.as_str(),
            (None, Some(sent)) => &sent.name,
            (None, None) => return None,
        };
        // With a scheme, its own port; without one, the port the request named.
        let port = self.port.or_else(|| match self.scheme {
            Some(_) => None,
            None => sent.as_ref().and_then(|s| host_port(&s.authority)),
        });
        let path = match &self.path {
            Some(rule) => new_path(request.path, rule, self.prefix_segments),
            None => request.path.to_string(),
        };
        Location {
            scheme,
            host,
            port,
            path: &path,
            query: request.query.map(str::as_bytes),
        }
        .value()
    }
}

impl Handler for Redirector {
    fn request(&self, request: &RequestView<'_>, _exchange: &mut Exchange) -> Flow {
        let location = self
            .location(request)
            .and_then(|l| HeaderValue::try_from(l).ok());
        Flow::Answer(match location {
            Some(location) => Answer::redirect(self.status, location),
            None => Answer::problem(
                StatusCode::BAD_REQUEST,
                "the request's host or query cannot be written in a redirect",
            ),
        })
    }
}

/// A route's `respond`, or a backend's fixed status.
#[derive(Debug)]
pub(crate) struct Responder {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// `None`: a problem body saying `detail`.
    body: Option<Bytes>,
    detail: &'static str,
}

impl Responder {
    pub(crate) fn new(respond: &RespondSettings) -> Self {
        let mut headers = respond.headers.0.clone();
        let typed = headers.iter().any(|(n, _)| n == header::CONTENT_TYPE);
        if !typed && !respond.body.is_empty() {
            let plain = HeaderValue::from_static("text/plain; charset=utf-8");
            headers.push((header::CONTENT_TYPE, plain));
        }
        Self {
            status: StatusCode::from_u16(respond.status).unwrap_or(StatusCode::OK),
            headers,
            body: Some(Bytes::from(respond.body.clone())),
            detail: "",
        }
    }

    /// A problem answer with `status` (a backend that does not resolve).
    pub(crate) fn status(status: u16) -> Self {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self {
            status,
            headers: Vec::new(),
            body: None,
            detail: match status {
                StatusCode::SERVICE_UNAVAILABLE => "the route's backend has no endpoints",
                _ => "the route has no backend to send the request to",
            },
        }
    }
}

impl Handler for Responder {
    fn request(&self, _request: &RequestView<'_>, _exchange: &mut Exchange) -> Flow {
        let mut answer = Answer::problem(self.status, self.detail);
        if let Some(body) = &self.body {
            answer.detail = None;
            answer.body = Some(body.clone());
        }
        answer.headers.clone_from(&self.headers);
        Flow::Answer(answer)
    }
}

/// The handlers named as they appear in traces (`answered_by`).
pub(crate) fn named(name: &str, handler: impl Handler + 'static) -> (Arc<str>, Arc<dyn Handler>) {
    (Arc::from(name), Arc::new(handler))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::fields::Fields;

    fn redirect(yaml: &str, path: &str) -> Redirector {
        let route: RouteSettings =
            serde_saphyr::from_str(&format!("{{ path: {path}, redirect: {yaml} }}")).unwrap();
        Redirector::new(&route, &route.redirect.as_ref().unwrap().value)
    }

    fn location(
        r: &Redirector,
        host: Option<&str>,
        secure: bool,
        path: &str,
        query: Option<&str>,
    ) -> Option<String> {
        let headers = http::HeaderMap::new();
        let view = RequestView {
            method: &http::Method::GET,
            path,
            query,
            client_ip: std::net::Ipv4Addr::LOCALHOST.into(),
            body_len: None,
            body: None,
            fields: Fields::Map(&headers),
            host,
            secure,
            proxied: None,
        };
        r.location(&view)
    }

    #[test]
    fn a_redirect_keeps_what_it_does_not_change() {
        let host_only = redirect("{ hostname: example.org }", "/");
        assert_eq!(
            location(&host_only, Some("gw.local:8080"), false, "/a", Some("q=1")).unwrap(),
            "http://example.org:8080/a?q=1",
            "no scheme: the request's port"
        );
        let https = redirect("{ scheme: https }", "/");
        assert_eq!(
            location(&https, Some("Gw.Local:8080"), false, "/a", None).unwrap(),
            "https://gw.local/a",
            "a scheme: its well-known port"
        );
        let port = redirect("{ port: 8083 }", "/");
        assert_eq!(
            location(&port, Some("gw.local"), true, "/", None).unwrap(),
            "https://gw.local:8083/"
        );
        let prefix = redirect("{ path: { prefix: /new }, status: 301 }", "/old");
        assert_eq!(
            location(&prefix, Some("h"), false, "/old/lemon", None).unwrap(),
            "http://h/new/lemon"
        );
        assert_eq!(prefix.status, StatusCode::MOVED_PERMANENTLY);
        assert_eq!(
            location(&host_only, None, false, "/", None).unwrap(),
            "http://example.org/"
        );
        assert_eq!(
            location(&https, None, false, "/", None),
            None,
            "no host to redirect to"
        );
        assert_eq!(location(&https, Some("bad host"), false, "/", None), None);
        let v6 = location(&port, Some("[::1]:9"), false, "/", None).unwrap();
        assert_eq!(v6, "http://[::1]:8083/");
    }

    #[test]
    fn a_redirect_never_carries_a_line_break() {
        let r = redirect("{ hostname: example.org }", "/");
        // An HTTP/2 client's :path may carry bytes an HTTP/1.1 target cannot.
        for query in ["a=\r\nset-cookie: x", "a=\u{7f}", "a= b"] {
            assert_eq!(
                location(&r, Some("h"), false, "/", Some(query)),
                None,
                "{query:?}"
            );
            let headers = http::HeaderMap::new();
            let view = RequestView {
                method: &http::Method::GET,
                path: "/",
                query: Some(query),
                client_ip: std::net::Ipv4Addr::LOCALHOST.into(),
                body_len: None,
                body: None,
                fields: Fields::Map(&headers),
                host: Some("h"),
                secure: false,
                proxied: None,
            };
            let Flow::Answer(answer) = r.request(&view, &mut Exchange::default()) else {
                panic!("a redirect answers");
            };
            assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        }
    }
}
