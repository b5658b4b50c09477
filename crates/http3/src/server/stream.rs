//! One request stream over quinn: its reading half decodes the request
//! (`RequestDecoder`) from the chunks quinn hands over, its writing half
//! frames the answer. A protocol error that reaches past the stream closes
//! the connection here; one that is the stream's own stops its reading
//! half, and the caller resets the writing half with the same code.

use bytes::{Bytes, BytesMut};
use quinn::{RecvStream, SendStream};

use super::Settings;
use crate::{
    frame,
    qpack::{encode_response, encode_section},
    request::{Event, RequestDecoder},
    Code, Error,
};

/// The most bytes taken from quinn at a time.
const READ_CHUNK: usize = 64 * 1024;

/// A request stream: its two halves.
#[derive(Debug)]
pub struct RequestStream {
    pub reader: RequestReader,
    pub writer: ResponseWriter,
}

impl RequestStream {
    pub(super) fn new(
        quic: quinn::Connection,
        send: SendStream,
        recv: RecvStream,
        settings: Settings,
    ) -> Self {
        Self {
            reader: RequestReader {
                quic,
                recv,
                buf: BytesMut::new(),
                decoder: RequestDecoder::new(settings.max_field_section_size),
                fin: false,
            },
            writer: ResponseWriter {
                send,
                huffman: settings.huffman,
            },
        }
    }
}

/// Why a request could not be read further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// The request broke a rule: [`Error::Stream`] (the stream is
    /// stopped; reset the writer with its code), [`Error::HeadTooLarge`]
    /// (answer 431), or [`Error::Connection`] (the connection is closed).
    Protocol(Error),
    /// The client reset the stream (RESET_STREAM) with this code.
    Reset(u64),
    /// The connection is gone.
    Lost,
}

/// The reading half: the request's head, body and trailers.
#[derive(Debug)]
pub struct RequestReader {
    quic: quinn::Connection,
    recv: RecvStream,
    buf: BytesMut,
    decoder: RequestDecoder,
    fin: bool,
}

impl RequestReader {
    pub fn id(&self) -> u64 {
        u64::from(self.recv.id())
    }

    /// The next event; `Ok(None)` after [`Event::End`].
    pub async fn next(&mut self) -> Result<Option<Event>, ReadError> {
        loop {
            match self.decoder.decode(&mut self.buf, self.fin) {
                Ok(Some(event)) => return Ok(Some(event)),
                Ok(None) if self.fin || self.decoder.ended() => return Ok(None),
                Ok(None) => {}
                Err(err) => return Err(self.fail(err)),
            }
            match self.recv.read_chunk(READ_CHUNK, true).await {
                Ok(Some(chunk)) => {
                    if self.buf.is_empty() {
                        // Mostly a DATA payload: taken as quinn holds it.
                        self.buf = BytesMut::from(chunk.bytes);
                    } else {
                        self.buf.extend_from_slice(&chunk.bytes);
                    }
                }
                Ok(None) => self.fin = true,
                Err(quinn::ReadError::Reset(code)) => {
                    return Err(ReadError::Reset(code.into_inner()))
                }
                Err(_) => return Err(ReadError::Lost),
            }
        }
    }

    /// Whether the client's request has ended (its stream finished).
    pub fn ended(&self) -> bool {
        self.decoder.ended()
    }

    /// Tells the client to stop sending (the answer does not need the rest).
    pub fn stop(&mut self, code: Code) {
        let _ = self.recv.stop(code.varint());
    }

    fn fail(&mut self, err: Error) -> ReadError {
        match err {
            Error::Connection(code, what) => self.quic.close(code.varint(), what.as_bytes()),
            Error::Stream(code, _) => self.stop(code),
            Error::HeadTooLarge => {}
        }
        ReadError::Protocol(err)
    }
}

/// The writing half: interim heads, the head, DATA, trailers.
#[derive(Debug)]
pub struct ResponseWriter {
    send: SendStream,
    huffman: bool,
}

impl ResponseWriter {
    /// Sends a head (interim when `status` is 1xx).
    pub async fn head<'a>(
        &mut self,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), quinn::WriteError> {
        let mut payload = Vec::with_capacity(128);
        encode_response(status, fields, self.huffman, &mut payload);
        self.headers(payload).await
    }

    /// Sends body bytes as one DATA frame.
    pub async fn data(&mut self, data: Bytes) -> Result<(), quinn::WriteError> {
        if data.is_empty() {
            return Ok(());
        }
        let mut header = Vec::with_capacity(9);
        frame::encode_header(frame::DATA, data.len() as u64, &mut header);
        self.send
            .write_all_chunks(&mut [Bytes::from(header), data])
            .await
    }

    /// Sends trailers.
    pub async fn trailers<'a>(
        &mut self,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), quinn::WriteError> {
        let mut payload = Vec::with_capacity(64);
        encode_section(fields, self.huffman, &mut payload);
        self.headers(payload).await
    }

    async fn headers(&mut self, payload: Vec<u8>) -> Result<(), quinn::WriteError> {
        let mut framed = Vec::with_capacity(payload.len() + 9);
        frame::encode_header(frame::HEADERS, payload.len() as u64, &mut framed);
        framed.extend_from_slice(&payload);
        self.send.write_all(&framed).await
    }

    /// Ends the answer: the stream's FIN.
    pub fn finish(&mut self) {
        let _ = self.send.finish();
    }

    /// Abandons the answer with `code`.
    pub fn reset(&mut self, code: Code) {
        let _ = self.send.reset(code.varint());
    }

    /// Resolves with the client's STOP_SENDING code when it stops reading
    /// the answer; `None` once the stream is done or the connection gone.
    pub fn stopped(&self) -> impl std::future::Future<Output = Option<u64>> + Send + 'static {
        let stopped = self.send.stopped();
        async move { stopped.await.ok().flatten().map(quinn::VarInt::into_inner) }
    }
}
