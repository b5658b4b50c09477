//! sluice's HTTP/2 server connection (the vendored `h2` fork) fed any bytes
//! after the client preface: the frame reader, HPACK decoding, stream
//! states and flood limits (the same limits `server/h2.rs` sets) answer
//! with frames or a connection error, never a panic or a hang. Accepted
//! requests get a small response, so the write side and HPACK encoder run.

use std::{
    future::Future,
    io,
    pin::Pin,
    task::{Context, Poll, Waker},
};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads the input in small pieces (so frames split across reads), then
/// end of stream; accepts any write.
struct Wire {
    input: Vec<u8>,
    at: usize,
    chunk: usize,
}

impl AsyncRead for Wire {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = self
            .chunk
            .min(buf.remaining())
            .min(self.input.len() - self.at);
        let at = self.at;
        buf.put_slice(&self.input[at..at + n]);
        self.at += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Wire {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

pub fn check(data: &[u8]) {
    let Some((&chunk, frames)) = data.split_first() else {
        return;
    };
    let mut input = PREFACE.to_vec();
    input.extend_from_slice(frames);
    let wire = Wire {
        input,
        at: 0,
        chunk: usize::from(chunk).max(1) * 8,
    };
    let mut cx = Context::from_waker(Waker::noop());
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(16)
        .max_header_list_size(16 * 1024)
        .max_pending_accept_reset_streams(20)
        .max_local_error_reset_streams(Some(64))
        .max_send_buffer_size(64 * 1024);
    let mut handshake = Box::pin(builder.handshake::<_, Bytes>(wire));
    let mut conn = match handshake.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(conn)) => conn,
        _ => return,
    };
    // Every poll reads at least one byte or ends: the bound is generous.
    for _ in 0..(data.len() + 64) {
        match conn.poll_accept(&mut cx) {
            Poll::Ready(Some(Ok((request, mut respond)))) => {
                drop(request);
                let response = http::Response::builder()
                    .status(200)
                    .header("content-type", "text/plain")
                    .body(())
                    .unwrap();
                if let Ok(mut body) = respond.send_response(response, false) {
                    let _ = body.send_data(Bytes::from_static(b"ok"), true);
                }
            }
            Poll::Ready(Some(Err(_))) | Poll::Ready(None) => return,
            Poll::Pending => {
                if conn.poll_closed(&mut cx).is_ready() {
                    return;
                }
            }
        }
    }
}
