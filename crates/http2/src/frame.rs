//! HTTP/2 frames (RFC 9113 4, 6): the 9-byte header, each type's payload
//! read with the checks its section makes (lengths, stream IDs, padding,
//! setting values), and writers that append a frame to an output buffer.
//! Nothing is allocated: a parsed frame borrows its payload.

use crate::{Error, Reason};

pub const HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE's floor and default (RFC 9113 6.5.2).
pub const DEFAULT_MAX_FRAME: u32 = 16_384;
pub const MAX_MAX_FRAME: u32 = (1 << 24) - 1;
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// A frame's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    /// The reserved bit cleared.
    pub stream: u32,
}

impl Header {
    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Self {
        Self {
            len: u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]),
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & MAX_WINDOW,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.len.to_be_bytes()[1..]);
        out.push(self.kind);
        out.push(self.flags);
        out.extend_from_slice(&self.stream.to_be_bytes());
    }

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// One setting (RFC 9113 6.5.2).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// A parsed frame; its payload borrowed from the input.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Data {
        stream: u32,
        data: &'a [u8],
        end_stream: bool,
        flow_len: u32,
    },
    Headers {
        stream: u32,
        block: &'a [u8],
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    RstStream {
        stream: u32,
        reason: Reason,
    },
    Settings {
        ack: bool,
        settings: &'a [u8],
    },
    PushPromise {
        stream: u32,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        reason: Reason,
        debug: &'a [u8],
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        block: &'a [u8],
        end_headers: bool,
    },
    /// A type this codec does not know: ignored (RFC 9113 5.5).
    Unknown {
        kind: u8,
        stream: u32,
    },
}

/// Stream dependency and weight (deprecated by RFC 9113 5.3.2, still read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub depends_on: u32,
    pub exclusive: bool,
    pub weight: u8,
}

/// Parses `payload` as the frame `header` describes. The caller has
/// checked the length against its SETTINGS_MAX_FRAME_SIZE.
pub fn parse<'a>(header: &Header, payload: &'a [u8]) -> Result<Frame<'a>, Error> {
    debug_assert_eq!(payload.len(), header.len as usize);
    let stream = header.stream;
    let on_stream = |what| {
        if stream == 0 {
            Err(Error::protocol(what))
        } else {
            Ok(())
        }
    };
    let on_connection = |what| {
        if stream != 0 {
            Err(Error::protocol(what))
        } else {
            Ok(())
        }
    };
    match header.kind {
        DATA => {
            on_stream("DATA on stream 0")?;
            let data = unpad(header, payload)?;
            Ok(Frame::Data {
                stream,
                data,
                end_stream: header.has(END_STREAM),
                flow_len: header.len,
            })
        }
        HEADERS => {
            on_stream("HEADERS on stream 0")?;
            let mut block = unpad(header, payload)?;
            let priority = match header.has(PRIORITY_FLAG) {
                true => {
                    let (fields, rest) = block
                        .split_first_chunk::<5>()
                        .ok_or(Error::frame_size("HEADERS too short for its priority"))?;
                    block = rest;
                    Some(priority(stream, fields)?)
                }
                false => None,
            };
            Ok(Frame::Headers {
                stream,
                block,
                end_stream: header.has(END_STREAM),
                end_headers: header.has(END_HEADERS),
                priority,
            })
        }
        PRIORITY => {
            on_stream("PRIORITY on stream 0")?;
            let fields: &[u8; 5] = payload.try_into().map_err(|_| {
                Error::Stream(
                    stream,
                    Reason::FRAME_SIZE_ERROR,
                    "PRIORITY of a length other than 5",
                )
            })?;
            Ok(Frame::Priority {
                stream,
                priority: priority(stream, fields)?,
            })
        }
        RST_STREAM => {
            on_stream("RST_STREAM on stream 0")?;
            let code: [u8; 4] = payload
                .try_into()
                .map_err(|_| Error::frame_size("RST_STREAM of a length other than 4"))?;
            Ok(Frame::RstStream {
                stream,
                reason: Reason(u32::from_be_bytes(code)),
            })
        }
        SETTINGS => {
            on_connection("SETTINGS on a stream")?;
            let ack = header.has(ACK);
            if ack && !payload.is_empty() {
                return Err(Error::frame_size("a SETTINGS ack with a payload"));
            }
            if !payload.len().is_multiple_of(6) {
                return Err(Error::frame_size("SETTINGS not a multiple of 6 bytes"));
            }
            for (id, value) in settings(payload) {
                check_setting(id, value)?;
            }
            Ok(Frame::Settings {
                ack,
                settings: payload,
            })
        }
        PUSH_PROMISE => {
            on_stream("PUSH_PROMISE on stream 0")?;
            Ok(Frame::PushPromise { stream })
        }
        PING => {
            on_connection("PING on a stream")?;
            let data: [u8; 8] = payload
                .try_into()
                .map_err(|_| Error::frame_size("PING of a length other than 8"))?;
            Ok(Frame::Ping {
                ack: header.has(ACK),
                data,
            })
        }
        GOAWAY => {
            on_connection("GOAWAY on a stream")?;
            if payload.len() < 8 {
                return Err(Error::frame_size("GOAWAY shorter than 8 bytes"));
            }
            let last =
                u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & MAX_WINDOW;
            let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
            Ok(Frame::GoAway {
                last_stream: last,
                reason: Reason(code),
                debug: &payload[8..],
            })
        }
        WINDOW_UPDATE => {
            let bytes: [u8; 4] = payload
                .try_into()
                .map_err(|_| Error::frame_size("WINDOW_UPDATE of a length other than 4"))?;
            let increment = u32::from_be_bytes(bytes) & MAX_WINDOW;
            if increment == 0 {
                return Err(match stream {
                    0 => Error::protocol("a WINDOW_UPDATE of 0 on the connection"),
                    _ => Error::Stream(stream, Reason::PROTOCOL_ERROR, "a WINDOW_UPDATE of 0"),
                });
            }
            Ok(Frame::WindowUpdate { stream, increment })
        }
        CONTINUATION => {
            on_stream("CONTINUATION on stream 0")?;
            Ok(Frame::Continuation {
                stream,
                block: payload,
                end_headers: header.has(END_HEADERS),
            })
        }
        kind => Ok(Frame::Unknown { kind, stream }),
    }
}

/// The payload without its padding (RFC 9113 6.1, 6.2).
fn unpad<'a>(header: &Header, payload: &'a [u8]) -> Result<&'a [u8], Error> {
    if !header.has(PADDED) {
        return Ok(payload);
    }
    let (&pad, rest) = payload
        .split_first()
        .ok_or(Error::frame_size("a padded frame without its pad length"))?;
    rest.len()
        .checked_sub(pad as usize)
        .map(|end| &rest[..end])
        .ok_or(Error::protocol("padding as long as the payload or longer"))
}

fn priority(stream: u32, fields: &[u8; 5]) -> Result<Priority, Error> {
    let word = u32::from_be_bytes([fields[0], fields[1], fields[2], fields[3]]);
    let depends_on = word & MAX_WINDOW;
    if depends_on == stream {
        return Err(Error::Stream(
            stream,
            Reason::PROTOCOL_ERROR,
            "a stream that depends on itself",
        ));
    }
    Ok(Priority {
        depends_on,
        exclusive: word >> 31 == 1,
        weight: fields[4],
    })
}

/// A SETTINGS payload's (identifier, value) pairs.
pub fn settings(payload: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    payload.chunks_exact(6).map(|c| {
        (
            u16::from_be_bytes([c[0], c[1]]),
            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
        )
    })
}

fn check_setting(id: u16, value: u32) -> Result<(), Error> {
    match id {
        setting::ENABLE_PUSH if value > 1 => Err(Error::protocol("ENABLE_PUSH other than 0 or 1")),
        setting::INITIAL_WINDOW_SIZE if value > MAX_WINDOW => Err(Error::Connection(
            Reason::FLOW_CONTROL_ERROR,
            "INITIAL_WINDOW_SIZE past 2^31-1",
        )),
        setting::MAX_FRAME_SIZE if !(DEFAULT_MAX_FRAME..=MAX_MAX_FRAME).contains(&value) => {
            Err(Error::protocol("MAX_FRAME_SIZE outside 16384..2^24-1"))
        }
        _ => Ok(()),
    }
}

/// Appends a frame header and reserves nothing: the caller writes the
/// payload of `len` bytes next.
pub fn write_header(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, len: usize) {
    Header {
        len: len as u32,
        kind,
        flags,
        stream,
    }
    .encode(out);
}

/// Appends a SETTINGS frame.
pub fn write_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    write_header(out, SETTINGS, 0, 0, settings.len() * 6);
    for (id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_header(out, SETTINGS, ACK, 0, 0);
}

pub fn write_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    write_header(out, PING, if ack { ACK } else { 0 }, 0, 8);
    out.extend_from_slice(&data);
}

pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_header(out, WINDOW_UPDATE, 0, stream, 4);
    out.extend_from_slice(&increment.to_be_bytes());
}

pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, reason: Reason) {
    write_header(out, RST_STREAM, 0, stream, 4);
    out.extend_from_slice(&reason.0.to_be_bytes());
}

pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, reason: Reason, debug: &[u8]) {
    write_header(out, GOAWAY, 0, 0, 8 + debug.len());
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&reason.0.to_be_bytes());
    out.extend_from_slice(debug);
}

/// Appends a DATA frame's header; the caller appends (or sends beside it)
/// `len` bytes of data.
pub fn write_data_header(out: &mut Vec<u8>, stream: u32, len: usize, end_stream: bool) {
    write_header(
        out,
        DATA,
        if end_stream { END_STREAM } else { 0 },
        stream,
        len,
    );
}

/// Appends a header block as HEADERS and as many CONTINUATION frames as
/// `max_frame` needs.
pub fn write_headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let max_frame = max_frame.max(1);
    let mut chunks = block.chunks(max_frame).peekable();
    let first = chunks.next().unwrap_or(&[]);
    let last = chunks.peek().is_none();
    let flags = if end_stream { END_STREAM } else { 0 } | if last { END_HEADERS } else { 0 };
    write_header(out, HEADERS, flags, stream, first.len());
    out.extend_from_slice(first);
    while let Some(chunk) = chunks.next() {
        let flags = if chunks.peek().is_none() {
            END_HEADERS
        } else {
            0
        };
        write_header(out, CONTINUATION, flags, stream, chunk.len());
        out.extend_from_slice(chunk);
    }
}

#[cfg(test)]
mod tests;
