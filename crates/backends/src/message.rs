//! A request and a response as the services see them, whatever the
//! protocol: HTTP/1.1 (`h1`) and HTTP/2 (`http2`) both carry them.

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, StatusCode};

/// A request as the services see it, whatever the protocol: borrowed from
/// the connection's read buffer (HTTP/1.1) or the stream's head (HTTP/2),
/// body complete (de-chunked) and within the limit.
#[derive(Debug)]
pub struct Request<'a> {
    pub method: Method,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub content_type: Option<&'a [u8]>,
    pub body: &'a [u8],
}

/// The media type of every JSON answer.
pub const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");

/// A complete response; `Content-Length`, `Date` and (HTTP/1.1 only)
/// `Connection` are added when encoding.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: StatusCode,
    pub content_type: HeaderValue,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
}

impl Response {
    pub fn new(status: StatusCode, content_type: HeaderValue, body: Bytes) -> Self {
        Self {
            status,
            content_type,
            headers: Vec::new(),
            body,
        }
    }

    /// A JSON answer.
    pub fn json(status: StatusCode, body: Bytes) -> Self {
        Self::new(status, APPLICATION_JSON, body)
    }

    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The first extra header of that name.
    pub fn header(&self, name: &HeaderName) -> Option<&HeaderValue> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}
