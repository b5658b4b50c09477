//! An incremental HTTP/1.1 response reader: consumes whatever bytes have
//! arrived, discards bodies as they stream (memory stays flat whatever their
//! size) and reports each completed response.

use std::mem::MaybeUninit;

use bytes::{Buf, BytesMut};

use crate::checks::Captured;

/// A response head may not be larger than this.
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;
const MAX_CHUNK_LINE: usize = 1024;

/// A completed response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    pub status: u16,
    /// The server will close the connection after it.
    pub close: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkEnd,
    Trailers,
    UntilClose,
}

/// Reads the responses of one connection, in order.
#[derive(Debug)]
pub struct ResponseReader {
    state: State,
    status: u16,
    close: bool,
    /// What the checks read of each answer; `None` without checks.
    capture: Option<Captured>,
}

impl Default for ResponseReader {
    fn default() -> Self {
        Self {
            state: State::Head,
            status: 0,
            close: false,
            capture: None,
        }
    }
}

impl ResponseReader {
    /// Keeps what `capture` asks for of each answer (until the next begins).
    pub(crate) fn set_capture(&mut self, capture: Option<Captured>) {
        self.capture = capture;
    }

    /// What was kept of the answer last completed.
    pub(crate) fn captured(&self) -> Option<&Captured> {
        self.capture.as_ref()
    }

    /// Consumes bytes of the response in progress; `Ok(Some)` when it is complete.
    /// `head_request` says whether it answers a HEAD (no body follows).
    pub fn advance(
        &mut self,
        buf: &mut BytesMut,
        head_request: bool,
    ) -> Result<Option<Done>, String> {
        loop {
            match self.state {
                State::Head => {
                    if !self.parse_head(buf, head_request)? {
                        return Ok(None);
                    }
                    if self.state == State::Head {
                        // An interim 1xx response: the real one follows.
                        continue;
                    }
                }
                State::Length(0) => return Ok(Some(self.complete())),
                State::Length(remaining) => {
                    let take = remaining.min(buf.len() as u64);
                    self.keep(&buf[..take as usize]);
                    buf.advance(take as usize);
                    self.state = State::Length(remaining - take);
                    if remaining > take {
                        return Ok(None);
                    }
                }
                State::ChunkSize => match httparse::parse_chunk_size(buf) {
                    Ok(httparse::Status::Complete((used, 0))) => {
                        buf.advance(used);
                        self.state = State::Trailers;
                    }
                    Ok(httparse::Status::Complete((used, size))) => {
                        buf.advance(used);
                        self.state = State::ChunkData(size);
                    }
                    Ok(httparse::Status::Partial) if buf.len() > MAX_CHUNK_LINE => {
                        return Err("chunk size line too long".into())
                    }
                    Ok(httparse::Status::Partial) => return Ok(None),
                    Err(_) => return Err("invalid chunk size".into()),
                },
                State::ChunkData(remaining) => {
                    let take = remaining.min(buf.len() as u64);
                    self.keep(&buf[..take as usize]);
                    buf.advance(take as usize);
                    if remaining > take {
                        self.state = State::ChunkData(remaining - take);
                        return Ok(None);
                    }
                    self.state = State::ChunkEnd;
                }
                State::ChunkEnd => {
                    if buf.len() < 2 {
                        return Ok(None);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err("chunk not followed by CRLF".into());
                    }
                    buf.advance(2);
                    self.state = State::ChunkSize;
                }
                State::Trailers => {
                    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
                        if buf.len() > MAX_HEAD {
                            return Err("trailer section too large".into());
                        }
                        return Ok(None);
                    };
                    buf.advance(end + 2);
                    if end == 0 {
                        return Ok(Some(self.complete()));
                    }
                }
                State::UntilClose => {
                    self.keep(buf);
                    buf.clear();
                    return Ok(None);
                }
            }
        }
    }

    /// The connection reached EOF: completes a close-delimited response.
    pub fn finish_at_eof(&mut self) -> Option<Done> {
        (self.state == State::UntilClose).then(|| self.complete())
    }

    /// Whether part of a response has been consumed.
    pub fn in_progress(&self) -> bool {
        self.state != State::Head
    }

    fn complete(&mut self) -> Done {
        let done = Done {
            status: self.status,
            close: self.close,
        };
        // The capture stays, for the caller to read, until the next head.
        self.state = State::Head;
        self.status = 0;
        self.close = false;
        done
    }

    /// Body bytes, for the checks that read them.
    fn keep(&mut self, body: &[u8]) {
        if let Some(capture) = &mut self.capture {
            capture.body(body);
        }
    }

    /// Parses a head; false if more bytes are needed. Leaves the state at
    /// `Head` for an interim (1xx) response.
    fn parse_head(&mut self, buf: &mut BytesMut, head_request: bool) -> Result<bool, String> {
        // Uninitialised header slots: zeroing 64 of them per response showed in the profile.
        let mut headers = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
        let mut response = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut response,
            buf,
            &mut headers,
        );
        let len = match parsed {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                return Err("response head too large".into())
            }
            Ok(httparse::Status::Partial) => return Ok(false),
            Err(err) => return Err(format!("malformed response head: {err}")),
        };
        let status = response.code.unwrap_or(0);
        if let Some(capture) = &mut self.capture {
            capture.clear();
            for header in response.headers.iter() {
                capture.header(header.name.as_bytes(), header.value);
            }
        }
        let mut close = response.version == Some(0);
        let mut length: Option<u64> = None;
        let mut chunked = false;
        for header in response.headers.iter() {
            if header.name.eq_ignore_ascii_case("content-length") {
                let value = parse_length(header.value).ok_or("invalid Content-Length")?;
                if length.is_some_and(|l| l != value) {
                    return Err("conflicting Content-Length".into());
                }
                length = Some(value);
            } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = header
                    .value
                    .rsplit(|&b| b == b',')
                    .next()
                    .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            } else if header.name.eq_ignore_ascii_case("connection") {
                for token in header.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                    if token.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        close = false;
                    }
                }
            }
        }
        buf.advance(len);
        if status == 101 {
            return Err("unexpected 101 Switching Protocols".into());
        }
        if (100..200).contains(&status) {
            return Ok(true);
        }
        self.status = status;
        self.close = close;
        self.state = if head_request || status == 204 || status == 304 {
            State::Length(0)
        } else if chunked {
            State::ChunkSize
        } else if let Some(length) = length {
            State::Length(length)
        } else {
            self.close = true;
            State::UntilClose
        };
        Ok(true)
    }
}

/// Decimal digits with optional surrounding whitespace, without overflow.
fn parse_length(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(input: &[u8], head: bool) -> Result<Vec<Done>, String> {
        let mut reader = ResponseReader::default();
        let mut buf = BytesMut::from(input);
        let mut done = Vec::new();
        while let Some(response) = reader.advance(&mut buf, head)? {
            done.push(response);
        }
        Ok(done)
    }

    #[test]
    fn pipelined_content_length_responses() {
        let one = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
        let input = [
            &one[..],
            one,
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
        ]
        .concat();
        let statuses: Vec<u16> = read_all(&input, false)
            .unwrap()
            .iter()
            .map(|d| d.status)
            .collect();
        assert_eq!(statuses, [200, 200, 404]);
    }

    #[test]
    fn byte_by_byte_equals_all_at_once() {
        let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
        let mut reader = ResponseReader::default();
        let mut buf = BytesMut::new();
        let mut done = Vec::new();
        for byte in input {
            buf.extend_from_slice(&[*byte]);
            while let Some(response) = reader.advance(&mut buf, false).unwrap() {
                done.push(response);
            }
        }
        assert_eq!(
            done,
            [
                Done {
                    status: 201,
                    close: false
                },
                Done {
                    status: 200,
                    close: true
                }
            ]
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn bodiless_responses() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";
        assert_eq!(read_all(head, true).unwrap().len(), 1);
        let no_content = b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(read_all(no_content, false).unwrap().len(), 2);
    }

    #[test]
    fn close_delimited_body_ends_at_eof() {
        let mut reader = ResponseReader::default();
        let mut buf = BytesMut::from(&b"HTTP/1.0 200 OK\r\n\r\nbody until close"[..]);
        assert_eq!(reader.advance(&mut buf, false), Ok(None));
        assert!(reader.in_progress());
        assert_eq!(
            reader.finish_at_eof(),
            Some(Done {
                status: 200,
                close: true
            })
        );
    }

    #[test]
    fn malformed_responses_are_errors() {
        for bad in [
            &b"HTTP/1.1 OK\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc",
            b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
            b"garbage\r\n\r\n",
        ] {
            assert!(
                read_all(bad, false).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_capture_keeps_the_checked_headers_and_the_body_of_each_answer() {
        use crate::checks::{CheckSet, CheckSpec};
        let specs = ["{header: x-id, equals: '2'}", "body_contains: cd"];
        let checks: Vec<_> = specs
            .iter()
            .map(|yaml| {
                let spec: CheckSpec = serde_saphyr::from_str(yaml).unwrap();
                spec.into_check().unwrap()
            })
            .collect();
        let set = CheckSet::new(&checks, 1024).unwrap();
        let mut reader = ResponseReader::default();
        reader.set_capture(set.capture());
        let input = b"HTTP/1.1 200 OK\r\nX-Id: 1\r\nContent-Length: 2\r\n\r\nabHTTP/1.1 200 OK\r\nx-id: 2\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nc\r\n1\r\nd\r\n0\r\n\r\n";
        let mut buf = BytesMut::from(&input[..]);
        let mut verdicts = Vec::new();
        while let Some(done) = reader.advance(&mut buf, false).unwrap() {
            let took = std::time::Duration::ZERO;
            verdicts.push(set.verdicts(done.status, reader.captured(), took));
        }
        assert_eq!(verdicts, [0b00, 0b11]);
    }
}
