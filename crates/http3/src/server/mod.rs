//! The server side of an HTTP/3 connection over quinn: the control
//! stream sluice opens (SETTINGS, later GOAWAY), the client's control and
//! QPACK streams read and checked as they come, and its request streams
//! handed out one by one. A protocol error on any of them closes the
//! connection with its code (RFC 9114 8).

mod stream;

use std::sync::{
    atomic::{AtomicU8, Ordering},
    Arc,
};

use bytes::{Buf, BytesMut};
use quinn::{RecvStream, SendStream, VarInt};
use tokio::task::JoinSet;

pub use stream::{ReadError, RequestReader, RequestStream, ResponseWriter};

use crate::{
    control::{self, ControlStream},
    frame,
    qpack::{DecoderStream, EncoderStream},
    varint, Code, Error,
};

/// What sluice advertises and how it encodes.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: a larger request head gets 431.
    pub max_field_section_size: u64,
    /// Huffman-code the strings of response heads where shorter.
    pub huffman: bool,
}

/// How the connection ended.
#[derive(Debug)]
pub enum End {
    /// Closed by the client, by idleness, or locally.
    Closed(quinn::ConnectionError),
    /// A protocol error of the client's; the connection was closed with
    /// the error's code.
    Error(Error),
}

/// One HTTP/3 connection, server side.
#[derive(Debug)]
pub struct Connection {
    quic: quinn::Connection,
    settings: Settings,
    control: SendStream,
    /// The client's unidirectional streams, each read by a task that ends
    /// with the stream or with the error that must close the connection.
    uni: JoinSet<Result<(), Error>>,
    critical: Arc<AtomicU8>,
    /// One past the largest request stream ID accepted (the ID a GOAWAY
    /// names: requests from it on are not processed).
    next_request: u64,
    goaway: bool,
}

impl Connection {
    /// Opens sluice's control stream and sends SETTINGS.
    pub async fn new(quic: quinn::Connection, settings: Settings) -> Result<Self, End> {
        let mut control = quic.open_uni().await.map_err(End::Closed)?;
        let mut out = Vec::new();
        varint::encode(control::CONTROL, &mut out);
        let advertised = frame::Settings {
            max_field_section_size: Some(settings.max_field_section_size),
            ..frame::Settings::default()
        };
        frame::encode_settings(&advertised, &mut out);
        if control.write_all(&out).await.is_err() {
            return Err(End::Closed(quinn::ConnectionError::LocallyClosed));
        }
        Ok(Self {
            quic,
            settings,
            control,
            uni: JoinSet::new(),
            critical: Arc::new(AtomicU8::new(0)),
            next_request: 0,
            goaway: false,
        })
    }

    /// The QUIC connection under it.
    pub fn quic(&self) -> &quinn::Connection {
        &self.quic
    }

    /// The next request stream. After [`Self::goaway`], streams the client
    /// opens anyway are refused with H3_REQUEST_REJECTED, not returned.
    pub async fn accept(&mut self) -> Result<RequestStream, End> {
        loop {
            tokio::select! {
                bi = self.quic.accept_bi() => {
                    let (send, recv) = bi.map_err(End::Closed)?;
                    let id = u64::from(send.id());
                    if self.goaway && id >= self.next_request {
                        reject(send, recv);
                        continue;
                    }
                    self.next_request = self.next_request.max(id + 4);
                    return Ok(RequestStream::new(self.quic.clone(), send, recv, self.settings));
                }
                uni = self.quic.accept_uni() => {
                    let recv = uni.map_err(End::Closed)?;
                    self.uni.spawn(read_uni(recv, Arc::clone(&self.critical)));
                }
                Some(done) = self.uni.join_next(), if !self.uni.is_empty() => {
                    if let Ok(Err(err)) = done {
                        self.close_with(err);
                        return Err(End::Error(err));
                    }
                }
            }
        }
    }

    /// Sends GOAWAY: the requests accepted so far are served, later ones
    /// refused, and the client may open no more.
    pub async fn goaway(&mut self) {
        if self.goaway {
            return;
        }
        self.goaway = true;
        self.quic.set_max_concurrent_bi_streams(VarInt::from_u32(0));
        let mut out = Vec::new();
        let mut id = Vec::new();
        varint::encode(self.next_request, &mut id);
        frame::encode_header(frame::GOAWAY, id.len() as u64, &mut out);
        out.extend_from_slice(&id);
        let _ = self.control.write_all(&out).await;
    }

    /// Closes the connection with `code` (H3_EXCESSIVE_LOAD for a flood,
    /// H3_NO_ERROR when done).
    pub fn close(&self, code: Code, reason: &str) {
        self.quic.close(code.varint(), reason.as_bytes());
    }

    fn close_with(&self, err: Error) {
        if let Error::Connection(code, what) = err {
            self.close(code, what);
        }
    }
}

fn reject(mut send: SendStream, mut recv: RecvStream) {
    let _ = send.reset(Code::H3_REQUEST_REJECTED.varint());
    let _ = recv.stop(Code::H3_REQUEST_REJECTED.varint());
}

/// Reads one of the client's unidirectional streams to its end.
async fn read_uni(mut recv: RecvStream, critical: Arc<AtomicU8>) -> Result<(), Error> {
    let mut buf = BytesMut::new();
    let kind = loop {
        if let Some((kind, used)) = varint::decode(&buf) {
            buf.advance(used);
            break kind;
        }
        match recv.read_chunk(64, true).await {
            Ok(Some(chunk)) => buf.extend_from_slice(&chunk.bytes),
            // Ended or reset before its type: nothing to read.
            _ => return Ok(()),
        }
    };
    let bit = match kind {
        control::CONTROL => 1,
        control::QPACK_ENCODER => 2,
        control::QPACK_DECODER => 4,
        control::PUSH => {
            return Err(Error::Connection(
                Code::H3_STREAM_CREATION_ERROR,
                "a push stream from a client",
            ))
        }
        // Unknown and grease types: not read (RFC 9114 6.2).
        _ => {
            let _ = recv.stop(Code::H3_STREAM_CREATION_ERROR.varint());
            return Ok(());
        }
    };
    if critical.fetch_or(bit, Ordering::Relaxed) & bit != 0 {
        return Err(Error::Connection(
            Code::H3_STREAM_CREATION_ERROR,
            "a second control or QPACK stream",
        ));
    }
    let closed = Error::Connection(Code::H3_CLOSED_CRITICAL_STREAM, "a critical stream closed");
    let mut control = ControlStream::default();
    let mut instructions = buf.to_vec();
    let (mut encoder, mut decoder) = (EncoderStream, DecoderStream);
    let mut fin = false;
    loop {
        match kind {
            control::CONTROL => while control.decode(&mut buf, fin)?.is_some() {},
            control::QPACK_ENCODER => encoder.read(&mut instructions)?,
            _ => decoder.read(&mut instructions)?,
        }
        if fin {
            return Err(closed);
        }
        match recv.read_chunk(4096, true).await {
            Ok(Some(chunk)) if kind == control::CONTROL => buf.extend_from_slice(&chunk.bytes),
            Ok(Some(chunk)) => instructions.extend_from_slice(&chunk.bytes),
            Ok(None) => fin = true,
            Err(quinn::ReadError::ConnectionLost(_)) => return Ok(()),
            Err(_) => return Err(closed),
        }
    }
}
