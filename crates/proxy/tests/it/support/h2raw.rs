//! A hostile HTTP/2 client's tools: frames written byte by byte (RFC 9113
//! 4.1) and read back as they come, so that tests can send what no client
//! library would (floods, overflows, bombs) and see exactly what the proxy
//! answers.

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// The client connection preface and an empty SETTINGS frame.
pub(crate) fn preface() -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(kind::SETTINGS, 0, 0, &[]));
    out
}

/// Frame types (RFC 9113 6).
pub(crate) mod kind {
    pub(crate) const DATA: u8 = 0x0;
    pub(crate) const HEADERS: u8 = 0x1;
    pub(crate) const RST_STREAM: u8 = 0x3;
    pub(crate) const SETTINGS: u8 = 0x4;
    pub(crate) const PING: u8 = 0x6;
    pub(crate) const GOAWAY: u8 = 0x7;
    pub(crate) const WINDOW_UPDATE: u8 = 0x8;
}

/// Flags.
pub(crate) const END_STREAM: u8 = 0x1;
pub(crate) const ACK: u8 = 0x1;
pub(crate) const END_HEADERS: u8 = 0x4;

/// One frame.
pub(crate) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A HEADERS block for `method` `path` at authority `test` (indexed
/// names, literal values, no Huffman).
pub(crate) fn request_block(method: &str, path: &str) -> Vec<u8> {
    let mut block = match method {
        "GET" => vec![0x82],
        "POST" => vec![0x83],
        other => {
            let mut b = vec![0x02, other.len() as u8];
            b.extend_from_slice(other.as_bytes());
            b
        }
    };
    block.extend_from_slice(&[0x86, 0x04, path.len() as u8]);
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, 4]);
    block.extend_from_slice(b"test");
    block
}

/// A frame as read: type, flags, stream and payload.
#[derive(Debug)]
pub(crate) struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// A GOAWAY's or RST_STREAM's error code.
    pub(crate) fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            kind::GOAWAY => 4,
            kind::RST_STREAM => 0,
            _ => return None,
        };
        Some(u32::from_be_bytes(
            self.payload.get(at..at + 4)?.try_into().ok()?,
        ))
    }
}

/// Reads frames off a raw connection.
pub(crate) struct Reader {
    buf: Vec<u8>,
}

impl Reader {
    pub(crate) fn new() -> Self {
        Self { buf: Vec::new() }
    }

    /// The next frame, or `None` when the connection closes or stays
    /// quiet for `quiet`.
    pub(crate) async fn next(&mut self, io: &mut TcpStream, quiet: Duration) -> Option<Frame> {
        loop {
            if self.buf.len() >= 9 {
                let len = (usize::from(self.buf[0]) << 16)
                    | (usize::from(self.buf[1]) << 8)
                    | usize::from(self.buf[2]);
                if self.buf.len() >= 9 + len {
                    let frame = Frame {
                        kind: self.buf[3],
                        flags: self.buf[4],
                        stream: u32::from_be_bytes(self.buf[5..9].try_into().unwrap())
                            & 0x7fff_ffff,
                        payload: self.buf[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    return Some(frame);
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            match tokio::time::timeout(quiet, io.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => self.buf.extend_from_slice(&chunk[..n]),
                _ => return None,
            }
        }
    }

    /// Reads until a frame `wanted` accepts (that frame), or until the
    /// connection closes or is quiet for `quiet` (`None`).
    pub(crate) async fn until(
        &mut self,
        io: &mut TcpStream,
        quiet: Duration,
        wanted: impl Fn(&Frame) -> bool,
    ) -> Option<Frame> {
        while let Some(frame) = self.next(io, quiet).await {
            if wanted(&frame) {
                return Some(frame);
            }
        }
        None
    }
}

/// Reads frames until a GOAWAY (its error code), or until the connection
/// closes or stays quiet for `quiet` (`None`).
pub(crate) async fn goaway_code(io: &mut TcpStream, quiet: Duration) -> Option<u32> {
    Reader::new()
        .until(io, quiet, |frame| frame.kind == kind::GOAWAY)
        .await?
        .error_code()
}

/// Opens a raw connection to `addr`: the preface, then the proxy's
/// SETTINGS acknowledged (its limits apply from then on). The reader
/// holds whatever came after them.
pub(crate) async fn connect(addr: std::net::SocketAddr) -> (TcpStream, Reader) {
    let mut io = TcpStream::connect(addr).await.unwrap();
    io.write_all(&preface()).await.unwrap();
    let mut reader = Reader::new();
    reader
        .until(&mut io, Duration::from_secs(5), |f| {
            f.kind == kind::SETTINGS && f.flags & ACK == 0
        })
        .await
        .expect("the proxy's SETTINGS");
    io.write_all(&frame(kind::SETTINGS, ACK, 0, &[]))
        .await
        .unwrap();
    (io, reader)
}
