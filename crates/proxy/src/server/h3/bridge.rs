//! What the in-process HTTP/2 connection needs in its own types: a
//! checked HTTP/3 request head as an `http::Request`, trailers as a
//! `HeaderMap`. The head was checked by the codec (`http3::head`), so
//! every conversion here succeeds for a well-formed request; one that does
//! not (a value the `http` crate refuses, such as a control character) is
//! malformed all the same.

use http::{
    header::{HeaderName, HeaderValue},
    uri, HeaderMap, Method, Request, Uri, Version,
};
use http3::head::{FieldSection, RequestHead};

/// The request, without its body.
pub(super) fn request(head: &RequestHead) -> Option<Request<()>> {
    let method = Method::from_bytes(head.method()).ok()?;
    let mut parts = uri::Parts::default();
    // A URI has a scheme only with an authority: a request that names its
    // host by a `host` field goes on with its path alone (the HTTP/2 side
    // reads the host field, as it does for HTTP/2 clients).
    if let Some(authority) = head.authority() {
        parts.authority = Some(uri::Authority::try_from(authority).ok()?);
        if let Some(scheme) = head.scheme() {
            parts.scheme = Some(uri::Scheme::try_from(scheme).ok()?);
        }
    }
    if let Some(path) = head.path() {
        parts.path_and_query = Some(uri::PathAndQuery::try_from(path).ok()?);
    }
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = Uri::from_parts(parts).ok()?;
    *request.version_mut() = Version::HTTP_3;
    *request.headers_mut() = header_map(head.iter())?;
    Some(request)
}

/// Trailers as a map.
pub(super) fn trailers(section: &FieldSection) -> Option<HeaderMap> {
    header_map(section.iter())
}

fn header_map<'a>(fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Option<HeaderMap> {
    let mut map = HeaderMap::new();
    for (name, value) in fields {
        let name = HeaderName::from_bytes(name).ok()?;
        map.append(name, HeaderValue::from_bytes(value).ok()?);
    }
    Some(map)
}

/// A map's fields as the codec writes them.
pub(super) fn fields(map: &HeaderMap) -> impl Iterator<Item = (&[u8], &[u8])> {
    map.iter()
        .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes()))
}
