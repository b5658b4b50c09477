//! Entry points for the fuzz targets (fuzz/, issue 34): this layer's head
//! conversions, trailer rules and `traceparent` writers called with plain
//! inputs, since their own types (`Fields`, `Outgoing`, `HeaderEdits`)
//! stay inside the crate. Not an API: nothing in the proxy calls these.

use std::{net::IpAddr, ops::Range};

use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};

use super::{
    edits::HeaderEdits,
    fields::Fields,
    head::{self, Framing, Outgoing, RequestContext},
    http2, traceparent, trailers,
};

/// A head's fields in either form the proxy reads them.
#[derive(Debug, Clone, Copy)]
pub enum Head<'a> {
    /// HTTP/1.1: `(name, value)` ranges into the bytes read, as
    /// `http1::parse_head_into` gives them.
    H1(&'a [u8], &'a [(Range<usize>, Range<usize>)]),
    /// HTTP/2: the map the codec decoded.
    H2(&'a HeaderMap),
}

impl<'a> Head<'a> {
    pub(crate) fn fields(self) -> Fields<'a> {
        match self {
            Head::H1(buf, fields) => Fields::H1 { buf, fields },
            Head::H2(map) => Fields::Map(map),
        }
    }
}

/// The client's request and what the route changes in it.
#[derive(Debug, Clone, Copy)]
pub struct Client<'a> {
    pub method: &'a Method,
    pub path: &'a [u8],
    pub query: Option<&'a [u8]>,
    pub host: Option<&'a [u8]>,
    pub fields: Head<'a>,
    pub peer: IpAddr,
    pub secure: bool,
    pub trust_forwarded: bool,
    /// The normalised path and Host, where they differ from the client's.
    pub normal_path: Option<&'a str>,
    pub normal_host: Option<&'a str>,
    /// The body's length, when it has one.
    pub length: Option<u64>,
}

/// The middleware's header changes.
#[derive(Debug, Default)]
pub struct Edits {
    pub remove: Vec<HeaderName>,
    pub set: Vec<(HeaderName, HeaderValue)>,
    pub add: Vec<(HeaderName, HeaderValue)>,
}

impl Edits {
    fn to_edits(&self) -> HeaderEdits {
        HeaderEdits {
            remove: self.remove.clone(),
            set: self.set.clone(),
            add: self.add.clone(),
            query: None,
        }
    }
}

fn with_request<T>(
    client: &Client<'_>,
    run: impl FnOnce(&Outgoing<'_>, &RequestContext<'_>) -> T,
) -> T {
    let request = Outgoing {
        method: client.method,
        path: client.path,
        query: client.query,
        host: client.host,
        fields: client.fields.fields(),
    };
    let context = RequestContext {
        peer: client.peer,
        secure: client.secure,
        trust_forwarded: client.trust_forwarded,
        host_header: None,
        fallback_host: None,
        path: client.normal_path,
        host: client.normal_host,
        upgrade: None,
        strip_overrides: false,
        framing: client.length.map_or(Framing::None, Framing::Length),
        edits: None,
        proxied: None,
    };
    run(&request, &context)
}

/// The HTTP/1.1 request head for an HTTP/1.1 upstream.
pub fn upstream_h1(client: &Client<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    with_request(client, |request, context| {
        head::request_head(&mut out, request, context);
    });
    out
}

/// The request for an HTTP/2 upstream; `None` when a part is not valid
/// in a URI.
pub fn upstream_h2(client: &Client<'_>, scheme: &str, fallback: &str) -> Option<Request<()>> {
    let source = match client.fields {
        // An HTTP/2 client's own URI, as the session passes it.
        Head::H2(_) => client.host.and_then(|host| {
            let mut target = client.path.to_vec();
            if let Some(query) = client.query {
                target.push(b'?');
                target.extend_from_slice(query);
            }
            http::Uri::builder()
                .scheme(scheme)
                .authority(host)
                .path_and_query(target)
                .build()
                .ok()
        }),
        Head::H1(..) => None,
    };
    with_request(client, |request, context| {
        http2::upstream_request(request, context, scheme, fallback, source.as_ref())
    })
}

/// The HTTP/1.1 response head for the client: `length` framed, else
/// the upstream's framing fields passed on; kept alive.
pub fn client_h1(
    status: StatusCode,
    fields: Head<'_>,
    length: Option<u64>,
    edits: Option<&Edits>,
) -> Vec<u8> {
    let mut out = Vec::new();
    let edits = edits.map(Edits::to_edits);
    let framing = length.map_or(Framing::None, Framing::Length);
    head::response_head(
        &mut out,
        status,
        fields.fields(),
        framing,
        http1::Persistence::KeepAlive,
        edits.as_ref(),
    );
    out
}

/// The response for an HTTP/2 client.
pub fn client_h2(
    status: StatusCode,
    fields: Head<'_>,
    keep_length: bool,
    edits: Option<&Edits>,
) -> Response<()> {
    let edits = edits.map(Edits::to_edits);
    http2::client_response(status, fields.fields(), keep_length, edits.as_ref())
}

/// The same from an HTTP/2 upstream's own map, taken over when nothing
/// in it is dropped.
pub fn client_h2_from(status: StatusCode, map: HeaderMap) -> Response<()> {
    http2::client_response_from(status, map, None)
}

/// Whether HTTP/2 makes a field value malformed (padded with whitespace).
pub fn padded(value: &[u8]) -> bool {
    http2::padded(value)
}

/// Whether a trailer field called `name` is one the proxy controls.
pub fn controlled_trailer(name: &[u8]) -> bool {
    trailers::controlled(name)
}

/// Removes what may not pass from `trailers`; how many fields went.
pub fn remove_controlled_trailers(trailers: &mut HeaderMap, edits: Option<&Edits>) -> usize {
    let edits = edits.map(Edits::to_edits);
    trailers::remove_controlled(trailers, edits.as_ref())
}

/// Sets `traceparent` in the HTTP/1.1 head at the start of `buf`.
pub fn set_traceparent_h1(buf: &mut Vec<u8>, value: &[u8; 55]) {
    traceparent::set_in_h1(buf, value);
}

/// Sets `traceparent` in an HTTP/2 head.
pub fn set_traceparent_map(headers: &mut HeaderMap, value: &[u8; 55]) {
    traceparent::set_in_map(headers, value);
}
