//! The chunked transfer coding (RFC 9112 7.1), decoded as a stream: the
//! decoder keeps its place between calls, so a body of any size passes
//! through a bounded buffer and every byte is examined once however it is
//! split across reads.

use http::StatusCode;

use crate::request::{Limits, Rejection};

/// A chunk-size line (size and extensions) may not be longer than this.
pub const MAX_CHUNK_LINE: usize = 4096;
/// The chunked framing of one body may be as large as its data or this,
/// whichever is more: a peer sending one-byte chunks must not make us
/// process many times the body limit.
const MAX_CHUNK_OVERHEAD: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    #[default]
    Size,
    Data(usize),
    DataEnd,
    Trailers,
    Done,
}

/// A piece of a chunked body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part<'a> {
    Data(&'a [u8]),
    /// One trailer field line, `name: value`.
    Trailer(&'a [u8]),
}

/// How far one call got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// Bytes of the input used; the caller drops them before the next call.
    pub consumed: usize,
    /// The last chunk and the trailer section have been read.
    pub done: bool,
}

/// Decodes one chunked body. Extensions are checked and ignored; trailer
/// fields are checked, and handed over by [`ChunkedDecoder::decode_parts`].
#[derive(Debug, Default)]
pub struct ChunkedDecoder {
    state: State,
    /// Data bytes delivered so far.
    data: usize,
    /// Framing bytes (size lines, CRLFs, trailers) consumed so far.
    framing: usize,
    trailer_bytes: usize,
}

impl ChunkedDecoder {
    /// Ready for the next body.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// Data bytes delivered so far.
    pub fn data_len(&self) -> usize {
        self.data
    }

    /// Decodes what it can of `raw`, which starts at the first byte not yet
    /// consumed, handing every piece of data to `on_data` in order.
    /// Trailer fields are dropped.
    pub fn decode(
        &mut self,
        raw: &[u8],
        limits: &Limits,
        mut on_data: impl FnMut(&[u8]),
    ) -> Result<Decoded, Rejection> {
        self.decode_parts(raw, limits, |part| {
            if let Part::Data(data) = part {
                on_data(data);
            }
        })
    }

    /// As [`ChunkedDecoder::decode`], also handing over each trailer field
    /// line (without its CRLF), for proxies that pass trailers on.
    pub fn decode_parts(
        &mut self,
        raw: &[u8],
        limits: &Limits,
        mut on_part: impl FnMut(Part<'_>),
    ) -> Result<Decoded, Rejection> {
        let mut pos = 0;
        loop {
            if self.framing > MAX_CHUNK_OVERHEAD.max(self.data) {
                return Err(Rejection::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "chunked framing larger than the data it frames",
                ));
            }
            let rest = &raw[pos..];
            let used = match self.state {
                State::Done => {
                    return Ok(Decoded {
                        consumed: pos,
                        done: true,
                    })
                }
                State::Size => {
                    let Some(line) = next_line(rest, MAX_CHUNK_LINE)? else {
                        break;
                    };
                    let size = chunk_size(line, limits)?;
                    self.state = if size == 0 {
                        State::Trailers
                    } else if size > limits.max_body.saturating_sub(self.data) {
                        return Err(body_too_large(limits));
                    } else {
                        State::Data(size)
                    };
                    self.framing += line.len() + 2;
                    line.len() + 2
                }
                State::Data(remaining) => {
                    let take = remaining.min(rest.len());
                    if take == 0 {
                        break;
                    }
                    on_part(Part::Data(&rest[..take]));
                    self.data += take;
                    self.state = if take < remaining {
                        State::Data(remaining - take)
                    } else {
                        State::DataEnd
                    };
                    take
                }
                State::DataEnd => match rest.get(..2) {
                    None if rest.first().is_none_or(|&b| b == b'\r') => break,
                    Some(b"\r\n") => {
                        self.state = State::Size;
                        self.framing += 2;
                        2
                    }
                    _ => return Err(Rejection::bad("chunk data not followed by CRLF")),
                },
                State::Trailers => {
                    let budget = limits.max_head.saturating_sub(self.trailer_bytes);
                    let Some(line) = next_line(rest, budget)? else {
                        break;
                    };
                    self.trailer_bytes += line.len() + 2;
                    self.framing += line.len() + 2;
                    if line.is_empty() {
                        self.state = State::Done;
                    } else if line.contains(&b':') && !matches!(line[0], b' ' | b'\t') {
                        on_part(Part::Trailer(line));
                    } else {
                        return Err(Rejection::bad("malformed trailer field"));
                    }
                    line.len() + 2
                }
            };
            pos += used;
        }
        Ok(Decoded {
            consumed: pos,
            done: false,
        })
    }
}

/// Appends `data` as one chunk (nothing for empty data: that would end the body).
pub fn encode_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let mut hex = [0u8; 16];
    let mut at = hex.len();
    let mut n = data.len();
    loop {
        at -= 1;
        hex[at] = b"0123456789abcdef"[n & 15];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&hex[at..]);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The last chunk and a trailer section of `fields` (name, value).
pub fn encode_last_chunk<'a>(
    out: &mut Vec<u8>,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) {
    out.extend_from_slice(b"0\r\n");
    for (name, value) in fields {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Splits a trailer line (from [`Part::Trailer`]) into name and trimmed value.
pub fn split_field(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = line.iter().position(|&b| b == b':')?;
    Some((&line[..colon], line[colon + 1..].trim_ascii()))
}

/// The last chunk and an empty trailer section.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{parse_head, Framing};

    const LIMITS: Limits = Limits {
        max_head: 1024,
        max_body: 64,
    };

    #[test]
    fn trailers_are_handed_over_by_decode_parts() {
        let raw = b"1\r\na\r\n0\r\ngrpc-status: 0\r\ngrpc-message: ok\r\n\r\n";
        let mut decoder = ChunkedDecoder::default();
        let mut lines = Vec::new();
        let decoded = decoder
            .decode_parts(raw, &LIMITS, |part| {
                if let Part::Trailer(line) = part {
                    lines.push(line.to_vec());
                }
            })
            .unwrap();
        let trailers: Vec<_> = lines.iter().map(|l| split_field(l).unwrap()).collect();
        assert!(decoded.done);
        assert_eq!(
            trailers,
            vec![(&b"grpc-status"[..], &b"0"[..]), (b"grpc-message", b"ok")]
        );
        let mut out = Vec::new();
        encode_last_chunk(&mut out, trailers.iter().copied());
        assert_eq!(out, b"0\r\ngrpc-status: 0\r\ngrpc-message: ok\r\n\r\n");
        let mut decoder = ChunkedDecoder::default();
        assert!(decoder
            .decode(b"0\r\nno colon\r\n\r\n", &LIMITS, |_| {})
            .is_err());
    }

    /// Decodes `raw` in one call: (consumed, done, data).
    fn decode_all(raw: &[u8]) -> Result<(usize, bool, Vec<u8>), Rejection> {
        let mut decoder = ChunkedDecoder::default();
        let mut body = Vec::new();
        let decoded = decoder.decode(raw, &LIMITS, |d| body.extend_from_slice(d))?;
        Ok((decoded.consumed, decoded.done, body))
    }

    #[test]
    fn chunked_bodies() {
        let body = b"4;ext=1\r\nWiki\r\n5 ; e\r\npedia\r\n0\r\n\r\nNEXT";
        assert_eq!(
            decode_all(body),
            Ok((body.len() - 4, true, b"Wikipedia".to_vec()))
        );
        let trailers = b"1\r\na\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(decode_all(trailers).unwrap().0, trailers.len());
        for partial in [
            &b"4\r\nWi"[..],
            b"4\r\nWiki\r\n",
            b"0\r\n",
            b"0\r\nX: 1\r\n",
            b"4\r",
            b"1\r\na\r",
        ] {
            assert!(!decode_all(partial).unwrap().1, "{partial:?}");
        }
        for (bad, status) in [
            (&b"zz\r\n"[..], 400),
            (b"\r\n\r\n", 400),
            (b"1\r\nab\r\n", 400),
            (b"1\r\naX", 400),
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

    /// Fed one byte at a time, dropping what each call consumed, the
    /// decoder gives the same data as in one call.
    #[test]
    fn decoding_resumes_where_it_stopped() {
        let raw = b"3\r\nabc\r\n2;x\r\nde\r\n0\r\nT: v\r\n\r\n";
        let mut decoder = ChunkedDecoder::default();
        let mut body = Vec::new();
        let mut pending = Vec::new();
        let mut done = false;
        for &byte in raw {
            assert!(!done);
            pending.push(byte);
            let decoded = decoder
                .decode(&pending, &LIMITS, |d| body.extend_from_slice(d))
                .unwrap();
            pending.drain(..decoded.consumed);
            done = decoded.done;
        }
        assert!(done && pending.is_empty());
        assert_eq!(body, b"abcde");
        assert_eq!(decoder.data_len(), 5);
        decoder.reset();
        assert_eq!(
            decoder.decode(b"0\r\n\r\n", &LIMITS, |_| {}),
            Ok(Decoded {
                consumed: 5,
                done: true
            })
        );
    }

    #[test]
    fn tiny_chunks_cannot_multiply_the_body_limit() {
        let limits = Limits {
            max_head: 1024,
            max_body: 1 << 20,
        };
        let raw: Vec<u8> = b"1\r\nx\r\n".repeat(20_000);
        let mut decoder = ChunkedDecoder::default();
        assert_eq!(
            decoder.decode(&raw, &limits, |_| {}).unwrap_err().status,
            413
        );
    }

    #[test]
    fn encodes_chunks() {
        let mut out = Vec::new();
        encode_chunk(&mut out, b"");
        encode_chunk(&mut out, &[b'x'; 26]);
        out.extend_from_slice(LAST_CHUNK);
        assert_eq!(
            out,
            [&b"1a\r\n"[..], &[b'x'; 26], b"\r\n0\r\n\r\n"].concat()
        );
        let mut decoder = ChunkedDecoder::default();
        let mut body = Vec::new();
        let limits = Limits {
            max_head: 64,
            max_body: 64,
        };
        let decoded = decoder.decode(&out, &limits, |d| body.extend_from_slice(d));
        assert_eq!(
            decoded,
            Ok(Decoded {
                consumed: out.len(),
                done: true
            })
        );
        assert_eq!(body, [b'x'; 26]);
    }

    /// A deterministic stand-in for the fuzz target (fuzz/): mutated valid
    /// requests (a head, then a chunked body when the head says so) never
    /// panic and every returned range is inside the input.
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
                        let body = &input[head.len..];
                        if let Ok(decoded) = decoder.decode(body, &LIMITS, |_| {}) {
                            assert!(decoded.consumed <= body.len());
                        }
                    }
                }
                Ok(None) => {}
                Err(rejection) => assert!(rejection.status.is_client_error()),
            }
        }
    }
}
