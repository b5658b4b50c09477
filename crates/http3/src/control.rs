//! The client's unidirectional streams (RFC 9114 6.2), decoded without
//! I/O: its control stream (SETTINGS first, then GOAWAY and MAX_PUSH_ID;
//! nothing that belongs on a request stream) and the stream types.

use bytes::{Buf, BytesMut};

use crate::{frame, varint, Code, Error};

pub const CONTROL: u64 = 0x00;
pub const PUSH: u64 = 0x01;
pub const QPACK_ENCODER: u64 = 0x02;
pub const QPACK_DECODER: u64 = 0x03;

/// The largest control frame payload read whole (SETTINGS, GOAWAY,
/// MAX_PUSH_ID); a larger one is H3_EXCESSIVE_LOAD. Unknown frames of any
/// size are skipped as they arrive.
const MAX_CONTROL_FRAME: u64 = 16 * 1024;

/// What the client's control stream said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlEvent {
    Settings(frame::Settings),
    /// The client's GOAWAY: the largest push ID it may still accept.
    GoAway(u64),
}

/// Decodes the client's control stream.
#[derive(Debug, Default)]
pub struct ControlStream {
    settings: bool,
    skip_left: u64,
}

impl ControlStream {
    /// The next event from `buf`, `None` when more bytes are needed.
    /// `fin`: the stream ended, which is H3_CLOSED_CRITICAL_STREAM.
    pub fn decode(&mut self, buf: &mut BytesMut, fin: bool) -> Result<Option<ControlEvent>, Error> {
        loop {
            if self.skip_left > 0 {
                let n = (buf.len() as u64).min(self.skip_left) as usize;
                buf.advance(n);
                self.skip_left -= n as u64;
            }
            let header = match (self.skip_left, frame::decode_header(buf)) {
                (0, Some(header)) => header,
                _ if fin => {
                    return Err(Error::Connection(
                        Code::H3_CLOSED_CRITICAL_STREAM,
                        "the control stream closed",
                    ))
                }
                _ => return Ok(None),
            };
            if !self.settings && header.kind != frame::SETTINGS {
                return Err(Error::Connection(
                    Code::H3_MISSING_SETTINGS,
                    "the control stream does not start with SETTINGS",
                ));
            }
            match header.kind {
                frame::SETTINGS | frame::GOAWAY | frame::MAX_PUSH_ID | frame::CANCEL_PUSH => {}
                frame::DATA | frame::HEADERS | frame::PUSH_PROMISE => {
                    return Err(Error::unexpected("a request frame on the control stream"))
                }
                kind if frame::is_http2_only(kind) => {
                    return Err(Error::unexpected("an HTTP/2 frame type"))
                }
                _ => {
                    buf.advance(header.size);
                    self.skip_left = header.len;
                    continue;
                }
            }
            if header.len > MAX_CONTROL_FRAME {
                return Err(Error::Connection(
                    Code::H3_EXCESSIVE_LOAD,
                    "a control frame past 16 KiB",
                ));
            }
            let whole = header.size + header.len as usize;
            if buf.len() < whole {
                return match fin {
                    true => Err(Error::Connection(
                        Code::H3_CLOSED_CRITICAL_STREAM,
                        "the control stream closed",
                    )),
                    false => Ok(None),
                };
            }
            buf.advance(header.size);
            let payload = buf.split_to(header.len as usize);
            match header.kind {
                frame::SETTINGS => {
                    if self.settings {
                        return Err(Error::unexpected("a second SETTINGS"));
                    }
                    self.settings = true;
                    let settings = frame::decode_settings(&payload)?;
                    return Ok(Some(ControlEvent::Settings(settings)));
                }
                frame::CANCEL_PUSH => {
                    // sluice never promises a push, so no push ID exists.
                    return Err(Error::Connection(
                        Code::H3_ID_ERROR,
                        "CANCEL_PUSH for a push never promised",
                    ));
                }
                _ => {
                    let (id, used) = varint::decode(&payload).ok_or(Error::Connection(
                        Code::H3_FRAME_ERROR,
                        "a GOAWAY or MAX_PUSH_ID without its ID",
                    ))?;
                    if used != payload.len() {
                        return Err(Error::Connection(
                            Code::H3_FRAME_ERROR,
                            "a GOAWAY or MAX_PUSH_ID with bytes after its ID",
                        ));
                    }
                    if header.kind == frame::GOAWAY {
                        return Ok(Some(ControlEvent::GoAway(id)));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_of(kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        frame::encode_header(kind, payload.len() as u64, &mut out);
        out.extend_from_slice(payload);
        out
    }

    fn run(bytes: &[u8], fin: bool) -> Result<Vec<ControlEvent>, Error> {
        let mut stream = ControlStream::default();
        let mut buf = BytesMut::from(bytes);
        let mut out = Vec::new();
        while let Some(event) = stream.decode(&mut buf, fin)? {
            out.push(event);
        }
        Ok(out)
    }

    fn code(result: Result<Vec<ControlEvent>, Error>) -> Option<Code> {
        match result {
            Err(Error::Connection(code, _)) => Some(code),
            _ => None,
        }
    }

    #[test]
    fn settings_then_goaway_and_unknown_frames_skipped() {
        let mut bytes = frame_of(frame::SETTINGS, &[0x06, 0x44, 0x00]);
        bytes.extend(frame_of(0x21, &[0; 40_000]));
        bytes.extend(frame_of(frame::MAX_PUSH_ID, &[0x05]));
        bytes.extend(frame_of(frame::GOAWAY, &[0x00]));
        let events = run(&bytes, false).expect("valid");
        assert_eq!(events.len(), 2);
        assert!(
            matches!(events[0], ControlEvent::Settings(s) if s.max_field_section_size == Some(1024))
        );
        assert_eq!(events[1], ControlEvent::GoAway(0));
    }

    #[test]
    fn control_stream_errors() {
        let settings = frame_of(frame::SETTINGS, &[]);
        assert_eq!(
            code(run(&frame_of(frame::GOAWAY, &[0]), false)),
            Some(Code::H3_MISSING_SETTINGS)
        );
        let twice = [settings.clone(), settings.clone()].concat();
        assert_eq!(code(run(&twice, false)), Some(Code::H3_FRAME_UNEXPECTED));
        for kind in [
            frame::DATA,
            frame::HEADERS,
            frame::PUSH_PROMISE,
            0x2,
            0x6,
            0x8,
            0x9,
        ] {
            let bytes = [settings.clone(), frame_of(kind, &[0])].concat();
            assert_eq!(
                code(run(&bytes, false)),
                Some(Code::H3_FRAME_UNEXPECTED),
                "{kind:#x}"
            );
        }
        let cancel = [settings.clone(), frame_of(frame::CANCEL_PUSH, &[1])].concat();
        assert_eq!(code(run(&cancel, false)), Some(Code::H3_ID_ERROR));
        assert_eq!(
            code(run(&settings, true)),
            Some(Code::H3_CLOSED_CRITICAL_STREAM)
        );
        let huge = [settings.clone(), {
            let mut h = Vec::new();
            frame::encode_header(frame::GOAWAY, 1 << 20, &mut h);
            h
        }]
        .concat();
        assert_eq!(code(run(&huge, false)), Some(Code::H3_EXCESSIVE_LOAD));
        let goaway_extra = [settings, frame_of(frame::GOAWAY, &[0, 0])].concat();
        assert_eq!(code(run(&goaway_extra, false)), Some(Code::H3_FRAME_ERROR));
    }
}
