//! The request head parser: a pure function over a byte slice, so that it
//! can be fuzzed and unit-tested without sockets. Parsing is strict: a
//! request whose framing is ambiguous (both Content-Length and
//! Transfer-Encoding, several Content-Length, a transfer coding other than
//! a single final `chunked`) is rejected, never guessed at: a proxy that
//! guesses differently from its backend is open to request smuggling.
//!
//! The head's syntax (request line, target form, limits) is parsed here; the
//! header fields that decide framing, persistence and upgrade are read in
//! `fields`.

mod fields;

use std::{mem::MaybeUninit, ops::Range};

use http::{Method, StatusCode};

use fields::read_fields;
pub use fields::{content_length, trim};

/// Bounds on what a client may send.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Request line plus headers, in bytes; past it: 431.
    pub max_head: usize,
    /// Body, in bytes (after chunked decoding); past it: 413.
    pub max_body: usize,
}

/// Most header fields in one request; past it: 431.
pub const MAX_HEADERS: usize = 100;

/// One header field: ranges of its name and value in the parsed buffer.
pub type Field = (Range<usize>, Range<usize>);

/// Receives every header field of a parsed head, in order. The backends
/// need none (`()`); the proxy keeps them (`Vec<Field>`) to forward them.
pub trait FieldSink {
    fn field(&mut self, name: Range<usize>, value: Range<usize>);
}

impl FieldSink for () {
    fn field(&mut self, _: Range<usize>, _: Range<usize>) {}
}

impl FieldSink for Vec<Field> {
    fn field(&mut self, name: Range<usize>, value: Range<usize>) {
        self.push((name, value));
    }
}

/// How the request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Empty,
    Length(usize),
    Chunked,
}

/// A parsed request head. Ranges index the buffer that was parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub method: Method,
    /// The request-target as sent: origin-form (`/p?q`), absolute-form
    /// (`http://host/p?q`) or asterisk-form (`*`).
    pub target: Range<usize>,
    /// Without the query; for an absolute-form target, the part after the
    /// authority (empty when there is none); for `*`, the `*`.
    pub path: Range<usize>,
    pub query: Option<Range<usize>>,
    pub content_type: Option<Range<usize>>,
    pub host: Option<Range<usize>>,
    pub framing: Framing,
    /// The client keeps the connection open after this exchange.
    pub keep_alive: bool,
    /// HTTP/1.0: keep-alive must be confirmed in the response.
    pub http10: bool,
    pub expect_continue: bool,
    /// `Connection: upgrade` with an `Upgrade` field (WebSocket and the like).
    pub upgrade: bool,
    /// Bytes of the head, including the blank line.
    pub len: usize,
}

/// Why a request cannot be served; answered with `status` and the connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub status: StatusCode,
    pub detail: String,
    /// The request-target is not origin-, absolute- or asterisk-form
    /// (authority-form, as CONNECT sends, or no form at all).
    pub target_form: bool,
}

impl Rejection {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
            target_form: false,
        }
    }

    pub(crate) fn bad(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }
}

/// Parses one request head from the start of `buf`: `Ok(None)` when more
/// bytes are needed.
pub fn parse_head(buf: &[u8], limits: &Limits) -> Result<Option<Head>, Rejection> {
    parse_head_into(buf, limits, &mut ())
}

/// Whether `buf` holds a whole head, or the start of one the parser
/// rejects: what a server waits for before it gives a request any state.
/// Usually a search for the blank line; a partial head is parsed to tell
/// one still arriving from one already wrong.
pub fn head_arrived(buf: &[u8], limits: &Limits) -> bool {
    if buf.is_empty() {
        return false;
    }
    if buf.ends_with(b"\r\n\r\n") || memchr::memmem::find(buf, b"\r\n\r\n").is_some() {
        return true;
    }
    !matches!(parse_head(buf, limits), Ok(None))
}

/// [`parse_head`], handing every header field to `fields` as well (only
/// for a head that parses; the sink may hold fields of a rejected one).
pub fn parse_head_into(
    buf: &[u8],
    limits: &Limits,
    fields: &mut impl FieldSink,
) -> Result<Option<Head>, Rejection> {
    let mut headers = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    let len = match request.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Complete(len)) if len <= limits.max_head => len,
        Ok(httparse::Status::Complete(_)) => return Err(head_too_large(limits)),
        Ok(httparse::Status::Partial) if buf.len() > limits.max_head => {
            return Err(head_too_large(limits))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Rejection::new(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                format!("more than {MAX_HEADERS} header fields"),
            ))
        }
        Err(err) => return Err(Rejection::bad(format!("malformed request: {err}"))),
    };
    if has_bare_lf(&buf[..len]) {
        return Err(Rejection::bad("bare LF in the request head"));
    }
    let http10 = match request.version {
        Some(1) => false,
        Some(0) => true,
        _ => return Err(Rejection::bad("unsupported HTTP version")),
    };
    let method = request
        .method
        .and_then(|m| Method::from_bytes(m.as_bytes()).ok())
        .ok_or_else(|| Rejection::bad("invalid method"))?;
    let target = request.path.unwrap_or_default();
    let (path, query) = split_target(buf, target)?;

    let mut head = Head {
        method,
        target: range(buf, target.as_bytes()),
        path,
        query,
        content_type: None,
        host: None,
        framing: Framing::Empty,
        keep_alive: !http10,
        http10,
        expect_continue: false,
        upgrade: false,
        len,
    };
    read_fields(buf, request.headers, &mut head, fields)?;
    Ok(Some(head))
}

/// httparse accepts a lone LF as a line end; an intermediary that reads
/// lines differently from its peer can be made to see two requests in one
/// (or, in an upstream's answer, two responses).
pub(crate) fn has_bare_lf(head: &[u8]) -> bool {
    head.iter()
        .enumerate()
        .any(|(i, &b)| b == b'\n' && (i == 0 || head[i - 1] != b'\r'))
}

fn head_too_large(limits: &Limits) -> Rejection {
    Rejection::new(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        format!("request head exceeds {} bytes", limits.max_head),
    )
}

/// Origin-form (`/path?query`), absolute-form (`http://host/path?query`)
/// or asterisk-form (`*`, which only OPTIONS may use: left to the caller).
fn split_target(
    buf: &[u8],
    target: &str,
) -> Result<(Range<usize>, Option<Range<usize>>), Rejection> {
    let origin = if target.starts_with('/') || target == "*" {
        target
    } else if let Some(rest) = target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("https://"))
    {
        // The authority ends at the path or the query; with neither, the
        // path is empty (served as `/`) and still a slice of `buf`.
        &rest[rest.find(['/', '?']).unwrap_or(rest.len())..]
    } else {
        return Err(Rejection {
            target_form: true,
            ..Rejection::bad(format!("invalid request target `{target}`"))
        });
    };
    let start = offset(buf, origin.as_bytes());
    Ok(match origin.find('?') {
        Some(q) => (start..start + q, Some(start + q + 1..start + origin.len())),
        None => (start..start + origin.len(), None),
    })
}

fn offset(buf: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - buf.as_ptr() as usize
}

fn range(buf: &[u8], part: &[u8]) -> Range<usize> {
    let start = offset(buf, part);
    start..start + part.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const LIMITS: Limits = Limits {
        max_head: 1024,
        max_body: 64,
    };

    pub(super) fn parse(raw: &str) -> Result<Option<Head>, Rejection> {
        parse_head(raw.as_bytes(), &LIMITS)
    }

    pub(super) fn status(raw: &str) -> u16 {
        parse(raw).unwrap_err().status.as_u16()
    }

    #[test]
    fn parses_a_simple_get() {
        let raw = "GET /v1/pets?limit=1 HTTP/1.1\r\nHost: x\r\n\r\nNEXT";
        let head = parse(raw).unwrap().unwrap();
        assert_eq!(head.method, Method::GET);
        assert_eq!(&raw[head.path.clone()], "/v1/pets");
        assert_eq!(&raw[head.query.clone().unwrap()], "limit=1");
        assert_eq!(head.framing, Framing::Empty);
        assert!(head.keep_alive);
        assert_eq!(&raw[head.len..], "NEXT");
    }

    #[test]
    fn partial_heads_wait_for_more() {
        assert_eq!(parse("GET / HTTP/1.1\r\nHost: x\r\n"), Ok(None));
        assert_eq!(parse(""), Ok(None));
    }

    #[test]
    fn absolute_form_and_content_type() {
        let raw = "POST http://h:1/p?q HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        let head = parse(raw).unwrap().unwrap();
        assert_eq!(&raw[head.path.clone()], "/p");
        for (target, path, query) in [("http://h", "", None), ("https://h?a=/b", "", Some("a=/b"))]
        {
            let raw = format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n");
            let head = parse(&raw).unwrap().unwrap();
            assert_eq!(&raw[head.path.clone()], path);
            assert_eq!(head.query.map(|q| &raw[q]), query);
        }
        assert_eq!(&raw[head.content_type.clone().unwrap()], "application/json");
        assert_eq!(head.framing, Framing::Length(2));
        assert_eq!(&raw[head.target.clone()], "http://h:1/p?q");
    }

    #[test]
    fn asterisk_form_is_a_target_of_its_own() {
        let raw = "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n";
        let head = parse(raw).unwrap().unwrap();
        assert_eq!(&raw[head.target.clone()], "*");
        assert_eq!(&raw[head.path.clone()], "*");
        assert_eq!(head.query, None);
        assert_eq!(status("GET *x HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    }

    #[test]
    fn malformed_and_oversize_heads() {
        assert_eq!(status("GET / HTTP/1.1\r\n\r\n"), 400); // no Host
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
        assert_eq!(status("GET nowhere HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
        let target_form = |raw: &str| parse(raw).unwrap_err().target_form;
        assert!(target_form("CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n"));
        assert!(target_form("GET nowhere HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(!target_form("GET / HTTP/1.1\r\n\r\n"));
        assert_eq!(
            status("GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"),
            400
        );
        assert_eq!(
            status("GET / HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n\r\n"),
            417
        );
        let long = format!(
            "GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n",
            "a".repeat(2000)
        );
        assert_eq!(status(&long), 431);
        // A request line that never ends is too large before it is malformed.
        assert_eq!(status(&"a".repeat(2000)), 431);
        assert_eq!(status("NOT A REQUEST\r\n\r\n"), 400);
        let incomplete_long = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(2000));
        assert_eq!(status(&incomplete_long), 431);
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect();
        let many = parse_head(
            format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n").as_bytes(),
            &Limits {
                max_head: 1 << 20,
                max_body: 0,
            },
        );
        assert_eq!(many.unwrap_err().status, 431);
    }

    #[test]
    fn bare_line_feeds_are_rejected() {
        assert_eq!(status("GET / HTTP/1.1\nHost: x\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: x\n\n"), 400);
    }
}
