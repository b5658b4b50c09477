//! HTTP/3 and QPACK error codes (RFC 9114 8.1, RFC 9204 6), and what a
//! decoder says went wrong: the whole connection, or one stream.

use std::fmt;

/// An application error code carried by CONNECTION_CLOSE, RESET_STREAM or
/// STOP_SENDING.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Code(pub u64);

impl Code {
    pub const H3_NO_ERROR: Self = Self(0x100);
    pub const H3_GENERAL_PROTOCOL_ERROR: Self = Self(0x101);
    pub const H3_INTERNAL_ERROR: Self = Self(0x102);
    pub const H3_STREAM_CREATION_ERROR: Self = Self(0x103);
    pub const H3_CLOSED_CRITICAL_STREAM: Self = Self(0x104);
    pub const H3_FRAME_UNEXPECTED: Self = Self(0x105);
    pub const H3_FRAME_ERROR: Self = Self(0x106);
    pub const H3_EXCESSIVE_LOAD: Self = Self(0x107);
    pub const H3_ID_ERROR: Self = Self(0x108);
    pub const H3_SETTINGS_ERROR: Self = Self(0x109);
    pub const H3_MISSING_SETTINGS: Self = Self(0x10a);
    pub const H3_REQUEST_REJECTED: Self = Self(0x10b);
    pub const H3_REQUEST_CANCELLED: Self = Self(0x10c);
    pub const H3_REQUEST_INCOMPLETE: Self = Self(0x10d);
    pub const H3_MESSAGE_ERROR: Self = Self(0x10e);
    pub const QPACK_DECOMPRESSION_FAILED: Self = Self(0x200);
    pub const QPACK_ENCODER_STREAM_ERROR: Self = Self(0x201);
    pub const QPACK_DECODER_STREAM_ERROR: Self = Self(0x202);

    /// The code as quinn takes it.
    pub fn varint(self) -> quinn::VarInt {
        quinn::VarInt::from_u64(self.0).unwrap_or(quinn::VarInt::MAX)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match *self {
            Self::H3_NO_ERROR => "H3_NO_ERROR",
            Self::H3_GENERAL_PROTOCOL_ERROR => "H3_GENERAL_PROTOCOL_ERROR",
            Self::H3_INTERNAL_ERROR => "H3_INTERNAL_ERROR",
            Self::H3_STREAM_CREATION_ERROR => "H3_STREAM_CREATION_ERROR",
            Self::H3_CLOSED_CRITICAL_STREAM => "H3_CLOSED_CRITICAL_STREAM",
            Self::H3_FRAME_UNEXPECTED => "H3_FRAME_UNEXPECTED",
            Self::H3_FRAME_ERROR => "H3_FRAME_ERROR",
            Self::H3_EXCESSIVE_LOAD => "H3_EXCESSIVE_LOAD",
            Self::H3_ID_ERROR => "H3_ID_ERROR",
            Self::H3_SETTINGS_ERROR => "H3_SETTINGS_ERROR",
            Self::H3_MISSING_SETTINGS => "H3_MISSING_SETTINGS",
            Self::H3_REQUEST_REJECTED => "H3_REQUEST_REJECTED",
            Self::H3_REQUEST_CANCELLED => "H3_REQUEST_CANCELLED",
            Self::H3_REQUEST_INCOMPLETE => "H3_REQUEST_INCOMPLETE",
            Self::H3_MESSAGE_ERROR => "H3_MESSAGE_ERROR",
            Self::QPACK_DECOMPRESSION_FAILED => "QPACK_DECOMPRESSION_FAILED",
            Self::QPACK_ENCODER_STREAM_ERROR => "QPACK_ENCODER_STREAM_ERROR",
            Self::QPACK_DECODER_STREAM_ERROR => "QPACK_DECODER_STREAM_ERROR",
            Self(other) => return write!(f, "{other:#x}"),
        };
        f.write_str(name)
    }
}

/// What a decoder found wrong, and how far it reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The connection must close with this code (a frame out of place, a
    /// broken QPACK instruction, a critical stream closed).
    Connection(Code, &'static str),
    /// This stream is refused with this code (a malformed request,
    /// RFC 9114 4.1.2); the connection serves on.
    Stream(Code, &'static str),
    /// The request head is larger than the advertised
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: answered 431, the connection serves on.
    HeadTooLarge,
}

impl Error {
    pub(crate) fn message(what: &'static str) -> Self {
        Self::Stream(Code::H3_MESSAGE_ERROR, what)
    }

    pub(crate) fn unexpected(what: &'static str) -> Self {
        Self::Connection(Code::H3_FRAME_UNEXPECTED, what)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Connection(code, what) => write!(f, "connection error {code}: {what}"),
            Self::Stream(code, what) => write!(f, "stream error {code}: {what}"),
            Self::HeadTooLarge => f.write_str("request head larger than the field section limit"),
        }
    }
}

impl std::error::Error for Error {}
