//! HTTP/2 connections from clients (docs/LIFECYCLE-h2.md). The `h2` crate
//! runs the connection: frames, HPACK, flow control, and the flood limits
//! set here. Each stream is served as its own exchange by
//! `session::serve_stream`, straight from the decoded frames.

use std::sync::Arc;

use bytes::Bytes;
use h2::{server::Builder, Reason};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::watch,
    task::JoinSet,
};
use tracing::debug;

use super::resets::PrematureResets;
use crate::{
    session::{serve_stream, ClientOrigin, Worker, PARK_AFTER},
    telemetry::Event,
};

/// Response bytes the `h2` crate may buffer per stream beyond the peer's window.
const SEND_BUFFER: usize = 256 * 1024;

/// Serves one HTTP/2 client connection until it closes, goes idle or the
/// proxy shuts down (then GOAWAY, and open streams may finish).
pub(crate) async fn serve<S>(
    io: S,
    origin: ClientOrigin,
    worker: Arc<Worker>,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let worker = &worker;
    // Each stream holds a count of this connection's own plan, refreshed
    // when a reload stored a newer one: one atomic load per stream.
    let mut plan = worker.plans.current_own();
    let handshake = builder(&plan).handshake::<_, Bytes>(io);
    let mut conn = match tokio::time::timeout(plan.header_read_timeout, handshake).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(err)) => return debug!(peer = %origin.peer, %err, "HTTP/2 handshake failed"),
        Err(_) => return debug!(peer = %origin.peer, "HTTP/2 handshake timed out"),
    };
    let idle = plan.idle_timeout;
    let idle_timer = tokio::time::sleep(idle);
    tokio::pin!(idle_timer);
    let mut streams = JoinSet::new();
    let mut draining = false;
    // A bridged HTTP/3 connection's resets are counted by its HTTP/3
    // side (server/h3), which sees the client's own streams.
    let max_resets = match origin.h3 {
        true => u32::MAX,
        false => plan.http2.max_premature_resets,
    };
    let mut resets = PrematureResets::new(max_resets, plan.http2.premature_reset_window);
    // A connection without a stream for as long as an HTTP/1.1 one takes
    // to park gives back the memory its busiest moment left it (stream
    // slots, read and write buffers: vendor/h2/SLUICE.md). Armed when the
    // last stream ends, not per stream: a busy connection keeps its memory
    // between bursts instead of giving it back and taking it again.
    let release_timer = tokio::time::sleep(PARK_AFTER);
    tokio::pin!(release_timer);
    let mut release_armed = true;
    loop {
        tokio::select! {
            accepted = conn.accept() => match accepted {
                Some(Ok((request, respond))) => {
                    // A bridged HTTP/3 request was counted as one (server/h3).
                    if !origin.h3 {
                        worker.metrics().h2_stream();
                    }
                    idle_timer.as_mut().reset(tokio::time::Instant::now() + idle);
                    release_armed = false;
                    let worker = Arc::clone(worker);
                    worker.plans.refresh_own(&mut plan);
                    let plan = Arc::clone(&plan);
                    streams.spawn(serve_stream(request, respond, origin.clone(), worker, plan));
                }
                Some(Err(err)) => {
                    if !err.is_remote() && !err.is_io() {
                        worker.metrics().h2_connection_error();
                    }
                    return debug!(peer = %origin.peer, %err, "HTTP/2 connection ended");
                }
                None => return,
            },
            Some(ended) = streams.join_next(), if !streams.is_empty() => {
                // A stream its client reset before its answer was complete
                // (its upstream work was cancelled then): many of them is
                // the rapid-reset attack on accepted streams.
                if ended.unwrap_or(false) && resets.flood(tokio::time::Instant::now()) {
                    worker.metrics().event(Event::ResetFlood);
                    debug!(peer = %origin.peer, "too many premature stream resets: GOAWAY");
                    conn.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
                    streams.abort_all();
                    draining = true;
                }
                if streams.is_empty() && !draining {
                    release_timer.as_mut().reset(tokio::time::Instant::now() + PARK_AFTER);
                    release_armed = true;
                }
            }
            () = &mut release_timer, if release_armed => {
                release_armed = false;
                let released = conn.release_idle_memory();
                debug!(peer = %origin.peer, released, "HTTP/2 connection without streams for a second");
            }
            _ = shutdown.changed(), if !draining => {
                draining = true;
                conn.graceful_shutdown();
            }
            () = &mut idle_timer, if !draining => {
                if conn.has_streams() {
                    idle_timer.as_mut().reset(tokio::time::Instant::now() + idle);
                } else {
                    draining = true;
                    conn.graceful_shutdown();
                }
            }
        }
    }
}

/// The connection settings and flood limits from the `http2` section.
fn builder(plan: &crate::plan::Plan) -> Builder {
    let settings = &plan.http2;
    let mut builder = Builder::new();
    builder
        .max_concurrent_streams(settings.max_concurrent_streams)
        .max_header_list_size(settings.max_header_list_bytes)
        .max_frame_size(settings.max_frame_bytes)
        .initial_window_size(settings.stream_window)
        .initial_connection_window_size(settings.connection_window)
        .max_pending_accept_reset_streams(settings.max_pending_accept_resets)
        .max_local_error_reset_streams(Some(settings.max_local_error_resets))
        .max_send_buffer_size(SEND_BUFFER)
        .huffman_encode(settings.huffman);
    builder
}
