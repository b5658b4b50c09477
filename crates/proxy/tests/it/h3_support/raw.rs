//! A hostile HTTP/3 client: QUIC from quinn, and every HTTP/3 frame and
//! QPACK field section written by hand (with the `http3` crate's encoders
//! of frames and literal sections, which check nothing), so that a test
//! can send what no real client library would: pseudo-headers out of
//! order, a second head, frames out of place, QPACK instructions, resets.

use std::{net::SocketAddr, time::Duration};

use bytes::{Bytes, BytesMut};
use http3::{frame, head::FieldSection, qpack, varint};
use quinn::{RecvStream, SendStream, VarInt};
use testkit::TestCerts;

/// A QUIC connection speaking HTTP/3 frame by frame.
pub(crate) struct RawH3 {
    pub(crate) conn: quinn::Connection,
    endpoint: quinn::Endpoint,
    /// The client's control stream (SETTINGS sent on connect).
    pub(crate) control: SendStream,
}

impl RawH3 {
    pub(crate) async fn connect(addr: SocketAddr, certs: &TestCerts) -> Self {
        let mut settings = Vec::new();
        frame::encode_settings(&frame::Settings::default(), &mut settings);
        Self::connect_with(addr, certs, &settings).await
    }

    /// Connects with `first` as the first bytes of its control stream
    /// (after the stream type): SETTINGS for a well-behaved client.
    pub(crate) async fn connect_with(addr: SocketAddr, certs: &TestCerts, first: &[u8]) -> Self {
        let endpoint = super::endpoint(certs);
        let conn = endpoint.connect(addr, "localhost").unwrap().await.unwrap();
        let mut control = conn.open_uni().await.unwrap();
        let out = [&[0x00][..], first].concat();
        control.write_all(&out).await.unwrap();
        Self {
            conn,
            endpoint,
            control,
        }
    }

    /// Opens a request stream and writes `bytes`; `fin` ends it.
    pub(crate) async fn request(&self, bytes: &[u8], fin: bool) -> (SendStream, RecvStream) {
        let (mut send, recv) = self.conn.open_bi().await.unwrap();
        send.write_all(bytes).await.unwrap();
        if fin {
            send.finish().unwrap();
        }
        (send, recv)
    }

    /// Opens a unidirectional stream of `kind` and writes `bytes` on it.
    pub(crate) async fn uni(&self, kind: u64, bytes: &[u8]) -> SendStream {
        let mut send = self.conn.open_uni().await.unwrap();
        let mut out = Vec::new();
        varint::encode(kind, &mut out);
        out.extend_from_slice(bytes);
        send.write_all(&out).await.unwrap();
        send
    }

    /// The application error code the server closed the connection with,
    /// waiting at most `within`.
    pub(crate) async fn closed_with(&self, within: Duration) -> Option<u64> {
        match tokio::time::timeout(within, self.conn.closed()).await {
            Ok(quinn::ConnectionError::ApplicationClosed(close)) => {
                Some(close.error_code.into_inner())
            }
            _ => None,
        }
    }
}

impl Drop for RawH3 {
    fn drop(&mut self) {
        self.endpoint.close(0u32.into(), b"done");
    }
}

/// A HEADERS frame carrying `fields` exactly as given, in order.
pub(crate) fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut payload = Vec::new();
    let fields = fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()));
    qpack::encode_section(fields, false, &mut payload);
    frame_of(frame::HEADERS, &payload)
}

/// A DATA frame.
pub(crate) fn data(body: &[u8]) -> Vec<u8> {
    frame_of(frame::DATA, body)
}

/// Any frame.
pub(crate) fn frame_of(kind: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_header(kind, payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

/// A GET of `path` with `:authority` localhost, as a real client sends it.
pub(crate) fn get(path: &str) -> Vec<u8> {
    headers(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "localhost"),
        (":path", path),
    ])
}

/// What came back on a request stream.
#[derive(Debug)]
pub(crate) enum Answer {
    /// A final status, its fields and body.
    Response(u16, FieldSection, Vec<u8>),
    /// The server reset the stream with this code.
    Reset(u64),
    /// The connection closed (or nothing came within the wait).
    Gone,
}

impl Answer {
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            Answer::Response(status, ..) => Some(*status),
            _ => None,
        }
    }

    pub(crate) fn body(&self) -> String {
        match self {
            Answer::Response(_, _, body) => String::from_utf8_lossy(body).into_owned(),
            other => format!("{other:?}"),
        }
    }
}

/// Reads the answer on `recv`: interim heads skipped, the final head,
/// DATA until the end; at most `within`.
pub(crate) async fn answer(recv: &mut RecvStream, within: Duration) -> Answer {
    match tokio::time::timeout(within, read_answer(recv)).await {
        Ok(answer) => answer,
        Err(_) => Answer::Gone,
    }
}

async fn read_answer(recv: &mut RecvStream) -> Answer {
    let mut buf = BytesMut::new();
    let mut head: Option<(u16, FieldSection)> = None;
    let mut body = Vec::new();
    loop {
        while let Some(header) = frame::decode_header(&buf) {
            let whole = header.size + header.len as usize;
            if buf.len() < whole {
                break;
            }
            let frame = buf.split_to(whole).split_off(header.size);
            match header.kind {
                frame::HEADERS if head.is_none() => {
                    let mut section = FieldSection::new();
                    qpack::decode_section(&frame, 1 << 20, &mut section).unwrap();
                    let status: u16 = std::str::from_utf8(section.get(b":status").unwrap())
                        .unwrap()
                        .parse()
                        .unwrap();
                    if status >= 200 {
                        head = Some((status, section));
                    }
                }
                frame::DATA => body.extend_from_slice(&frame),
                _ => {}
            }
        }
        match recv.read_chunk(65_536, true).await {
            Ok(Some(chunk)) => buf.extend_from_slice(&chunk.bytes),
            Ok(None) => {
                return match head {
                    Some((status, section)) => Answer::Response(status, section, body),
                    None => Answer::Gone,
                }
            }
            Err(quinn::ReadError::Reset(code)) => return Answer::Reset(code.into_inner()),
            Err(_) => return Answer::Gone,
        }
    }
}

/// Resets a request at once, both ways (what the rapid-reset attack does).
pub(crate) fn reset(send: &mut SendStream, recv: &mut RecvStream) {
    let cancelled = VarInt::from_u32(0x10c);
    let _ = send.reset(cancelled);
    let _ = recv.stop(cancelled);
}

/// Bytes of a stream type and a frame, for a unidirectional stream.
pub(crate) fn bytes(parts: &[&[u8]]) -> Bytes {
    Bytes::from(parts.concat())
}
