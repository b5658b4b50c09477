//! The header fields of a request head that decide how it is served:
//! framing (Content-Length or chunked, refused when ambiguous), persistence
//! (`Connection`), upgrade, `Host` and `Expect`.

use http::StatusCode;

use super::{range, FieldSink, Framing, Head, Rejection};

pub(super) fn read_fields(
    buf: &[u8],
    headers: &[httparse::Header<'_>],
    head: &mut Head,
    fields: &mut impl FieldSink,
) -> Result<(), Rejection> {
    let mut close = false;
    let mut keep_alive = false;
    let mut upgrade_token = false;
    let mut upgrade_field = false;
    let mut length: Option<usize> = None;
    let mut chunked = false;
    for header in headers {
        let name = header.name;
        let value = header.value;
        fields.field(range(buf, name.as_bytes()), range(buf, value));
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
                upgrade_token |= token.eq_ignore_ascii_case(b"upgrade");
            }
        } else if name.eq_ignore_ascii_case("content-type") {
            head.content_type = Some(range(buf, value));
        } else if name.eq_ignore_ascii_case("host") {
            if head.host.is_some() {
                return Err(Rejection::bad("several Host fields"));
            }
            head.host = Some(range(buf, trim(value)));
        } else if name.eq_ignore_ascii_case("upgrade") {
            upgrade_field = true;
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
    head.upgrade = upgrade_token && upgrade_field && !head.http10;
    if head.host.is_none() && !head.http10 {
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

/// Without leading and trailing whitespace.
pub fn trim(bytes: &[u8]) -> &[u8] {
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

fn parse_length(value: &[u8]) -> Result<usize, Rejection> {
    content_length(value).ok_or_else(|| Rejection::bad("invalid Content-Length"))
}

/// A Content-Length value: digits only (no sign, no spaces inside, no
/// list), at most 15 of them, so it cannot overflow.
pub fn content_length(value: &[u8]) -> Option<usize> {
    let digits = trim(value);
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0usize, |n, d| n * 10 + usize::from(d - b'0')),
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::{parse, status, LIMITS};
    use super::super::{parse_head_into, Field};

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
    fn fields_host_and_upgrade() {
        let raw = "GET /chat HTTP/1.1\r\nHost:  example.com:8080 \r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
        let mut fields: Vec<Field> = Vec::new();
        let head = parse_head_into(raw.as_bytes(), &LIMITS, &mut fields)
            .unwrap()
            .unwrap();
        assert_eq!(&raw[head.host.unwrap()], "example.com:8080");
        assert!(head.upgrade);
        let names: Vec<&str> = fields.iter().map(|(n, _)| &raw[n.clone()]).collect();
        assert_eq!(names, ["Host", "Connection", "Upgrade"]);
        assert_eq!(&raw[fields[2].1.clone()], "websocket");
        let no_field = "GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\n\r\n";
        assert!(!parse(no_field).unwrap().unwrap().upgrade);
    }
}
