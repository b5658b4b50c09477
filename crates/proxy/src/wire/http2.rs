//! Heads in HTTP/2's form (RFC 9113 8.2, 8.3): the upstream request and
//! the client's response, built from the same field rules as HTTP/1.1
//! ([`super::head::upstream_fields`], [`super::head::response_fields`]),
//! minus what HTTP/2 carries elsewhere (`Host` becomes `:authority`) or
//! forbids (connection-specific fields).

use http::{header, HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode, Uri};

use super::{
    edits::HeaderEdits,
    fields::Fields,
    head::{added_fields, Framing, Outgoing, RequestContext, RequestRules, ResponseRules},
};

/// Fields HTTP/2 forbids (RFC 9113 8.2.2), beyond what the rules drop.
fn connection_specific(name: &[u8]) -> bool {
    [
        &b"connection"[..],
        b"upgrade",
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"host",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

/// `value` as one header value, its parts joined.
fn joined(parts: &[&[u8]]) -> Option<HeaderValue> {
    match parts {
        [one] => HeaderValue::from_bytes(one).ok(),
        _ => HeaderValue::from_bytes(&parts.concat()).ok(),
    }
}

/// The names the proxy adds to every request, made once: parsing a custom
/// name allocates it, and these go out on every HTTP/2 request.
const ADDED_NAMES: [HeaderName; 3] = [
    HeaderName::from_static("x-forwarded-for"),
    HeaderName::from_static("x-forwarded-proto"),
    HeaderName::from_static("x-forwarded-host"),
];

fn header_name(name: &[u8]) -> Option<HeaderName> {
    match ADDED_NAMES
        .iter()
        .find(|added| added.as_str().as_bytes() == name)
    {
        Some(added) => Some(added.clone()),
        None => HeaderName::from_bytes(name).ok(),
    }
}

/// `value` as one header value; the scheme names are static, not copied.
fn header_value(parts: &[&[u8]]) -> Option<HeaderValue> {
    match parts {
        [b"http"] => Some(HeaderValue::from_static("http")),
        [b"https"] => Some(HeaderValue::from_static("https")),
        _ => joined(parts),
    }
}

fn append(headers: &mut HeaderMap, name: &[u8], value: &[&[u8]]) {
    if let (Some(name), Some(value)) = (header_name(name), header_value(value)) {
        headers.append(name, value);
    }
}

/// The request for an HTTP/2 upstream: `scheme://authority` with the path
/// and query; `authority` is the Host the rules would send, else
/// `fallback` (the host's name). `te: trailers` tells gRPC servers that
/// trailers will pass. `None` when a part is not valid in a URI.
/// From an HTTP/2 client (`source`: its URI), kept fields and unchanged
/// URI parts are shared with the client's request, not copied.
pub(crate) fn upstream_request(
    request: &Outgoing<'_>,
    context: &RequestContext<'_>,
    scheme: &str,
    fallback: &str,
    source: Option<&Uri>,
) -> Option<Request<()>> {
    let uri = upstream_uri(request, context, scheme, fallback, source)?;
    let mut built = Request::new(());
    *built.method_mut() = request.method.clone();
    *built.uri_mut() = uri;
    let headers = built.headers_mut();
    headers.reserve(request.fields.len() + 6);
    let rules = RequestRules::new(request, context);
    match request.fields {
        Fields::Map(map) => {
            for (name, value) in map {
                if rules.keeps(name.as_str().as_bytes())
                    && !connection_specific(name.as_str().as_bytes())
                {
                    headers.append(name.clone(), value.clone());
                }
            }
        }
        fields => {
            for (name, value) in fields.iter() {
                if rules.keeps(name) && !connection_specific(name) {
                    append(headers, name, &[value]);
                }
            }
        }
    }
    added_fields(request, context, &mut |name, value| {
        if !connection_specific(name) {
            append(headers, name, value);
        }
    });
    // Unless a handler changes the body's length (gRPC-Web's text mode).
    let dropped = context.edits.is_some_and(|e| e.drops(b"content-length"));
    if let (Framing::Length(length), false) = (context.framing, dropped) {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    Some(built)
}

/// The upstream request's URI: the client's own parts where nothing
/// changes them.
fn upstream_uri(
    request: &Outgoing<'_>,
    context: &RequestContext<'_>,
    scheme: &str,
    fallback: &str,
    source: Option<&Uri>,
) -> Option<Uri> {
    let same_target = context.path.is_none()
        && context.host.is_none()
        && context.host_header.is_none()
        && context.edits.is_none_or(|edits| edits.query.is_none());
    if let (true, Some(source)) = (same_target, source) {
        if let (Some(authority), Some(target)) = (source.authority(), source.path_and_query()) {
            let mut parts = http::uri::Parts::default();
            parts.scheme = Some(if scheme == "https" {
                http::uri::Scheme::HTTPS
            } else {
                http::uri::Scheme::HTTP
            });
            parts.authority = Some(authority.clone());
            parts.path_and_query = Some(target.clone());
            return Uri::from_parts(parts).ok();
        }
    }
    let authority = context
        .host(request)
        .unwrap_or(fallback.as_bytes())
        .to_vec();
    let mut target = context.path(request).to_vec();
    if let Some(query) = context.query(request) {
        target.push(b'?');
        target.extend_from_slice(query);
    }
    Uri::builder()
        .scheme(scheme)
        .authority(authority)
        .path_and_query(target)
        .build()
        .ok()
}

/// Whether a field value starts or ends with whitespace: HTTP/2 makes a
/// message carrying one malformed (RFC 9113 8.2.1), since an HTTP/1.1
/// hop would strip or keep it depending on the parser.
pub(crate) fn padded(value: &[u8]) -> bool {
    matches!(value.first(), Some(b' ' | b'\t')) || matches!(value.last(), Some(b' ' | b'\t'))
}

/// The response for an HTTP/2 client: the upstream's fields under the
/// rules, `Content-Length` kept when the body's length is known.
pub(crate) fn client_response(
    status: StatusCode,
    fields: Fields<'_>,
    keep_length: bool,
    edits: Option<&HeaderEdits>,
) -> Response<()> {
    let mut response = Response::new(());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.reserve(fields.len());
    let rules = ResponseRules::new(status, fields, keep_length, edits);
    match fields {
        Fields::Map(map) => {
            for (name, value) in map {
                if rules.keeps(name.as_str().as_bytes())
                    && !connection_specific(name.as_str().as_bytes())
                {
                    headers.append(name.clone(), value.clone());
                }
            }
        }
        fields => {
            for (name, value) in fields.iter() {
                if rules.keeps(name) && !connection_specific(name) {
                    append(headers, name, &[value]);
                }
            }
        }
    }
    for (name, value) in edits.iter().flat_map(|edits| edits.appended()) {
        append(headers, name, &[value]);
    }
    response
}

/// [`client_response`] for an HTTP/2 upstream's own map, taken over as it
/// is when the rules drop nothing from it (the usual case): no copy.
pub(crate) fn client_response_from(
    status: StatusCode,
    map: http::HeaderMap,
    edits: Option<&HeaderEdits>,
) -> Response<()> {
    let untouched = edits.is_none() && {
        let rules = ResponseRules::new(status, Fields::Map(&map), true, None);
        map.keys().all(|name| {
            let name = name.as_str().as_bytes();
            rules.keeps(name) && !connection_specific(name)
        })
    };
    if !untouched {
        return client_response(status, Fields::Map(&map), true, edits);
    }
    let mut response = Response::new(());
    *response.status_mut() = status;
    *response.headers_mut() = map;
    response
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use http::Method;

    use super::*;

    #[test]
    fn values_with_leading_or_trailing_whitespace_are_padded() {
        for value in [&b" a"[..], b"a ", b"\ta", b"a\t", b" ", b"\t"] {
            assert!(padded(value), "{value:?}");
        }
        for value in [&b"a"[..], b"a b", b"a\tb", b""] {
            assert!(!padded(value), "{value:?}");
        }
    }

    #[test]
    fn the_same_rules_in_http2_form() {
        let mut map = HeaderMap::new();
        map.insert("connection", "x-secret".parse().unwrap());
        map.insert("x-secret", "s".parse().unwrap());
        map.insert("accept", "*/*".parse().unwrap());
        map.insert("x-forwarded-for", "1.1.1.1".parse().unwrap());
        let request = Outgoing {
            method: &Method::POST,
            path: b"/a",
            query: Some(b"b=1"),
            host: Some(b"api.example"),
            fields: Fields::Map(&map),
        };
        let context = RequestContext {
            peer: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)),
            secure: true,
            trust_forwarded: true,
            host_header: None,
            fallback_host: None,
            path: Some("/b"),
            host: None,
            upgrade: None,
            strip_overrides: false,
            framing: Framing::Length(5),
            edits: None,
            proxied: None,
        };
        let built = upstream_request(&request, &context, "http", "backend:80", None).unwrap();
        assert_eq!(built.uri(), "http://api.example/b?b=1");
        let headers = built.headers();
        assert!(headers.get("x-secret").is_none() && headers.get("connection").is_none());
        assert_eq!(headers["accept"], "*/*");
        assert_eq!(headers["x-forwarded-for"], "1.1.1.1, 10.0.0.9");
        assert_eq!(headers["x-forwarded-proto"], "https");
        assert_eq!(headers["content-length"], "5");
        assert_eq!(headers["te"], "trailers");
        assert!(headers.get("host").is_none());

        let mut upstream = HeaderMap::new();
        upstream.insert("content-length", "2".parse().unwrap());
        upstream.insert("keep-alive", "5".parse().unwrap());
        upstream.insert("grpc-status", "0".parse().unwrap());
        let response = client_response(StatusCode::OK, Fields::Map(&upstream), false, None);
        assert!(response.headers().get("content-length").is_none());
        assert!(response.headers().get("keep-alive").is_none());
        assert_eq!(response.headers()["grpc-status"], "0");
    }
}
