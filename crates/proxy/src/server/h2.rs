//! HTTP/2 connections from clients (docs/LIFECYCLE-h2.md). The `h2` crate
//! runs the connection: frames, HPACK, flow control, and the flood limits
//! set here. Each stream is served as its own exchange by
//! `session::serve_stream`, straight from the decoded frames.

use std::sync::Arc;

use bytes::Bytes;
use h2::server::Builder;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::watch,
    task::JoinSet,
};
use tracing::debug;

use crate::session::{serve_stream, ClientOrigin, Worker};

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
    loop {
        tokio::select! {
            accepted = conn.accept() => match accepted {
                Some(Ok((request, respond))) => {
                    worker.metrics().h2_stream();
                    idle_timer.as_mut().reset(tokio::time::Instant::now() + idle);
                    let worker = Arc::clone(worker);
                    worker.plans.refresh_own(&mut plan);
                    let plan = Arc::clone(&plan);
                    streams.spawn(serve_stream(request, respond, origin, worker, plan));
                }
                Some(Err(err)) => {
                    if !err.is_remote() && !err.is_io() {
                        worker.metrics().h2_connection_error();
                    }
                    return debug!(peer = %origin.peer, %err, "HTTP/2 connection ended");
                }
                None => return,
            },
            Some(_) = streams.join_next(), if !streams.is_empty() => {}
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
        .max_send_buffer_size(SEND_BUFFER);
    builder
}
