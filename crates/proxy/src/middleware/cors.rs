//! `cors`: answers preflight requests itself and marks the answers to
//! allowed origins (Fetch standard, CORS protocol). A request from an origin
//! not on the list passes without CORS fields, so the browser keeps the
//! answer from the page; a preflight that asks for more than is allowed
//! gets 403 with the reason, which is easier to debug than silence.

use std::sync::Arc;

use http::{header, HeaderValue, Method, StatusCode};

use super::{
    build::{Build, Builder},
    Answer, Exchange, Flow, Handler, RequestView,
};
use crate::config::CorsSettings;

/// The `Access-Control-Allow-Origin` to answer with (per-request state).
#[derive(Debug, Default)]
struct AllowOrigin(Option<HeaderValue>);

#[derive(Debug)]
pub(crate) struct CorsResponder {
    any_origin: bool,
    origins: Vec<String>,
    methods: Vec<Method>,
    /// Lower-case request header names a page may send.
    headers: Vec<String>,
    allow_methods: HeaderValue,
    allow_headers: Option<HeaderValue>,
    expose_headers: Option<HeaderValue>,
    credentials: bool,
    max_age: HeaderValue,
}

/// `a, b, c` as one field value; `None` for no items.
fn joined<'a>(items: impl Iterator<Item = &'a str>) -> Option<HeaderValue> {
    let text = items.collect::<Vec<_>>().join(", ");
    // Methods and header names are tokens, which are valid values.
    (!text.is_empty()).then(|| HeaderValue::from_str(&text).ok())?
}

impl Build for CorsSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(CorsResponder::new(self)))
    }
}

impl CorsResponder {
    fn new(config: &CorsSettings) -> Self {
        let methods: Vec<Method> = config.methods.iter().map(|m| m.0.clone()).collect();
        let headers: Vec<String> = config.headers.iter().map(|h| h.to_string()).collect();
        Self {
            any_origin: config.origins.iter().any(|o| o == "*"),
            origins: config
                .origins
                .iter()
                .map(|o| o.trim().to_string())
                .collect(),
            allow_methods: joined(methods.iter().map(Method::as_str))
                .unwrap_or(HeaderValue::from_static("")),
            allow_headers: joined(headers.iter().map(String::as_str)),
            expose_headers: joined(config.expose_headers.iter().map(|h| h.as_str())),
            methods,
            headers,
            credentials: config.credentials,
            max_age: HeaderValue::from(config.max_age.as_secs()),
        }
    }

    fn allows_origin(&self, origin: &[u8]) -> bool {
        self.any_origin
            || self
                .origins
                .iter()
                .any(|o| o.as_bytes().eq_ignore_ascii_case(origin))
    }

    /// With credentials the origin itself must be named, never `*`.
    fn allow_origin_value(&self, origin: HeaderValue) -> HeaderValue {
        if self.any_origin && !self.credentials {
            HeaderValue::from_static("*")
        } else {
            origin
        }
    }

    fn preflight(&self, request: &RequestView<'_>, origin: HeaderValue, method: &[u8]) -> Answer {
        let method_allowed = Method::from_bytes(method).is_ok_and(|m| self.methods.contains(&m));
        if !method_allowed {
            return Answer::problem(
                StatusCode::FORBIDDEN,
                format!(
                    "CORS: method `{}` is not allowed",
                    String::from_utf8_lossy(method)
                ),
            );
        }
        let requested = request
            .header("access-control-request-headers")
            .unwrap_or_default();
        for name in requested.split(|&b| b == b',') {
            let name = http1::request::trim(name);
            if !name.is_empty()
                && !self
                    .headers
                    .iter()
                    .any(|h| h.as_bytes().eq_ignore_ascii_case(name))
            {
                return Answer::problem(
                    StatusCode::FORBIDDEN,
                    format!(
                        "CORS: header `{}` is not allowed",
                        String::from_utf8_lossy(name)
                    ),
                );
            }
        }
        let mut answer = Answer {
            status: StatusCode::NO_CONTENT,
            headers: Vec::new(),
            detail: None,
            violations: Vec::new(),
            body: None,
        }
        .with_header(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            self.allow_origin_value(origin),
        )
        .with_header(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            self.allow_methods.clone(),
        )
        .with_header(header::ACCESS_CONTROL_MAX_AGE, self.max_age.clone())
        .with_header(header::VARY, HeaderValue::from_static("origin"));
        if let Some(headers) = &self.allow_headers {
            answer = answer.with_header(header::ACCESS_CONTROL_ALLOW_HEADERS, headers.clone());
        }
        if self.credentials {
            answer = answer.with_header(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        answer
    }
}

impl Handler for CorsResponder {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        let Some(origin) = request.header("origin") else {
            return Flow::Next;
        };
        let Ok(origin_value) = HeaderValue::from_bytes(origin) else {
            return Flow::Next;
        };
        let preflight = (*request.method == Method::OPTIONS)
            .then(|| request.header("access-control-request-method"))
            .flatten();
        if !self.allows_origin(origin) {
            return match preflight {
                Some(_) => Flow::Answer(Answer::problem(
                    StatusCode::FORBIDDEN,
                    "CORS: this origin is not allowed",
                )),
                None => Flow::Next,
            };
        }
        if let Some(method) = preflight {
            return Flow::Answer(self.preflight(request, origin_value, method));
        }
        exchange.state.get_mut::<AllowOrigin>().0 = Some(self.allow_origin_value(origin_value));
        Flow::Next
    }

    fn response(&self, _status: StatusCode, exchange: &mut Exchange) {
        let Some(origin) = exchange.state.get_mut::<AllowOrigin>().0.take() else {
            return;
        };
        let edits = &mut exchange.response_headers;
        edits.set(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        edits
            .add
            .push((header::VARY, HeaderValue::from_static("origin")));
        if self.credentials {
            edits.set(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        if let Some(expose) = &self.expose_headers {
            edits.set(header::ACCESS_CONTROL_EXPOSE_HEADERS, expose.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(origins: &[&str], credentials: bool) -> CorsResponder {
        CorsResponder::new(&CorsSettings {
            origins: origins.iter().map(|o| o.to_string()).collect(),
            credentials,
            ..CorsSettings::default()
        })
    }

    #[test]
    fn origins_match_in_any_case_and_credentials_name_the_origin() {
        let listed = handler(&["https://app.example"], false);
        assert!(listed.allows_origin(b"https://APP.example"));
        assert!(!listed.allows_origin(b"https://app.example.evil"));
        let origin = HeaderValue::from_static("https://a.example");
        let any = handler(&["*"], false);
        assert!(any.allows_origin(b"https://a.example"));
        assert_eq!(any.allow_origin_value(origin.clone()), "*");
        // `*` is not allowed with credentials (Fetch standard): the origin is echoed.
        let with_credentials = handler(&["*"], true);
        assert_eq!(with_credentials.allow_origin_value(origin.clone()), origin);
        assert_eq!(any.allow_methods, "GET, HEAD, POST, PUT, PATCH, DELETE");
        assert!(any.allow_headers.is_none() && any.expose_headers.is_none());
    }
}
