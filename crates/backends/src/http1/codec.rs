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
    let mut close = false;
    let mut keep_alive = false;
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
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
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
            // HTTP/1.0 clients do not know 100 Continue (RFC 9110 10.1.1).
            head.expect_continue = !head.http10;
        }
    }
    // `close` wins over `keep-alive`, in any order.
    head.keep_alive = !close && (!head.http10 || keep_alive);
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

/// A chunk-size line (size and extensions) may not be longer than this.
pub const MAX_CHUNK_LINE: usize = 4096;
/// The chunked framing of one body may be as large as its data or this,
/// whichever is more: a client sending one-byte chunks must not make the
/// server buffer many times the body limit.
const MAX_CHUNK_OVERHEAD: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum ChunkState {
    #[default]
    Size,
    Data(usize),
    DataEnd,
    Trailers,
}

/// Decodes a chunked request body incrementally: it keeps its place between
/// calls, so every byte is examined once however the body is split across
/// reads. Chunk extensions are checked and ignored; trailers are discarded.
#[derive(Debug, Default)]
pub struct ChunkedDecoder {
    /// Bytes of the raw body consumed so far.
    pos: usize,
    /// Where the trailer section began.
    trailers_from: usize,
    state: ChunkState,
    /// The decoded body.
    pub body: Vec<u8>,
}

impl ChunkedDecoder {
    /// Forgets the last body; a buffer grown by a large one is released.
    pub fn reset(&mut self) {
        self.pos = 0;
        self.state = ChunkState::Size;
        self.body.clear();
        if self.body.capacity() > MAX_CHUNK_OVERHEAD {
            self.body = Vec::new();
        }
    }

    /// `raw` is the body as received so far, from its first byte; it only
    /// grows between calls. Returns the length of the whole chunked body
    /// (trailers included) once it is complete.
    pub fn decode(&mut self, raw: &[u8], limits: &Limits) -> Result<Option<usize>, Rejection> {
        loop {
            let overhead = self.pos - self.body.len();
            if overhead > MAX_CHUNK_OVERHEAD.max(self.body.len()) {
                return Err(Rejection::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "chunked framing larger than the data it frames",
                ));
            }
            match self.state {
                ChunkState::Size => {
                    let Some(line) = next_line(&raw[self.pos..], MAX_CHUNK_LINE)? else {
                        return Ok(None);
                    };
                    let size = chunk_size(line, limits)?;
                    self.pos += line.len() + 2;
                    if size == 0 {
                        self.trailers_from = self.pos;
                        self.state = ChunkState::Trailers;
                    } else if size > limits.max_body.saturating_sub(self.body.len()) {
                        return Err(body_too_large(limits));
                    } else {
                        self.state = ChunkState::Data(size);
                    }
                }
                ChunkState::Data(remaining) => {
                    let take = remaining.min(raw.len() - self.pos);
                    self.body.extend_from_slice(&raw[self.pos..self.pos + take]);
                    self.pos += take;
                    if take < remaining {
                        self.state = ChunkState::Data(remaining - take);
                        return Ok(None);
                    }
                    self.state = ChunkState::DataEnd;
                }
                ChunkState::DataEnd => {
                    match raw.get(self.pos..self.pos + 2) {
                        None => return Ok(None),
                        Some(b"\r\n") => self.pos += 2,
                        Some(_) => return Err(Rejection::bad("chunk data not followed by CRLF")),
                    }
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailers => {
                    let budget = limits
                        .max_head
                        .saturating_sub(self.pos - self.trailers_from);
                    let Some(line) = next_line(&raw[self.pos..], budget)? else {
                        return Ok(None);
                    };
                    self.pos += line.len() + 2;
                    if line.is_empty() {
                        return Ok(Some(self.pos));
                    }
                }
            }
        }
    }
}

/// The next CRLF-terminated line (without its CRLF); `None` if incomplete.
/// A bare LF, a control byte, or no CRLF within `max` bytes is an error.
fn next_line(buf: &[u8], max: usize) -> Result<Option<&[u8]>, Rejection> {
    for (i, &byte) in buf.iter().enumerate().take(max.saturating_add(2)) {
        match byte {
            b'\r' => {
                return match buf.get(i + 1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some(&buf[..i])),
                    Some(_) => Err(Rejection::bad("bare CR in chunked framing")),
                }
            }
            b'\t' | b' '..=b'~' => {}
            _ => return Err(Rejection::bad("invalid byte in chunked framing")),
        }
    }
    if buf.len() > max {
        return Err(Rejection::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "chunk-size line or trailer section too long",
        ));
    }
    Ok(None)
}

/// `1*HEXDIG [ BWS ";" extension ]`: at least one digit; the size must fit the body limit.
fn chunk_size(line: &[u8], limits: &Limits) -> Result<usize, Rejection> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(Rejection::bad("chunk size missing"));
    }
    let rest = line[digits..].trim_ascii_start();
    if !rest.is_empty() && rest[0] != b';' {
        return Err(Rejection::bad("invalid chunk size"));
    }
    let significant = line[..digits].iter().skip_while(|&&b| b == b'0').count();
    if significant > 15 {
        return Err(body_too_large(limits));
    }
    Ok(line[..digits].iter().fold(0usize, |size, &b| {
        size * 16 + (b as char).to_digit(16).unwrap_or(0) as usize
    }))
}

pub fn body_too_large(limits: &Limits) -> Rejection {
    Rejection::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body exceeds {} bytes", limits.max_body),
    )
}

/// 1xx and 204 responses carry neither a body nor `Content-Length` (RFC 9110 8.6).
pub fn may_have_body(status: StatusCode) -> bool {
    !status.is_informational() && status != StatusCode::NO_CONTENT
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
pub fn encode_head<'a>(
    out: &mut Vec<u8>,
    status: StatusCode,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
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
    if may_have_body(status) {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body_len).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"date: ");
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
        for close_wins in [
            "GET / HTTP/1.0\r\nConnection: close, keep-alive\r\n\r\n",
            "GET / HTTP/1.0\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n",
        ] {
            assert!(
                !parse(close_wins).unwrap().unwrap().keep_alive,
                "{close_wins}"
            );
        }
        let old_expect = "POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n";
        assert!(!parse(old_expect).unwrap().unwrap().expect_continue);
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

    fn decode_all(raw: &[u8]) -> Result<Option<(usize, Vec<u8>)>, Rejection> {
        let mut decoder = ChunkedDecoder::default();
        Ok(decoder
            .decode(raw, &LIMITS)?
            .map(|used| (used, decoder.body)))
    }

    #[test]
    fn chunked_bodies() {
        let body = b"4;ext=1\r\nWiki\r\n5 ; e\r\npedia\r\n0\r\n\r\nNEXT";
        assert_eq!(
            decode_all(body),
            Ok(Some((body.len() - 4, b"Wikipedia".to_vec())))
        );
        let trailers = b"1\r\na\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(decode_all(trailers).unwrap().unwrap().0, trailers.len());
        for partial in [
            &b"4\r\nWi"[..],
            b"4\r\nWiki\r\n",
            b"0\r\n",
            b"0\r\nX: 1\r\n",
            b"4\r",
        ] {
            assert_eq!(decode_all(partial), Ok(None));
        }
        for (bad, status) in [
            (&b"zz\r\n"[..], 400),
            (b"\r\n\r\n", 400),
            (b"1\r\nab\r\n", 400),
            (b"2;a\nb\r\n", 400),
            (b"1\nab", 400),
            (b"1;\x01\r\n", 400),
            (b"41\r\n", 413),
            (b"ffffffffffffffffff\r\n", 413),
        ] {
            assert_eq!(
                decode_all(bad).unwrap_err().status.as_u16(),
                status,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let endless_extension = [&b"1;"[..], &[b'a'; MAX_CHUNK_LINE]].concat();
        assert_eq!(decode_all(&endless_extension).unwrap_err().status, 431);
    }

    #[test]
    fn chunked_decoding_resumes_where_it_stopped() {
        let raw = b"3\r\nabc\r\n2;x\r\nde\r\n0\r\nT: v\r\n\r\n";
        let mut decoder = ChunkedDecoder::default();
        for end in 0..raw.len() {
            assert_eq!(decoder.decode(&raw[..end], &LIMITS), Ok(None), "at {end}");
        }
        assert_eq!(decoder.decode(raw, &LIMITS), Ok(Some(raw.len())));
        assert_eq!(decoder.body, b"abcde");
        decoder.reset();
        assert_eq!(decoder.decode(b"0\r\n\r\n", &LIMITS), Ok(Some(5)));
    }

    #[test]
    fn tiny_chunks_cannot_multiply_the_body_limit() {
        let limits = Limits {
            max_head: 1024,
            max_body: 1 << 20,
        };
        let raw: Vec<u8> = b"1\r\nx\r\n".repeat(20_000);
        let mut decoder = ChunkedDecoder::default();
        assert_eq!(decoder.decode(&raw, &limits).unwrap_err().status, 413);
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
                        let mut decoder = ChunkedDecoder::default();
                        if let Ok(Some(used)) = decoder.decode(&input[head.len..], &LIMITS) {
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
            [(&b"content-type"[..], &b"text/plain"[..])],
            5,
            b"DATE",
            Persistence::KeepAlive,
        );
        assert_eq!(out, b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\ndate: DATE\r\n\r\n");
        out.clear();
        encode_head(
            &mut out,
            StatusCode::NOT_FOUND,
            [],
            0,
            b"D",
            Persistence::Close,
        );
        assert!(out.ends_with(b"connection: close\r\n\r\n"));
        out.clear();
        encode_head(
            &mut out,
            StatusCode::NO_CONTENT,
            [],
            0,
            b"D",
            Persistence::KeepAlive,
        );
        assert_eq!(out, b"HTTP/1.1 204 No Content\r\ndate: D\r\n\r\n");
    }
}
