//! `redirect_https`: a request that came over plain HTTP is answered with
//! a redirect to the same host, path and query over https (308 by
//! default: the client resends it as it was, body and method included);
//! one that came over TLS or QUIC goes on. A listener behind a balancer
//! that ends TLS and says so in its PROXY protocol header (the SSL TLV's
//! `PP2_CLIENT_SSL`) counts as TLS: its clients are not sent round again.
//!
//! The host is the request's, normalised (the rules routes match by: a
//! Host with a path, user information or a bad character is refused with
//! 400, never written into `Location`); its port is replaced by `port`.
//! The path is the normalised one the route matched.

use std::{num::NonZeroU16, sync::Arc};

use http::{HeaderValue, StatusCode};

use super::{
    build::{Build, Builder},
    Answer, Exchange, Flow, Handler, RequestView,
};
use crate::{
    config::RedirectHttpsSettings,
    wire::{location::Location, normalize},
};

#[derive(Debug)]
pub(crate) struct HttpsRedirector {
    port: NonZeroU16,
    status: StatusCode,
}

impl Build for RedirectHttpsSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(HttpsRedirector {
            port: self.port,
            status: self.status,
        }))
    }
}

impl HttpsRedirector {
    /// The https `Location` for `request`; `None` when it names no host a
    /// URL can hold, or its query cannot be written in a field.
    fn location(&self, request: &RequestView<'_>) -> Option<HeaderValue> {
        let host = normalize::host::normalize(request.host?, 80).ok()??;
        let location = Location {
            scheme: "https",
            host: &host.name,
            port: Some(self.port.get()),
            path: request.path,
            query: request.query.map(str::as_bytes),
        };
        HeaderValue::try_from(location.value()?).ok()
    }
}

/// The client reached a TLS endpoint: this proxy's, or a balancer's
/// that said so in its PROXY protocol header.
fn came_over_tls(request: &RequestView<'_>) -> bool {
    request.secure
        || request
            .proxied
            .and_then(|proxied| proxied.tlvs.ssl.as_ref())
            .is_some_and(|ssl| ssl.client_ssl)
}

impl Handler for HttpsRedirector {
    fn request(&self, request: &RequestView<'_>, _exchange: &mut Exchange) -> Flow {
        if came_over_tls(request) {
            return Flow::Next;
        }
        Flow::Answer(match self.location(request) {
            Some(location) => Answer::redirect(self.status, location),
            None => Answer::problem(
                StatusCode::BAD_REQUEST,
                "the request names no host that an https redirect can be written for",
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use http::header;

    use super::*;

    fn redirector(port: u16, status: u16) -> HttpsRedirector {
        HttpsRedirector {
            port: NonZeroU16::new(port).unwrap(),
            status: StatusCode::from_u16(status).unwrap(),
        }
    }

    /// The status and `Location` `redirector` answers a request with
    /// `host`, path `/a/b` and `query` with; `None` when it lets it pass.
    fn answer(
        redirector: &HttpsRedirector,
        host: Option<&str>,
        query: Option<&str>,
        secure: bool,
    ) -> Option<(u16, Option<String>)> {
        let headers = http::HeaderMap::new();
        let request = RequestView {
            path: "/a/b",
            query,
            host,
            secure,
            ..RequestView::get(&headers)
        };
        match redirector.request(&request, &mut Exchange::default()) {
            Flow::Next => None,
            Flow::Answer(answer) => {
                let location = answer
                    .headers
                    .iter()
                    .find(|(name, _)| name == header::LOCATION)
                    .map(|(_, value)| value.to_str().unwrap().to_string());
                Some((answer.status.as_u16(), location))
            }
            other => panic!("neither passed nor answered: {other:?}"),
        }
    }

    #[test]
    fn plain_http_is_sent_to_https_with_its_host_path_and_query() {
        let default = redirector(443, 308);
        assert_eq!(
            answer(&default, Some("Example.ORG:8080"), Some("q=1&r"), false),
            Some((308, Some("https://example.org/a/b?q=1&r".into())))
        );
        let other_port = redirector(8443, 301);
        assert_eq!(
            answer(&other_port, Some("example.org"), None, false),
            Some((301, Some("https://example.org:8443/a/b".into())))
        );
        assert_eq!(
            answer(&other_port, Some("[::1]:8080"), None, false),
            Some((301, Some("https://[::1]:8443/a/b".into())))
        );
    }

    #[test]
    fn tls_requests_pass() {
        assert_eq!(
            answer(&redirector(443, 308), Some("example.org"), None, true),
            None
        );
    }

    /// A Host that is no host, or a query a field cannot hold, is 400:
    /// nothing of it reaches `Location`.
    #[test]
    fn a_hostile_host_or_query_is_refused_not_written() {
        let redirector = redirector(443, 308);
        for host in [
            None,
            Some(""),
            Some("evil.test/path"),
            Some("user@evil.test"),
            Some("a b"),
            Some("evil.test\r\nx-injected: 1"),
        ] {
            assert_eq!(
                answer(&redirector, host, None, false),
                Some((400, None)),
                "{host:?}"
            );
        }
        assert_eq!(
            answer(&redirector, Some("example.org"), Some("a=\r\nx: y"), false),
            Some((400, None))
        );
    }

    #[test]
    fn a_balancer_that_ended_tls_is_believed() {
        use crate::wire::proxy_protocol::{Proxied, Ssl, Tlvs};
        let proxied = |client_ssl| Proxied {
            client: "192.0.2.1:5000".parse().unwrap(),
            local: None,
            via: Some("10.0.0.5:41234".parse().unwrap()),
            version: 2,
            tlvs: Tlvs {
                ssl: Some(Ssl {
                    client_ssl,
                    ..Ssl::default()
                }),
                ..Tlvs::default()
            },
            headers: Default::default(),
        };
        let headers = http::HeaderMap::new();
        let redirector = redirector(443, 308);
        for (client_ssl, redirected) in [(true, false), (false, true)] {
            let proxied = proxied(client_ssl);
            let request = RequestView {
                host: Some("example.org"),
                proxied: Some(&proxied),
                ..RequestView::get(&headers)
            };
            let flow = redirector.request(&request, &mut Exchange::default());
            assert_eq!(matches!(flow, Flow::Answer(_)), redirected, "{client_ssl}");
        }
    }
}
