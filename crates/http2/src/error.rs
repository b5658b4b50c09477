//! HTTP/2 error codes (RFC 9113 7) and how far an error reaches.

use std::fmt;

/// An error code of RST_STREAM and GOAWAY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reason(pub u32);

impl Reason {
    pub const NO_ERROR: Self = Self(0x0);
    pub const PROTOCOL_ERROR: Self = Self(0x1);
    pub const INTERNAL_ERROR: Self = Self(0x2);
    pub const FLOW_CONTROL_ERROR: Self = Self(0x3);
    pub const SETTINGS_TIMEOUT: Self = Self(0x4);
    pub const STREAM_CLOSED: Self = Self(0x5);
    pub const FRAME_SIZE_ERROR: Self = Self(0x6);
    pub const REFUSED_STREAM: Self = Self(0x7);
    pub const CANCEL: Self = Self(0x8);
    pub const COMPRESSION_ERROR: Self = Self(0x9);
    pub const CONNECT_ERROR: Self = Self(0xa);
    pub const ENHANCE_YOUR_CALM: Self = Self(0xb);
    pub const INADEQUATE_SECURITY: Self = Self(0xc);
    pub const HTTP_1_1_REQUIRED: Self = Self(0xd);
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        match NAMES.get(self.0 as usize) {
            Some(name) => f.write_str(name),
            None => write!(f, "{:#x}", self.0),
        }
    }
}

/// What a decoder found wrong, and how far it reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// GOAWAY with this code: the connection cannot go on.
    Connection(Reason, &'static str),
    /// RST_STREAM of this stream with this code; the connection serves on.
    Stream(u32, Reason, &'static str),
}

impl Error {
    pub(crate) fn protocol(what: &'static str) -> Self {
        Self::Connection(Reason::PROTOCOL_ERROR, what)
    }

    pub(crate) fn frame_size(what: &'static str) -> Self {
        Self::Connection(Reason::FRAME_SIZE_ERROR, what)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Connection(reason, what) => write!(f, "connection error {reason}: {what}"),
            Self::Stream(id, reason, what) => write!(f, "stream {id} error {reason}: {what}"),
        }
    }
}

impl std::error::Error for Error {}
