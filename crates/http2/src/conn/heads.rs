//! Heads as they arrive: a whole header block decoded (always, so the
//! HPACK table keeps step), then a server's new request, or a head on a
//! stream already open (a client's response, or trailers).

use std::time::Instant;

use fieldcoding::head::{self, FieldSection};

use super::{recv::calm, streams::Stream, Connection, Event, Role, MAX_INTERIM_HEADS};
use crate::{frame, hpack::DecodeError, Error, Reason};

impl Connection {
    /// A whole header block on `stream`.
    pub(super) fn header_block(
        &mut self,
        stream: u32,
        block: &[u8],
        end_stream: bool,
        now: Instant,
    ) -> Result<(), Error> {
        // Decoded first, whatever becomes of the stream: the dynamic
        // table must keep step with the peer's encoder.
        let mut section = FieldSection::new();
        let decoded =
            match self
                .decoder
                .decode(block, self.config.max_header_list as usize, &mut section)
            {
                Ok(()) => true,
                Err(DecodeError::TooLarge) => false,
                Err(DecodeError::Compression(what)) => {
                    return Err(Error::Connection(Reason::COMPRESSION_ERROR, what))
                }
            };
        if !self.is_remote(stream) && self.role == Role::Server {
            return Err(Error::protocol("a client stream with an even ID"));
        }
        if self.streams.contains(stream) {
            return self.later_head(stream, section, decoded, end_stream);
        }
        match self.role {
            Role::Server => self.new_request(stream, section, decoded, end_stream, now),
            Role::Client if self.was_reset(stream) => Ok(()),
            Role::Client if stream >= self.next_local => {
                Err(Error::protocol("a response on an idle stream"))
            }
            Role::Client => Err(Error::Stream(
                stream,
                Reason::STREAM_CLOSED,
                "a head on a closed stream",
            )),
        }
    }

    /// A server's new stream.
    fn new_request(
        &mut self,
        stream: u32,
        section: FieldSection,
        decoded: bool,
        end_stream: bool,
        now: Instant,
    ) -> Result<(), Error> {
        if stream <= self.last_remote {
            return match self.was_reset(stream) {
                true => Ok(()),
                false => Err(Error::protocol("a HEADERS on a stream ID already used")),
            };
        }
        self.last_remote = stream;
        if self.goaway_sent.is_some_and(|last| stream > last) {
            // Not processed (RFC 9113 6.8); the client may retry it.
            return Ok(());
        }
        if self.streams.remote_open >= self.config.max_concurrent_streams as usize {
            frame::write_rst_stream(&mut self.out, stream, Reason::REFUSED_STREAM);
            self.remember_reset(stream);
            return match self.local_resets.exceeded(now) {
                true => Err(calm("too many streams past MAX_CONCURRENT_STREAMS")),
                false => Ok(()),
            };
        }
        let mut state = Stream::new(self.peer.initial_window, self.config.stream_window);
        state.head_received = true;
        state.recv_closed = end_stream;
        if !decoded {
            state.discard = true;
            self.streams.insert(stream, state, true);
            self.events.push_back(Event::HeadTooLarge { stream });
            return Ok(());
        }
        let head = match head::request(section) {
            Ok(head) => head,
            Err(what) => {
                frame::write_rst_stream(&mut self.out, stream, Reason::PROTOCOL_ERROR);
                self.remember_reset(stream);
                let _ = what;
                return match self.local_resets.exceeded(now) {
                    true => Err(calm("too many malformed requests")),
                    false => Ok(()),
                };
            }
        };
        state.content_length = head.content_length();
        if end_stream && state.content_length.is_some_and(|len| len > 0) {
            frame::write_rst_stream(&mut self.out, stream, Reason::PROTOCOL_ERROR);
            self.remember_reset(stream);
            return Ok(());
        }
        self.streams.insert(stream, state, true);
        self.events.push_back(Event::Request {
            stream,
            head: Box::new(head),
            end_stream,
        });
        Ok(())
    }

    /// A head on a stream already open: trailers, or (client) a response.
    fn later_head(
        &mut self,
        stream: u32,
        section: FieldSection,
        decoded: bool,
        end_stream: bool,
    ) -> Result<(), Error> {
        let role = self.role;
        let Some(state) = self.streams.get(stream) else {
            return Ok(());
        };
        if state.locally_reset {
            // Sent before our RST_STREAM reached the peer (RFC 9113 5.4.2):
            // ignored, as DATA for a reset stream is; the block was decoded,
            // so the HPACK state is in step.
            return Ok(());
        }
        if state.recv_closed {
            return Err(Error::Stream(
                stream,
                Reason::STREAM_CLOSED,
                "a head after END_STREAM",
            ));
        }
        if !decoded {
            return Err(Error::Stream(
                stream,
                Reason::PROTOCOL_ERROR,
                "a head past the header list limit",
            ));
        }
        if role == Role::Client && !state.head_received {
            let (status, first) = head::response(&section)
                .map_err(|what| Error::Stream(stream, Reason::PROTOCOL_ERROR, what))?;
            if status < 200 {
                state.interim_heads += 1;
                if usize::from(state.interim_heads) > MAX_INTERIM_HEADS {
                    return Err(Error::Stream(
                        stream,
                        Reason::PROTOCOL_ERROR,
                        "too many interim heads",
                    ));
                }
                if end_stream {
                    return Err(Error::Stream(
                        stream,
                        Reason::PROTOCOL_ERROR,
                        "an interim head with END_STREAM",
                    ));
                }
            } else {
                state.head_received = true;
                state.content_length = head::content_length(&section, first)
                    .map_err(|what| Error::Stream(stream, Reason::PROTOCOL_ERROR, what))?;
                if end_stream && state.content_length.is_some_and(|len| len > 0) && status != 304 {
                    return Err(Error::Stream(
                        stream,
                        Reason::PROTOCOL_ERROR,
                        "an empty body for a content-length",
                    ));
                }
                state.recv_closed = end_stream;
            }
            self.events.push_back(Event::Response {
                stream,
                status,
                fields: section,
                end_stream,
            });
            self.streams.reap(stream, false);
            return Ok(());
        }
        if !end_stream {
            return Err(Error::Stream(
                stream,
                Reason::PROTOCOL_ERROR,
                "trailers without END_STREAM",
            ));
        }
        head::trailers(&section)
            .map_err(|what| Error::Stream(stream, Reason::PROTOCOL_ERROR, what))?;
        if state
            .content_length
            .is_some_and(|len| len != state.received)
        {
            return Err(Error::Stream(
                stream,
                Reason::PROTOCOL_ERROR,
                "a body shorter than its content-length",
            ));
        }
        state.recv_closed = true;
        let discard = state.discard;
        if !discard {
            self.events.push_back(Event::Trailers {
                stream,
                fields: section,
            });
        }
        let remote = self.is_remote(stream);
        self.streams.reap(stream, remote);
        Ok(())
    }
}
