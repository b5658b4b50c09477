//! The receiving half of a connection: the frame loop and what each
//! frame does to the streams, the windows and the events.

use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};

use super::{Block, Connection, Event, Role, PREFACE};
use crate::{
    frame::{self, Frame, Header, HEADER_LEN},
    Error, Reason,
};

/// How many stream IDs this side reset are remembered, so that frames
/// the peer had in flight for them are dropped, not taken as errors.
const REMEMBERED_RESETS: usize = 128;

impl Connection {
    /// Reads every whole frame at the start of `input`, consuming it. On a
    /// connection error GOAWAY is in the output: send it, then close.
    pub fn recv(&mut self, input: &mut BytesMut, now: Instant) -> Result<(), Error> {
        self.recv_frames(input, now).map_err(|err| self.fail(err))
    }

    fn recv_frames(&mut self, input: &mut BytesMut, now: Instant) -> Result<(), Error> {
        if self.awaiting_preface {
            let have = input.len().min(PREFACE.len());
            if input[..have] != PREFACE[..have] {
                return Err(Error::protocol("not the HTTP/2 connection preface"));
            }
            if have < PREFACE.len() {
                return Ok(());
            }
            input.advance(PREFACE.len());
            self.awaiting_preface = false;
        }
        while input.len() >= HEADER_LEN {
            let header = Header::decode(input[..HEADER_LEN].try_into().unwrap_or(&[0; HEADER_LEN]));
            if header.len > self.config.max_frame_size {
                return Err(Error::frame_size("a frame past SETTINGS_MAX_FRAME_SIZE"));
            }
            let whole = HEADER_LEN + header.len as usize;
            if input.len() < whole {
                input.reserve(whole - input.len());
                return Ok(());
            }
            if self.awaiting_settings
                && (header.kind != frame::SETTINGS || header.flags & frame::ACK != 0)
            {
                return Err(Error::protocol("the first frame is not SETTINGS"));
            }
            if let Some(block) = &self.block {
                if header.kind != frame::CONTINUATION || header.stream != block.stream {
                    return Err(Error::protocol("a frame inside a header block"));
                }
            }
            let mut bytes = input.split_to(whole).freeze();
            bytes.advance(HEADER_LEN);
            match self.frame(&header, bytes, now) {
                Ok(()) => {}
                Err(Error::Stream(stream, reason, _)) => {
                    self.reset_for_fault(stream, reason, now)?
                }
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    fn frame(&mut self, header: &Header, payload: Bytes, now: Instant) -> Result<(), Error> {
        match frame::parse(header, &payload)? {
            Frame::Data {
                stream,
                data,
                end_stream,
                flow_len,
            } => {
                let at = data.as_ptr() as usize - payload.as_ptr() as usize;
                let data = payload.slice(at..at + data.len());
                self.data(stream, data, end_stream, flow_len, now)
            }
            Frame::Headers {
                stream,
                block,
                end_stream,
                end_headers,
                ..
            } => {
                if end_headers {
                    return self.header_block(stream, block, end_stream, now);
                }
                self.block = Some(Block {
                    stream,
                    end_stream,
                    bytes: block.to_vec(),
                });
                self.check_block_size()
            }
            Frame::Continuation {
                stream,
                block,
                end_headers,
            } => {
                let Some(mut pending) = self.block.take() else {
                    return Err(Error::protocol("CONTINUATION without a header block"));
                };
                if block.is_empty() && !end_headers && self.control.exceeded(now) {
                    return Err(calm("too many empty CONTINUATION frames"));
                }
                pending.bytes.extend_from_slice(block);
                if end_headers {
                    return self.header_block(stream, &pending.bytes, pending.end_stream, now);
                }
                self.block = Some(pending);
                self.check_block_size()
            }
            Frame::Priority { .. } => self.count_control(now),
            Frame::RstStream { stream, reason } => self.rst(stream, reason, now),
            Frame::Settings { ack: true, .. } => Ok(()),
            Frame::Settings {
                ack: false,
                settings,
            } => self.settings(settings, now),
            Frame::PushPromise { .. } => Err(Error::protocol("PUSH_PROMISE: push is not enabled")),
            Frame::Ping { ack: true, .. } => Ok(()),
            Frame::Ping { ack: false, data } => {
                self.count_control(now)?;
                frame::write_ping(&mut self.out, true, data);
                Ok(())
            }
            Frame::GoAway {
                last_stream,
                reason,
                ..
            } => {
                self.peer_goaway(last_stream, reason);
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => self.window_update(stream, increment),
            Frame::Unknown { .. } => Ok(()),
        }
    }

    /// A CONTINUATION flood (CVE-2024-27316) meets this bound: a block may
    /// grow to twice the header list limit and 16 KiB more, encoded (a
    /// head past the limit but within this still gets its 431).
    fn check_block_size(&self) -> Result<(), Error> {
        let max = 2 * self.config.max_header_list as usize + 16 * 1024;
        match self.block.as_ref().is_some_and(|b| b.bytes.len() > max) {
            true => Err(calm("a header block past its limit")),
            false => Ok(()),
        }
    }

    fn count_control(&mut self, now: Instant) -> Result<(), Error> {
        match self.control.exceeded(now) {
            true => Err(calm("too many control frames")),
            false => Ok(()),
        }
    }

    fn data(
        &mut self,
        stream: u32,
        data: Bytes,
        end_stream: bool,
        flow_len: u32,
        now: Instant,
    ) -> Result<(), Error> {
        let flow = i64::from(flow_len);
        self.recv_window -= flow;
        if self.recv_window < 0 {
            return Err(Error::Connection(
                Reason::FLOW_CONTROL_ERROR,
                "DATA past the connection window",
            ));
        }
        let remote = self.is_remote(stream);
        let Some(state) = self.streams.get(stream) else {
            self.release_connection(flow_len);
            if self.was_reset(stream) {
                return Ok(());
            }
            let idle = match remote {
                true => stream > self.last_remote,
                false => stream >= self.next_local,
            };
            return match idle {
                true => Err(Error::protocol("DATA on an idle stream")),
                false => Err(Error::Stream(
                    stream,
                    Reason::STREAM_CLOSED,
                    "DATA on a closed stream",
                )),
            };
        };
        state.recv_window -= flow;
        if state.recv_window < 0 {
            return Err(Error::Stream(
                stream,
                Reason::FLOW_CONTROL_ERROR,
                "DATA past the stream window",
            ));
        }
        if state.recv_closed {
            return Err(Error::Stream(
                stream,
                Reason::STREAM_CLOSED,
                "DATA after END_STREAM",
            ));
        }
        if !state.head_received {
            return Err(Error::Stream(
                stream,
                Reason::PROTOCOL_ERROR,
                "DATA before the head",
            ));
        }
        state.received += data.len() as u64;
        let length_broken = match state.content_length {
            Some(len) => state.received > len || (end_stream && state.received != len),
            None => false,
        };
        if length_broken {
            return Err(Error::Stream(
                stream,
                Reason::PROTOCOL_ERROR,
                "a body unlike its content-length",
            ));
        }
        state.recv_closed = end_stream;
        let discard = state.discard;
        // Padding is released at once: the application never sees it.
        let padding = flow_len - data.len() as u32;
        if data.is_empty() && !end_stream && self.control.exceeded(now) {
            return Err(calm("too many empty DATA frames"));
        }
        if discard {
            self.release(stream, flow_len);
        } else {
            if padding > 0 {
                self.release(stream, padding);
            }
            if !data.is_empty() || end_stream {
                self.events.push_back(Event::Data {
                    stream,
                    data,
                    end_stream,
                });
            }
        }
        if end_stream {
            self.streams.reap(stream, remote);
        }
        Ok(())
    }

    fn rst(&mut self, stream: u32, reason: Reason, now: Instant) -> Result<(), Error> {
        let remote = self.is_remote(stream);
        if self.streams.contains(stream) {
            self.streams.forget(stream, remote);
            self.events.push_back(Event::Reset { stream, reason });
            return Ok(());
        }
        let idle = match remote {
            true => stream > self.last_remote,
            false => stream >= self.next_local,
        };
        if idle {
            return Err(Error::protocol("RST_STREAM on an idle stream"));
        }
        // A reset for a stream already gone costs nothing but is counted.
        self.count_control(now)
    }

    fn settings(&mut self, payload: &[u8], now: Instant) -> Result<(), Error> {
        if !self.awaiting_settings {
            self.count_control(now)?;
        }
        self.awaiting_settings = false;
        for (id, value) in frame::settings(payload) {
            match id {
                frame::setting::ENABLE_PUSH if self.role == Role::Client && value == 1 => {
                    return Err(Error::protocol("a server enabled push"));
                }
                frame::setting::MAX_CONCURRENT_STREAMS => self.peer.max_concurrent_streams = value,
                frame::setting::INITIAL_WINDOW_SIZE => {
                    let delta = i64::from(value) - i64::from(self.peer.initial_window);
                    self.peer.initial_window = value;
                    let mut opened = Vec::new();
                    for (&id, state) in self.streams.iter_mut() {
                        let before = state.send_window;
                        state.send_window += delta;
                        if state.send_window > i64::from(frame::MAX_WINDOW) {
                            return Err(Error::Connection(
                                Reason::FLOW_CONTROL_ERROR,
                                "a stream window past 2^31-1",
                            ));
                        }
                        if before <= 0 && state.send_window > 0 {
                            opened.push(id);
                        }
                    }
                    self.events
                        .extend(opened.into_iter().map(|stream| Event::Writable { stream }));
                }
                frame::setting::MAX_FRAME_SIZE => self.peer.max_frame_size = value,
                _ => {}
            }
        }
        frame::write_settings_ack(&mut self.out);
        Ok(())
    }

    fn window_update(&mut self, stream: u32, increment: u32) -> Result<(), Error> {
        let increment = i64::from(increment);
        if stream == 0 {
            let before = self.send_window;
            self.send_window += increment;
            if self.send_window > i64::from(frame::MAX_WINDOW) {
                return Err(Error::Connection(
                    Reason::FLOW_CONTROL_ERROR,
                    "the connection window past 2^31-1",
                ));
            }
            if before <= 0 && self.send_window > 0 {
                self.events.push_back(Event::Writable { stream: 0 });
            }
            return Ok(());
        }
        let remote = self.is_remote(stream);
        let idle = match remote {
            true => stream > self.last_remote,
            false => stream >= self.next_local,
        };
        let Some(state) = self.streams.get(stream) else {
            return match idle {
                true => Err(Error::protocol("WINDOW_UPDATE on an idle stream")),
                false => Ok(()),
            };
        };
        let before = state.send_window;
        state.send_window += increment;
        if state.send_window > i64::from(frame::MAX_WINDOW) {
            return Err(Error::Stream(
                stream,
                Reason::FLOW_CONTROL_ERROR,
                "a stream window past 2^31-1",
            ));
        }
        if before <= 0 && state.send_window > 0 {
            self.events.push_back(Event::Writable { stream });
        }
        Ok(())
    }

    /// The peer's GOAWAY: this side's streams above `last_stream` were
    /// never processed, so they end now as REFUSED_STREAM (safe to send
    /// again elsewhere) instead of waiting for answers that cannot come.
    /// A later GOAWAY may lower the bound, never raise it (RFC 9113 6.8).
    fn peer_goaway(&mut self, last_stream: u32, reason: Reason) {
        let last = self
            .goaway_received
            .map_or(last_stream, |before| before.min(last_stream));
        self.goaway_received = Some(last);
        self.events.push_back(Event::GoAway {
            last_stream: last,
            reason,
        });
        let local_odd = self.role == Role::Client;
        let refused: Vec<u32> = self
            .streams
            .iter_mut()
            .map(|(&id, _)| id)
            .filter(|&id| (id % 2 == 1) == local_odd && id > last)
            .collect();
        for stream in refused {
            self.streams.forget(stream, false);
            self.events.push_back(Event::Reset {
                stream,
                reason: Reason::REFUSED_STREAM,
            });
        }
    }

    pub(super) fn remember_reset(&mut self, stream: u32) {
        if self.recent_resets.len() == REMEMBERED_RESETS {
            self.recent_resets.pop_front();
        }
        self.recent_resets.push_back(stream);
    }

    pub(super) fn was_reset(&self, stream: u32) -> bool {
        self.recent_resets.contains(&stream)
    }
}

pub(super) fn calm(what: &'static str) -> Error {
    Error::Connection(Reason::ENHANCE_YOUR_CALM, what)
}
