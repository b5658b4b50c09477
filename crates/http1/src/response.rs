//! Response heads: encoding our own answers, and parsing an upstream's
//! strictly enough that its framing is never guessed at.

use std::mem::MaybeUninit;

use http::StatusCode;

use crate::request::{content_length, has_bare_lf, trim, FieldSink, Rejection, MAX_HEADERS};

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

/// Appends `HTTP/1.1 CODE REASON` and its line end.
pub fn status_line(out: &mut Vec<u8>, status: StatusCode) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
    out.extend_from_slice(b"\r\n");
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
    status_line(out, status);
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

/// How an upstream response body is delimited (RFC 9112 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// HEAD answers, 1xx, 204 and 304.
    None,
    Length(u64),
    Chunked,
    /// Until the upstream closes the connection.
    UntilClose,
}

/// A parsed upstream response head; the fields went to the sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: StatusCode,
    pub framing: BodyFraming,
    /// The upstream keeps the connection open after this response.
    pub keep_alive: bool,
    /// Bytes of the head, including the blank line.
    pub len: usize,
}

/// Parses a response head from the start of `buf`; `Ok(None)` when more
/// bytes are needed. `head_request`: the request was HEAD, so no body
/// follows whatever the fields say. Errors carry 502: the upstream broke
/// the protocol.
pub fn parse_response_head(
    buf: &[u8],
    max_head: usize,
    head_request: bool,
    fields: &mut impl FieldSink,
) -> Result<Option<ResponseHead>, Rejection> {
    let mut headers = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut response,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(len)) if len <= max_head => len,
        Ok(httparse::Status::Partial) if buf.len() <= max_head => return Ok(None),
        Ok(_) => {
            return Err(bad_gateway(format!(
                "response head exceeds {max_head} bytes"
            )))
        }
        Err(err) => return Err(bad_gateway(format!("malformed response: {err}"))),
    };
    if has_bare_lf(&buf[..len]) {
        return Err(bad_gateway("bare LF in the response head"));
    }
    let status = response
        .code
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(|| bad_gateway("invalid status code"))?;
    let http10 = response.version == Some(0);
    let mut close = false;
    let mut keep_alive = false;
    let mut length: Option<u64> = None;
    let mut transfer_coding: Option<bool> = None;
    for header in response.headers.iter() {
        let (name, value) = (header.name, header.value);
        let start = name.as_ptr() as usize - buf.as_ptr() as usize;
        let value_start = value.as_ptr() as usize - buf.as_ptr() as usize;
        fields.field(
            start..start + name.len(),
            value_start..value_start + value.len(),
        );
        if name.eq_ignore_ascii_case("content-length") {
            let parsed = content_length(value)
                .ok_or_else(|| bad_gateway("invalid Content-Length in the response"))?;
            if length.is_some_and(|l| l != parsed as u64) {
                return Err(bad_gateway("conflicting Content-Length in the response"));
            }
            length = Some(parsed as u64);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if transfer_coding.is_some() {
                return Err(bad_gateway(
                    "several Transfer-Encoding fields in the response",
                ));
            }
            let last = value.rsplit(|&b| b == b',').next().unwrap_or_default();
            transfer_coding = Some(trim(last).eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',').map(trim) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    let no_body = head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let framing = match (transfer_coding, length) {
        _ if no_body => BodyFraming::None,
        (Some(_), Some(_)) => {
            return Err(bad_gateway(
                "both Content-Length and Transfer-Encoding in the response",
            ))
        }
        (Some(true), None) if !http10 => BodyFraming::Chunked,
        (Some(_), None) => BodyFraming::UntilClose,
        (None, Some(0)) => BodyFraming::None,
        (None, Some(n)) => BodyFraming::Length(n),
        (None, None) => BodyFraming::UntilClose,
    };
    let keep_alive = !close && (!http10 || keep_alive) && framing != BodyFraming::UntilClose;
    Ok(Some(ResponseHead {
        status,
        framing,
        keep_alive,
        len,
    }))
}

fn bad_gateway(detail: impl Into<String>) -> Rejection {
    Rejection::new(StatusCode::BAD_GATEWAY, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Field;

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

    fn parse(raw: &str, head_request: bool) -> Result<Option<ResponseHead>, Rejection> {
        parse_response_head(raw.as_bytes(), 1024, head_request, &mut ())
    }

    fn framing(raw: &str) -> BodyFraming {
        parse(raw, false).unwrap().unwrap().framing
    }

    #[test]
    fn response_framing() {
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n"),
            BodyFraming::Length(12)
        );
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
            BodyFraming::None
        );
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            BodyFraming::Chunked
        );
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"),
            BodyFraming::UntilClose
        );
        assert_eq!(framing("HTTP/1.1 200 OK\r\n\r\n"), BodyFraming::UntilClose);
        assert_eq!(
            framing("HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n"),
            BodyFraming::None
        );
        assert_eq!(
            framing("HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n"),
            BodyFraming::None
        );
        assert_eq!(framing("HTTP/1.1 100 Continue\r\n\r\n"), BodyFraming::None);
        let head = parse("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", true)
            .unwrap()
            .unwrap();
        assert_eq!(head.framing, BodyFraming::None);
        assert!(head.keep_alive);
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"),
            BodyFraming::Length(3)
        );
    }

    #[test]
    fn response_persistence() {
        let close = parse(
            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n",
            false,
        );
        assert!(!close.unwrap().unwrap().keep_alive);
        let old = parse("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false);
        assert!(!old.unwrap().unwrap().keep_alive);
        let old_ka = parse(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
            false,
        );
        assert!(old_ka.unwrap().unwrap().keep_alive);
        assert!(
            !parse("HTTP/1.1 200 OK\r\n\r\n", false)
                .unwrap()
                .unwrap()
                .keep_alive
        );
    }

    #[test]
    fn broken_responses_are_bad_gateway() {
        for raw in [
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX: 1\nContent-Length: 1\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            assert_eq!(parse(raw, false).unwrap_err().status, 502, "{raw}");
        }
        assert_eq!(parse("HTTP/1.1 200 OK\r\n", false), Ok(None));
        let long = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(2000));
        assert_eq!(parse(&long, false).unwrap_err().status, 502);
    }

    #[test]
    fn fields_reach_the_sink() {
        let raw = "HTTP/1.1 200 OK\r\nA: 1\r\nB: two\r\n\r\n";
        let mut fields: Vec<Field> = Vec::new();
        parse_response_head(raw.as_bytes(), 1024, false, &mut fields).unwrap();
        let text: Vec<(&str, &str)> = fields
            .iter()
            .map(|(n, v)| (&raw[n.clone()], &raw[v.clone()]))
            .collect();
        assert_eq!(text, [("A", "1"), ("B", "two")]);
    }
}
