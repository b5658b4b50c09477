//! The HTTP/1.1 request parser and response encoder of the backends: pure
//! functions over byte slices, so that they can be fuzzed and unit-tested
//! without sockets. Parsing is strict: a request whose framing is ambiguous
//! (both Content-Length and Transfer-Encoding, several Content-Length, a
//! transfer coding other than `chunked`) is rejected, never guessed at.

use std::{mem::MaybeUninit, ops::Range};

use http::{Method, StatusCode};

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
    pub path: Range<usize>,
    pub query: Option<Range<usize>>,
    pub content_type: Option<Range<usize>>,
    pub framing: Framing,
    /// The client keeps the connection open after this exchange.
    pub keep_alive: bool,
    /// HTTP/1.0: keep-alive must be confirmed in the response.
    pub http10: bool,
    pub expect_continue: bool,
    /// Bytes of the head, including the blank line.
    pub len: usize,
}

/// Why a request cannot be served; answered with `status` and the connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub status: StatusCode,
    pub detail: String,
}

impl Rejection {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
        }
    }

    fn bad(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }
}

/// Parses one request head from the start of `buf`: `Ok(None)` when more
/// bytes are needed.
pub fn parse_head(buf: &[u8], limits: &Limits) -> Result<Option<Head>, Rejection> {
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
        path,
        query,
        content_type: None,
        framing: Framing::Empty,
        keep_alive: !http10,
        http10,
        expect_continue: false,
        len,
    };
    read_fields(buf, request.headers, &mut head)?;
    Ok(Some(head))
}

fn head_too_large(limits: &Limits) -> Rejection {
    Rejection::new(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        format!("request head exceeds {} bytes", limits.max_head),
    )
}

/// Origin-form (`/path?query`) or absolute-form (`http://host/path?query`).
fn split_target(
    buf: &[u8],
    target: &str,
) -> Result<(Range<usize>, Option<Range<usize>>), Rejection> {
    let origin = if target.starts_with('/') {
        target
    } else if let Some(rest) = target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("https://"))
    {
        // The authority ends at the path or the query; with neither, the
        // path is empty (served as `/`) and still a slice of `buf`.
        &rest[rest.find(['/', '?']).unwrap_or(rest.len())..]
    } else {
        return Err(Rejection::bad(format!("invalid request target `{target}`")));
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

fn read_fields(
    buf: &[u8],
    headers: &[httparse::Header<'_>],
    head: &mut Head,
) -> Result<(), Rejection> {
    let mut host = false;
    let mut length: Option<usize> = None;
    let mut chunked = false;
    for header in headers {
        let name = header.name;
        let value = header.value;
        if name.eq_ignore_ascii_case("content-length") {
            if length.is_some() {
                return Err(Rejection::bad("several Content-Length fields"));
            }
            length = Some(parse_length(value)?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if chunked || !trim(value).eq_ignore_ascii_case(b"chunked") {
                return Err(Rejection::bad(
                    "only a single `Transfer-Encoding: chunked` is supported",
                ));
            }
            chunked = true;
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',').map(trim) {
                if token.eq_ignore_ascii_case(b"close") {
                    head.keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && head.http10 {
                    head.keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("content-type") {
            head.content_type = Some(offset(buf, value)..offset(buf, value) + value.len());
        } else if name.eq_ignore_ascii_case("host") {
            if host {
                return Err(Rejection::bad("several Host fields"));
            }
            host = true;
        } else if name.eq_ignore_ascii_case("expect") {
            if !trim(value).eq_ignore_ascii_case(b"100-continue") {
                return Err(Rejection::new(
                    StatusCode::EXPECTATION_FAILED,
                    "only `Expect: 100-continue` is supported",
                ));
            }
            head.expect_continue = true;
        }
    }
    if !host && !head.http10 {
        return Err(Rejection::bad("HTTP/1.1 request without Host"));
    }
    head.framing = match (length, chunked) {
        (Some(_), true) => return Err(Rejection::bad("both Content-Length and Transfer-Encoding")),
        (_, true) if head.http10 => {
            return Err(Rejection::bad("chunked transfer coding in HTTP/1.0"))
        }
        (_, true) => Framing::Chunked,
        (Some(0) | None, false) => Framing::Empty,
        (Some(n), false) => Framing::Length(n),
    };
    Ok(())
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &bytes[start..end]
}

/// Digits only: no sign, no spaces inside, no list, no overflow.
fn parse_length(value: &[u8]) -> Result<usize, Rejection> {
    let digits = trim(value);
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(Rejection::bad("invalid Content-Length"));
    }
    Ok(digits
        .iter()
        .fold(0usize, |n, d| n * 10 + usize::from(d - b'0')))
}

/// Decodes a chunked body at the start of `buf` into `out` (cleared first).
/// Returns the bytes consumed (trailers included) or `None` when more input
/// is needed. Chunk extensions are ignored and trailers discarded.
pub fn decode_chunked(
    buf: &[u8],
    out: &mut Vec<u8>,
    limits: &Limits,
) -> Result<Option<usize>, Rejection> {
    out.clear();
    let mut pos = 0;
    loop {
        let (size_len, size) = match httparse::parse_chunk_size(&buf[pos..]) {
            Ok(httparse::Status::Complete(parsed)) => parsed,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(Rejection::bad("invalid chunk size line")),
        };
        pos += size_len;
        if size == 0 {
            return Ok(skip_trailers(&buf[pos..], limits)?.map(|len| pos + len));
        }
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        if size > limits.max_body.saturating_sub(out.len()) {
            return Err(body_too_large(limits));
        }
        if buf.len() - pos < size.saturating_add(2) {
            return Ok(None);
        }
        out.extend_from_slice(&buf[pos..pos + size]);
        pos += size;
        if &buf[pos..pos + 2] != b"\r\n" {
            return Err(Rejection::bad("chunk data not followed by CRLF"));
        }
        pos += 2;
    }
}

/// Length of the trailer section (ending in an empty line), or `None` if incomplete.
fn skip_trailers(buf: &[u8], limits: &Limits) -> Result<Option<usize>, Rejection> {
    if buf.starts_with(b"\r\n") {
        return Ok(Some(2));
    }
    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
        return Ok(Some(end + 4));
    }
    if buf.len() > limits.max_head {
        return Err(head_too_large(limits));
    }
    Ok(None)
}

pub fn body_too_large(limits: &Limits) -> Rejection {
    Rejection::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body exceeds {} bytes", limits.max_body),
    )
}

/// What the response says about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// HTTP/1.1 default: nothing to say.
    KeepAlive,
    /// An HTTP/1.0 client asked for keep-alive: confirm it.
    KeepAlive10,
    Close,
}

/// Appends a response head for `status` with the given fields and a
/// `Content-Length` of `body_len`.
pub fn encode_head(
    out: &mut Vec<u8>,
    status: StatusCode,
    fields: &[(&[u8], &[u8])],
    body_len: usize,
    date: &[u8],
    persistence: Persistence,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in fields {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(itoa::Buffer::new().format(body_len).as_bytes());
    out.extend_from_slice(b"\r\ndate: ");
    out.extend_from_slice(date);
    match persistence {
        Persistence::KeepAlive => {}
        Persistence::KeepAlive10 => out.extend_from_slice(b"\r\nconnection: keep-alive"),
        Persistence::Close => out.extend_from_slice(b"\r\nconnection: close"),
    }
    out.extend_from_slice(b"\r\n\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_head: 1024,
        max_body: 64,
    };

    fn parse(raw: &str) -> Result<Option<Head>, Rejection> {
        parse_head(raw.as_bytes(), &LIMITS)
    }

    fn status(raw: &str) -> u16 {
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
    }

    #[test]
    fn connection_semantics() {
        let close = parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!close.keep_alive);
        let old = parse("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(old.http10 && !old.keep_alive);
        let old_ka = parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(old_ka.keep_alive);
    }

    #[test]
    fn ambiguous_framing_is_rejected() {
        assert_eq!(status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
        assert_eq!(
            status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
            400
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\n"),
            400
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\n"),
            400
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            400
        );
        assert_eq!(status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
        assert_eq!(
            status("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
    }

    #[test]
    fn malformed_and_oversize_heads() {
        assert_eq!(status("GET / HTTP/1.1\r\n\r\n"), 400); // no Host
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
        assert_eq!(status("GET nowhere HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
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
    fn chunked_bodies() {
        let mut out = Vec::new();
        let body = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\nNEXT";
        assert_eq!(
            decode_chunked(body, &mut out, &LIMITS),
            Ok(Some(body.len() - 4))
        );
        assert_eq!(out, b"Wikipedia");
        let trailers = b"1\r\na\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(
            decode_chunked(trailers, &mut out, &LIMITS),
            Ok(Some(trailers.len()))
        );
        for partial in [
            &b"4\r\nWi"[..],
            b"4\r\nWiki\r\n",
            b"0\r\n",
            b"0\r\nX: 1\r\n",
        ] {
            assert_eq!(decode_chunked(partial, &mut out, &LIMITS), Ok(None));
        }
        assert_eq!(
            decode_chunked(b"zz\r\n", &mut out, &LIMITS)
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            decode_chunked(b"1\r\nab\r\n", &mut out, &LIMITS)
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            decode_chunked(b"41\r\n", &mut out, &LIMITS)
                .unwrap_err()
                .status,
            413
        );
        assert_eq!(
            decode_chunked(b"ffffffffffffffff\r\n", &mut out, &LIMITS)
                .unwrap_err()
                .status,
            413
        );
    }

    /// A deterministic stand-in for the fuzz target (fuzz/): mutated valid
    /// requests never panic and every returned range is inside the input.
    #[test]
    fn mutated_requests_never_panic() {
        let seeds: [&[u8]; 3] = [
            b"GET /v1/pets?limit=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            b"POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\nT: 1\r\n\r\n",
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut body = Vec::new();
        for round in 0..30_000 {
            let mut input = seeds[round % seeds.len()].to_vec();
            for _ in 0..=next() % 4 {
                let at = (next() as usize) % (input.len() + 1);
                match next() % 3 {
                    0 if at < input.len() => input[at] = next() as u8,
                    1 => input.insert(at, b"\r\n:; \x00\x7f0aZ"[(next() % 10) as usize]),
                    _ if at < input.len() => {
                        input.remove(at);
                    }
                    _ => {}
                }
            }
            match parse_head(&input, &LIMITS) {
                Ok(Some(head)) => {
                    assert!(head.len <= input.len());
                    assert!(head.path.end <= head.len);
                    if head.framing == Framing::Chunked {
                        if let Ok(Some(used)) =
                            decode_chunked(&input[head.len..], &mut body, &LIMITS)
                        {
                            assert!(used <= input.len() - head.len);
                        }
                    }
                }
                Ok(None) => {}
                Err(rejection) => assert!(rejection.status.is_client_error()),
            }
        }
    }

    #[test]
    fn encodes_heads() {
        let mut out = Vec::new();
        encode_head(
            &mut out,
            StatusCode::OK,
            &[(b"content-type", b"text/plain")],
            5,
            b"DATE",
            Persistence::KeepAlive,
        );
        assert_eq!(out, b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\ndate: DATE\r\n\r\n");
        out.clear();
        encode_head(
            &mut out,
            StatusCode::NOT_FOUND,
            &[],
            0,
            b"D",
            Persistence::Close,
        );
        assert!(out.ends_with(b"connection: close\r\n\r\n"));
    }
}
