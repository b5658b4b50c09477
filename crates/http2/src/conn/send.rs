//! The sending half of a connection: heads written straight into the
//! output buffer (HPACK without a table, CONTINUATION past the peer's
//! frame size), DATA within both windows, trailers, resets, window
//! updates for what the application has consumed, GOAWAY.

use bytes::Bytes;

use super::{streams::Stream, Connection, Role};
use crate::{frame, hpack, Reason};

/// Why a request could not be opened (client side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    /// The server's MAX_CONCURRENT_STREAMS is reached: wait for a stream
    /// to end, or use another connection.
    Full,
    /// GOAWAY was sent or received, or stream IDs ran out.
    GoingAway,
}

impl Connection {
    /// Server: the answer's head on `stream` (an interim one when 1xx).
    pub fn send_response<'a>(
        &mut self,
        stream: u32,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) {
        let huffman = self.config.huffman;
        if status >= 200 {
            if let Some(state) = self.streams.get(stream) {
                state.head_sent = true;
            }
        }
        self.write_head(stream, end_stream, |out| {
            hpack::encode_response(status, fields, huffman, out)
        });
    }

    /// Client: opens a stream with a request head; its ID.
    pub fn send_request<'a>(
        &mut self,
        pseudo: [(&'static [u8], Option<&[u8]>); 4],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) -> Result<u32, OpenError> {
        debug_assert_eq!(self.role, Role::Client);
        if self.going_away() || self.next_local > frame::MAX_WINDOW {
            return Err(OpenError::GoingAway);
        }
        if self.streams.local_open >= self.peer.max_concurrent_streams as usize {
            return Err(OpenError::Full);
        }
        let stream = self.next_local;
        self.next_local += 2;
        let mut state = Stream::new(self.peer.initial_window, self.config.stream_window);
        state.send_closed = end_stream;
        self.streams.insert(stream, state, false);
        let huffman = self.config.huffman;
        self.write_head(stream, end_stream, |out| {
            hpack::encode_request(pseudo, fields, huffman, out)
        });
        Ok(stream)
    }

    /// Sends trailers, which end the stream.
    pub fn send_trailers<'a>(
        &mut self,
        stream: u32,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) {
        let huffman = self.config.huffman;
        self.write_head(stream, true, |out| {
            for (name, value) in fields {
                hpack::encode_field(name, value, huffman, out);
            }
        });
    }

    /// Writes a header block for `stream`: HEADERS (and CONTINUATION
    /// frames past the peer's frame size), the block encoded in place.
    fn write_head(&mut self, stream: u32, end_stream: bool, encode: impl FnOnce(&mut Vec<u8>)) {
        let start = self.out.len();
        frame::write_header(&mut self.out, frame::HEADERS, 0, stream, 0);
        let block = self.out.len();
        if !self.table_update_sent {
            // A dynamic table size update to 0: this side keeps no table,
            // whatever SETTINGS_HEADER_TABLE_SIZE the peer gave.
            self.out.push(0x20);
            self.table_update_sent = true;
        }
        encode(&mut self.out);
        let len = self.out.len() - block;
        let max = self.peer.max_frame_size as usize;
        if len <= max {
            let flags = frame::END_HEADERS | if end_stream { frame::END_STREAM } else { 0 };
            self.out[start..block].copy_from_slice(&header_bytes(
                frame::HEADERS,
                flags,
                stream,
                len,
            ));
        } else {
            let encoded = self.out.split_off(block);
            self.out.truncate(start);
            frame::write_headers(&mut self.out, stream, &encoded, end_stream, max);
        }
        if end_stream {
            self.end_sending(stream);
        }
    }

    /// Sends as much of `data` as both windows and the peer's frame size
    /// allow, taking it from the front of `data`; END_STREAM goes with the
    /// last byte when `end_stream`. Returns the bytes sent: less than all
    /// means wait for [`super::Event::Writable`].
    pub fn send_data(&mut self, stream: u32, data: &mut Bytes, end_stream: bool) -> usize {
        let max_frame = self.peer.max_frame_size as usize;
        let mut sent = 0;
        loop {
            let Some(state) = self.streams.get(stream) else {
                return sent;
            };
            if state.send_closed {
                return sent;
            }
            let room = state.send_window.min(self.send_window).max(0) as usize;
            let take = data.len().min(room).min(max_frame);
            if take == 0 && !(data.is_empty() && end_stream) {
                return sent;
            }
            state.send_window -= take as i64;
            self.send_window -= take as i64;
            let chunk = data.split_to(take);
            let last = end_stream && data.is_empty();
            frame::write_data_header(&mut self.out, stream, take, last);
            self.out.extend_from_slice(&chunk);
            sent += take;
            if last {
                self.end_sending(stream);
                return sent;
            }
            if data.is_empty() {
                return sent;
            }
        }
    }

    /// How many bytes `stream` may send now.
    pub fn send_window(&mut self, stream: u32) -> usize {
        let connection = self.send_window;
        self.streams
            .get(stream)
            .map_or(0, |s| s.send_window.min(connection).max(0) as usize)
    }

    fn end_sending(&mut self, stream: u32) {
        let remote = self.is_remote(stream);
        if let Some(state) = self.streams.get(stream) {
            state.send_closed = true;
        }
        self.streams.reap(stream, remote);
    }

    /// Abandons `stream` with `reason` (the application's choice: CANCEL
    /// for a client gone, NO_ERROR after a complete answer to a request
    /// still sending).
    pub fn reset(&mut self, stream: u32, reason: Reason) {
        let remote = self.is_remote(stream);
        if self.streams.contains(stream) {
            frame::write_rst_stream(&mut self.out, stream, reason);
            self.remember_reset(stream);
            self.streams.forget(stream, remote);
        }
    }

    /// The application's work on a stream this side reset for the peer's
    /// fault has ended: its slot is free.
    pub fn done(&mut self, stream: u32) {
        let remote = self.is_remote(stream);
        if self.streams.get(stream).is_some_and(|s| s.locally_reset) {
            self.streams.forget(stream, remote);
        }
    }

    /// `n` bytes of `stream`'s DATA were consumed: once half a window has
    /// been, it is granted back (one WINDOW_UPDATE for many DATA frames).
    pub fn release(&mut self, stream: u32, n: u32) {
        self.release_connection(n);
        let threshold = self.config.stream_window / 2;
        let Some(state) = self.streams.get(stream) else {
            return;
        };
        state.recv_released += n;
        if state.recv_released >= threshold && !state.recv_closed {
            let grant = state.recv_released;
            state.recv_released = 0;
            state.recv_window += i64::from(grant);
            frame::write_window_update(&mut self.out, stream, grant);
        }
    }

    pub(super) fn release_connection(&mut self, n: u32) {
        self.recv_released += n;
        let window = self.config.connection_window.max(65_535);
        if self.recv_released >= window / 2 {
            let grant = self.recv_released;
            self.recv_released = 0;
            self.recv_window += i64::from(grant);
            frame::write_window_update(&mut self.out, 0, grant);
        }
    }

    /// GOAWAY: the streams the peer opened so far are served; no new one.
    pub fn goaway(&mut self, reason: Reason) {
        if self.goaway_sent.is_none() {
            let last = self.last_remote;
            frame::write_goaway(&mut self.out, last, reason, b"");
            self.goaway_sent = Some(last);
        }
    }
}

fn header_bytes(kind: u8, flags: u8, stream: u32, len: usize) -> [u8; frame::HEADER_LEN] {
    let mut bytes = [0; frame::HEADER_LEN];
    bytes[..3].copy_from_slice(&(len as u32).to_be_bytes()[1..]);
    bytes[3] = kind;
    bytes[4] = flags;
    bytes[5..].copy_from_slice(&stream.to_be_bytes());
    bytes
}
