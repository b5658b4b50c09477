//! Setting a request's W3C `traceparent` for one attempt upstream (a
//! traced request names its CLIENT span), in either form of a head: the
//! HTTP/1.1 bytes already written, or an HTTP/2 header map.

use http::{HeaderMap, HeaderName, HeaderValue};

const NAME: &[u8] = b"traceparent";

/// Sets `traceparent` in the HTTP/1.1 request head at the start of `buf`
/// (a body may follow it): the value of the field when there is one,
/// else a new field before the blank line.
pub(crate) fn set_in_h1(buf: &mut Vec<u8>, value: &[u8; 55]) {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return;
    };
    let head = &buf[..end + 2];
    let mut at = head
        .iter()
        .position(|&b| b == b'\n')
        .map_or(head.len(), |i| i + 1);
    while at < head.len() {
        let line_end = head[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(head.len(), |i| at + i + 1);
        let line = &head[at..line_end];
        if line.len() > NAME.len()
            && line[..NAME.len()].eq_ignore_ascii_case(NAME)
            && line[NAME.len()] == b':'
        {
            let mut field = Vec::with_capacity(NAME.len() + 59);
            field.extend_from_slice(b"traceparent: ");
            field.extend_from_slice(value);
            field.extend_from_slice(b"\r\n");
            buf.splice(at..line_end, field);
            return;
        }
        at = line_end;
    }
    let mut field = Vec::with_capacity(NAME.len() + 59);
    field.extend_from_slice(b"traceparent: ");
    field.extend_from_slice(value);
    field.extend_from_slice(b"\r\n");
    buf.splice(end + 2..end + 2, field);
}

/// The same in an HTTP/2 head.
pub(crate) fn set_in_map(headers: &mut HeaderMap, value: &[u8; 55]) {
    if let Ok(value) = HeaderValue::from_bytes(value) {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE: &[u8; 55] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn replaces_or_adds_the_field() {
        let mut buf = b"GET / HTTP/1.1\r\nHost: a\r\nTraceParent: old\r\nx: y\r\n\r\nbody".to_vec();
        set_in_h1(&mut buf, VALUE);
        let expected = [
            &b"GET / HTTP/1.1\r\nHost: a\r\ntraceparent: "[..],
            VALUE,
            b"\r\nx: y\r\n\r\nbody",
        ]
        .concat();
        assert_eq!(buf, expected);
        let mut buf = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n".to_vec();
        set_in_h1(&mut buf, VALUE);
        let expected = [
            &b"GET / HTTP/1.1\r\nHost: a\r\ntraceparent: "[..],
            VALUE,
            b"\r\n\r\n",
        ]
        .concat();
        assert_eq!(buf, expected);
        // Again: replaced, not added twice.
        set_in_h1(&mut buf, VALUE);
        assert_eq!(buf, expected);
    }
}
