//! One HTTP/2 connection, either side, without I/O (RFC 9113 3-6): fed
//! the bytes that arrived ([`Connection::recv`]), it parses frames,
//! decodes heads, keeps the streams' states and both directions' flow
//! control, checks every rule and flood limit, queues what the
//! application must hear ([`Connection::poll_event`]) and writes what the
//! peer must hear (acknowledgements, window updates, resets, GOAWAY) into
//! its output buffer, which the application's sends also fill
//! ([`Connection::output`]). Streams are entries in a table, not tasks;
//! nothing here waits or allocates per frame.

mod guard;
mod heads;
mod recv;
mod send;
mod streams;

pub use send::OpenError;

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

use bytes::Bytes;
use fieldcoding::head::{FieldSection, RequestHead};

use crate::{frame, hpack, Error, Reason};
use guard::Counter;
use streams::Streams;

/// The client connection preface (RFC 9113 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Interim (1xx) heads a response may have before its final one; past
/// this the stream ends (PROTOCOL_ERROR), so an upstream cannot keep a
/// stream, and the client it is relayed to, busy with them forever.
pub const MAX_INTERIM_HEADS: usize = 16;

/// Which side of the connection this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Serves requests the peer opens (odd stream IDs).
    Server,
    /// Opens requests (odd stream IDs) to a server.
    Client,
}

/// What this side advertises and enforces.
#[derive(Debug, Clone)]
pub struct Config {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams the peer may have open.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: what the peer may send ahead per stream.
    pub stream_window: u32,
    /// What the peer may send ahead on the whole connection.
    pub connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: a larger head is refused (431 for
    /// a request).
    pub max_header_list: u32,
    /// Huffman-code the strings of heads this side sends, where shorter.
    pub huffman: bool,
    /// PING, SETTINGS, PRIORITY, empty DATA and no-op WINDOW_UPDATE
    /// frames the peer may send per `guard_window`.
    pub max_control_frames: u32,
    /// Streams this side may reset for the peer's faults per `guard_window`.
    pub max_local_resets: u32,
    pub guard_window: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 100,
            stream_window: 256 * 1024,
            connection_window: 1024 * 1024,
            max_frame_size: frame::DEFAULT_MAX_FRAME,
            max_header_list: 16 * 1024,
            huffman: false,
            max_control_frames: 1000,
            max_local_resets: 100,
            guard_window: Duration::from_secs(10),
        }
    }
}

/// What the peer's frames mean for the application, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// A server's new request (well-formed: `fieldcoding::head` rules).
    Request {
        stream: u32,
        head: Box<RequestHead>,
        end_stream: bool,
    },
    /// A client's response head: an interim one (1xx) or the final one.
    Response {
        stream: u32,
        status: u16,
        fields: FieldSection,
        end_stream: bool,
    },
    /// A request head past SETTINGS_MAX_HEADER_LIST_SIZE: answer 431 (the
    /// stream is open for the answer; its body, if any, is discarded).
    HeadTooLarge {
        stream: u32,
    },
    /// Body bytes; [`Connection::release`] them once consumed, which lets
    /// the peer send more.
    Data {
        stream: u32,
        data: Bytes,
        end_stream: bool,
    },
    Trailers {
        stream: u32,
        fields: FieldSection,
    },
    /// The peer reset the stream, or this side did for a fault of the
    /// peer's (malformed, flow control): its work should stop.
    Reset {
        stream: u32,
        reason: Reason,
    },
    /// The stream (0: the connection) may take more DATA.
    Writable {
        stream: u32,
    },
    /// The peer sent GOAWAY: streams above `last_stream` were not processed.
    GoAway {
        last_stream: u32,
        reason: Reason,
    },
}

/// One HTTP/2 connection.
#[derive(Debug)]
pub struct Connection {
    role: Role,
    config: Config,
    /// Server: the client's preface has not been read yet.
    awaiting_preface: bool,
    /// The peer's first SETTINGS has not arrived yet.
    awaiting_settings: bool,
    decoder: hpack::Decoder,
    /// The size update (to 0) sent at the start of the first head, so the
    /// peer's decoder never holds a table for this side.
    table_update_sent: bool,
    peer: PeerSettings,
    streams: Streams,
    /// The highest stream ID the peer opened, and the next this side opens.
    last_remote: u32,
    next_local: u32,
    send_window: i64,
    recv_window: i64,
    recv_released: u32,
    /// A header block in progress (HEADERS without END_HEADERS).
    block: Option<Block>,
    control: Counter,
    local_resets: Counter,
    goaway_sent: Option<u32>,
    goaway_received: Option<u32>,
    /// Streams this side reset lately (`recv::REMEMBERED_RESETS` of them).
    recent_resets: VecDeque<u32>,
    events: VecDeque<Event>,
    out: Vec<u8>,
}

/// What the peer advertised.
#[derive(Debug, Clone, Copy)]
struct PeerSettings {
    max_concurrent_streams: u32,
    initial_window: u32,
    max_frame_size: u32,
}

/// A header block being gathered from HEADERS and CONTINUATION frames.
#[derive(Debug)]
struct Block {
    stream: u32,
    end_stream: bool,
    bytes: Vec<u8>,
}

impl Connection {
    /// A connection on `role`'s side. Its output starts with what that
    /// side sends first: the client's preface and SETTINGS, or the
    /// server's SETTINGS (and window update, when the connection window
    /// is larger than the default).
    pub fn new(role: Role, config: Config) -> Self {
        let mut out = Vec::with_capacity(128);
        if role == Role::Client {
            out.extend_from_slice(PREFACE);
        }
        let mut settings = vec![
            (
                frame::setting::MAX_CONCURRENT_STREAMS,
                config.max_concurrent_streams,
            ),
            (frame::setting::INITIAL_WINDOW_SIZE, config.stream_window),
            (frame::setting::MAX_FRAME_SIZE, config.max_frame_size),
            (frame::setting::MAX_HEADER_LIST_SIZE, config.max_header_list),
        ];
        if role == Role::Client {
            settings.push((frame::setting::ENABLE_PUSH, 0));
        }
        frame::write_settings(&mut out, &settings);
        let default_window = 65_535;
        if config.connection_window > default_window {
            frame::write_window_update(&mut out, 0, config.connection_window - default_window);
        }
        Self {
            role,
            awaiting_preface: role == Role::Server,
            awaiting_settings: true,
            decoder: hpack::Decoder::new(4096),
            table_update_sent: false,
            peer: PeerSettings {
                max_concurrent_streams: u32::MAX,
                initial_window: default_window,
                max_frame_size: frame::DEFAULT_MAX_FRAME,
            },
            streams: Streams::default(),
            last_remote: 0,
            next_local: 1,
            send_window: i64::from(default_window),
            recv_window: i64::from(config.connection_window.max(default_window)),
            recv_released: 0,
            block: None,
            control: Counter::new(config.max_control_frames, config.guard_window),
            local_resets: Counter::new(config.max_local_resets, config.guard_window),
            goaway_sent: None,
            goaway_received: None,
            recent_resets: VecDeque::new(),
            events: VecDeque::new(),
            out,
            config,
        }
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// The next event for the application, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Bytes to write to the peer; the application drains what it wrote.
    pub fn output(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Streams open now (the peer's and this side's).
    pub fn open_streams(&self) -> usize {
        self.streams.remote_open + self.streams.local_open
    }

    /// Whether GOAWAY was sent or received: no new stream will start.
    pub fn going_away(&self) -> bool {
        self.goaway_sent.is_some() || self.goaway_received.is_some()
    }

    /// A connection error: GOAWAY with its code is written (the
    /// application sends it, then closes).
    fn fail(&mut self, err: Error) -> Error {
        if let Error::Connection(reason, what) = err {
            let last = self.last_remote;
            frame::write_goaway(&mut self.out, last, reason, what.as_bytes());
            self.goaway_sent = Some(last);
        }
        err
    }

    /// A stream error: RST_STREAM, the stream closed, and the application
    /// told; counted against `max_local_resets` (MadeYouReset), past
    /// which the connection ends.
    fn reset_for_fault(&mut self, stream: u32, reason: Reason, now: Instant) -> Result<(), Error> {
        frame::write_rst_stream(&mut self.out, stream, reason);
        self.remember_reset(stream);
        if let Some(state) = self.streams.get(stream) {
            // It holds its slot until the application's work on it has
            // ended ([`Connection::done`]): a peer cannot open more work
            // than the limit by making this side reset streams.
            state.recv_closed = true;
            state.send_closed = true;
            state.locally_reset = true;
            self.events.push_back(Event::Reset { stream, reason });
        }
        if self.local_resets.exceeded(now) {
            return Err(Error::Connection(
                Reason::ENHANCE_YOUR_CALM,
                "too many streams reset for the peer's faults",
            ));
        }
        Ok(())
    }

    fn is_remote(&self, stream: u32) -> bool {
        // Client-initiated streams are odd: the server's remote ones.
        (stream % 2 == 1) == (self.role == Role::Server)
    }
}

#[cfg(test)]
mod tests;
