//! A request stream, decoded without I/O (RFC 9114 4.1): HEADERS, then
//! DATA frames, then optionally a trailing HEADERS, then the end of the
//! stream. Fed the bytes received so far and whether the stream has ended,
//! it yields one event at a time; a DATA payload is passed on as it
//! arrives, never gathered. Its buffer holds at most one HEADERS frame,
//! bounded by the field section limit.

use bytes::{Buf, Bytes, BytesMut};

use crate::{
    frame, head,
    head::{FieldSection, RequestHead},
    qpack::{decode_section, SectionError},
    Code, Error,
};

/// What the request stream carried next.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    Head(Box<RequestHead>),
    /// Body bytes (a DATA frame's payload, or part of it).
    Data(Bytes),
    Trailers(FieldSection),
    /// The stream ended cleanly; the body had the declared length.
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Body,
    /// Trailers received: only the end may follow.
    Trailers,
    Ended,
}

/// Decodes one request stream.
#[derive(Debug)]
pub struct RequestDecoder {
    state: State,
    /// Payload bytes of the current DATA frame not yet passed on.
    data_left: u64,
    /// Payload bytes of an unknown frame still to skip.
    skip_left: u64,
    max_field_section_size: u64,
    content_length: Option<u64>,
    received: u64,
}

impl RequestDecoder {
    /// `max_field_section_size` is what sluice advertised: a request
    /// head past it is [`Error::HeadTooLarge`] (431), trailers past it a
    /// malformed request.
    pub fn new(max_field_section_size: u64) -> Self {
        Self {
            state: State::Head,
            data_left: 0,
            skip_left: 0,
            max_field_section_size,
            content_length: None,
            received: 0,
        }
    }

    /// Whether the head has been decoded and no more body can come.
    pub fn ended(&self) -> bool {
        self.state == State::Ended
    }

    /// The next event from `buf` (consumed as it is decoded), `None` when
    /// more bytes are needed. `fin`: the stream has ended after `buf`.
    pub fn decode(&mut self, buf: &mut BytesMut, fin: bool) -> Result<Option<Event>, Error> {
        loop {
            if self.data_left > 0 {
                if buf.is_empty() {
                    return match fin {
                        true => Err(truncated("the stream ended inside a DATA frame")),
                        false => Ok(None),
                    };
                }
                let n = (buf.len() as u64).min(self.data_left) as usize;
                self.data_left -= n as u64;
                self.received += n as u64;
                if self.content_length.is_some_and(|len| self.received > len) {
                    return Err(Error::message("more body than its content-length"));
                }
                return Ok(Some(Event::Data(buf.split_to(n).freeze())));
            }
            if self.skip_left > 0 {
                let n = (buf.len() as u64).min(self.skip_left) as usize;
                buf.advance(n);
                self.skip_left -= n as u64;
                if self.skip_left > 0 {
                    return match fin {
                        true => Err(truncated("the stream ended inside a frame")),
                        false => Ok(None),
                    };
                }
            }
            if buf.is_empty() {
                return match fin {
                    false => Ok(None),
                    true => self.end(),
                };
            }
            let Some(header) = frame::decode_header(buf) else {
                return match fin {
                    true => Err(truncated("the stream ended inside a frame header")),
                    false => Ok(None),
                };
            };
            match header.kind {
                frame::DATA => {
                    if self.state != State::Body {
                        return Err(Error::unexpected("DATA before the head or after trailers"));
                    }
                    buf.advance(header.size);
                    self.data_left = header.len;
                }
                frame::HEADERS => {
                    if self.state == State::Trailers {
                        return Err(Error::unexpected("HEADERS after trailers"));
                    }
                    if header.len > self.max_field_section_size {
                        return Err(self.too_large());
                    }
                    let whole = header.size + header.len as usize;
                    if buf.len() < whole {
                        return match fin {
                            true => Err(truncated("the stream ended inside HEADERS")),
                            false => Ok(None),
                        };
                    }
                    buf.advance(header.size);
                    let payload = buf.split_to(header.len as usize);
                    return self.section(&payload).map(Some);
                }
                frame::CANCEL_PUSH
                | frame::SETTINGS
                | frame::PUSH_PROMISE
                | frame::GOAWAY
                | frame::MAX_PUSH_ID => {
                    return Err(Error::unexpected("a control frame on a request stream"));
                }
                kind if frame::is_http2_only(kind) => {
                    return Err(Error::unexpected("an HTTP/2 frame type"));
                }
                // Unknown and reserved types are skipped (RFC 9114 9).
                _ => {
                    buf.advance(header.size);
                    self.skip_left = header.len;
                }
            }
        }
    }

    fn too_large(&self) -> Error {
        match self.state {
            State::Head => Error::HeadTooLarge,
            _ => Error::message("trailers larger than the field section limit"),
        }
    }

    /// A whole HEADERS payload: the head, or trailers.
    fn section(&mut self, payload: &[u8]) -> Result<Event, Error> {
        let mut section = FieldSection::new();
        match decode_section(payload, self.max_field_section_size, &mut section) {
            Ok(()) => {}
            Err(SectionError::TooLarge) => return Err(self.too_large()),
            Err(SectionError::Failed(what)) => {
                return Err(Error::Connection(Code::QPACK_DECOMPRESSION_FAILED, what))
            }
        }
        if self.state == State::Head {
            let head = head::request(section).map_err(Error::message)?;
            self.content_length = head.content_length();
            self.state = State::Body;
            return Ok(Event::Head(Box::new(head)));
        }
        head::trailers(&section).map_err(Error::message)?;
        self.check_length()?;
        self.state = State::Trailers;
        Ok(Event::Trailers(section))
    }

    fn end(&mut self) -> Result<Option<Event>, Error> {
        match self.state {
            State::Head => Err(Error::Stream(
                Code::H3_REQUEST_INCOMPLETE,
                "the stream ended before the head",
            )),
            State::Ended => Ok(None),
            State::Body | State::Trailers => {
                self.check_length()?;
                self.state = State::Ended;
                Ok(Some(Event::End))
            }
        }
    }

    fn check_length(&self) -> Result<(), Error> {
        match self.content_length {
            Some(len) if len != self.received => {
                Err(Error::message("a body shorter than its content-length"))
            }
            _ => Ok(()),
        }
    }
}

fn truncated(what: &'static str) -> Error {
    Error::Connection(Code::H3_FRAME_ERROR, what)
}

#[cfg(test)]
mod tests;
