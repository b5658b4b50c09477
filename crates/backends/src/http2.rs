//! HTTP/2 for the backends: h2 over TLS (ALPN) and h2c with prior
//! knowledge, on the `h2` crate.
//!
//! Each stream is a task on the connection's worker: its body is collected
//! (bounded like HTTP/1.1), the same [`App`] answers the same [`Request`]
//! view, and the answer goes out as the client's flow-control window
//! allows. Framing aside (no `connection` field), the answer is the one
//! HTTP/1.1 gives.

use std::{future::poll_fn, sync::Arc, time::Duration};

use bytes::Bytes;
use h2::{
    server::{Builder, Connection, SendResponse},
    Reason, RecvStream,
};
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use http1::{chunked::body_too_large, io::with_date, Rejection};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::watch,
    task::JoinSet,
    time::{sleep, timeout, Instant},
};
use tracing::debug;

use crate::{
    h1::{request_timeout, IDLE_TIMEOUT, LIMITS, REQUEST_TIMEOUT, WRITE_TIMEOUT},
    message::{Request, Response},
    problem::IntoResponse,
    App,
};

/// A TLS or HTTP/2 handshake not done within this time drops the connection.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Streams one connection may have open at once.
const MAX_CONCURRENT_STREAMS: u32 = 256;
/// The decoded request head, as HTTP/1.1's 32 KiB head limit with room for HPACK overhead.
const MAX_HEADER_LIST_SIZE: u32 = 64 * 1024;
/// A whole body within the limit (1 MiB) fits in one stream window, so an
/// upload never waits for a window update.
const STREAM_WINDOW: u32 = 1024 * 1024;
const CONNECTION_WINDOW: u32 = 4 * 1024 * 1024;
/// Streams a client may open and reset before the server accepts them
/// (the rapid-reset attack) before the connection is refused with GOAWAY.
const MAX_PENDING_ACCEPT_RESET_STREAMS: usize = 64;

fn builder() -> Builder {
    let mut builder = Builder::new();
    builder
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_header_list_size(MAX_HEADER_LIST_SIZE)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_pending_accept_reset_streams(MAX_PENDING_ACCEPT_RESET_STREAMS);
    builder
}

/// Serves HTTP/2 on `stream` until the client closes, the connection has
/// no stream for the idle timeout, or shutdown is signalled: then GOAWAY,
/// and the streams already open finish.
pub(crate) async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    app: App,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut conn = match timeout(HANDSHAKE_TIMEOUT, builder().handshake(stream)).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(err)) => return debug!(%err, "HTTP/2 handshake failed"),
        Err(_) => return debug!("HTTP/2 handshake timed out"),
    };
    // One allocation per connection; each stream task holds a reference.
    let app = Arc::new(app);
    let mut streams = JoinSet::new();
    let idle = sleep(IDLE_TIMEOUT);
    tokio::pin!(idle);
    let mut closing = *shutdown.borrow_and_update();
    if closing {
        go_away(&mut conn, false);
    }
    loop {
        // `accept` also drives the connection: it must be polled while
        // streams run, for their frames to be written.
        tokio::select! {
            accepted = conn.accept() => match accepted {
                Some(Ok((request, respond))) => {
                    streams.spawn(serve_stream(request, respond, Arc::clone(&app)));
                }
                Some(Err(err)) => return debug!(%err, "HTTP/2 connection failed"),
                None => return,
            },
            Some(_) = streams.join_next(), if !streams.is_empty() => {
                if streams.is_empty() {
                    idle.as_mut().reset(Instant::now() + IDLE_TIMEOUT);
                }
            }
            _ = shutdown.changed(), if !closing => {
                closing = true;
                go_away(&mut conn, !streams.is_empty());
            }
            () = &mut idle, if !closing && streams.is_empty() => {
                closing = true;
                go_away(&mut conn, false);
            }
        }
    }
}

/// Sends GOAWAY. An idle connection closes at once, as HTTP/1.1 closes an
/// idle connection: the graceful way first waits a round trip (a PING) for
/// a client that may never answer. A request racing the GOAWAY is refused
/// by stream id, which tells the client it is safe to retry.
fn go_away<S: AsyncRead + AsyncWrite + Unpin>(conn: &mut Connection<S, Bytes>, busy: bool) {
    if busy || conn.has_streams() {
        conn.graceful_shutdown();
    } else {
        conn.abrupt_shutdown(Reason::NO_ERROR);
    }
}

/// Answers one stream. A response sent before the whole body arrived (a
/// 413) is followed by RST_STREAM(NO_ERROR) when the handles drop (h2 does
/// this), which tells the client to stop sending without failing it.
async fn serve_stream(
    request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    app: Arc<App>,
) {
    let (parts, body) = request.into_parts();
    let head_only = parts.method == Method::HEAD;
    let response = match read_body(&parts.headers, body).await {
        Ok(body) => {
            let request = Request {
                method: parts.method,
                path: parts.uri.path(),
                query: parts.uri.query(),
                content_type: parts
                    .headers
                    .get(header::CONTENT_TYPE)
                    .map(HeaderValue::as_bytes),
                body: &body,
            };
            app.handle(&request).await
        }
        Err(rejection) => {
            debug!(status = %rejection.status, detail = %rejection.detail, "rejected stream");
            rejection.into_response()
        }
    };
    if let Err(err) = send_response(&mut respond, response, head_only).await {
        debug!(%err, "HTTP/2 response not sent");
    }
}

/// The whole request body: within [`LIMITS`] (413 otherwise, at once when
/// `content-length` says so) and [`REQUEST_TIMEOUT`] (408).
async fn read_body(headers: &HeaderMap, mut body: RecvStream) -> Result<Vec<u8>, Rejection> {
    // h2 has checked that the field is a number and will match the DATA frames.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > LIMITS.max_body as u64) {
        return Err(body_too_large(&LIMITS));
    }
    let collect = async {
        let mut collected = Vec::new();
        while let Some(data) = body.data().await {
            // A stream error: the client reset the stream, so no one reads the answer.
            let data = data.map_err(|err| {
                Rejection::new(StatusCode::BAD_REQUEST, format!("request body: {err}"))
            })?;
            if collected.len() + data.len() > LIMITS.max_body {
                return Err(body_too_large(&LIMITS));
            }
            collected.extend_from_slice(&data);
            // The body is copied out: let the client send more. Memory stays
            // bounded by the body limit per stream.
            let _ = body.flow_control().release_capacity(data.len());
        }
        Ok(collected)
    };
    timeout(REQUEST_TIMEOUT, collect)
        .await
        .unwrap_or_else(|_| Err(request_timeout()))
}

/// Sends the head, then the body as the client's window opens; a client
/// that opens none for [`WRITE_TIMEOUT`] loses the stream.
async fn send_response(
    respond: &mut SendResponse<Bytes>,
    response: Response,
    head_only: bool,
) -> Result<(), h2::Error> {
    let may_have_body = http1::may_have_body(response.status);
    let mut head = http::Response::new(());
    *head.status_mut() = response.status;
    let fields = head.headers_mut();
    fields.insert(header::CONTENT_TYPE, response.content_type);
    for (name, value) in response.headers {
        fields.append(name, value);
    }
    if may_have_body {
        fields.insert(header::CONTENT_LENGTH, response.body.len().into());
    }
    with_date(|date| {
        if let Ok(date) = HeaderValue::from_bytes(date) {
            fields.insert(header::DATE, date);
        }
    });
    let mut body = response.body;
    if head_only || !may_have_body || body.is_empty() {
        respond.send_response(head, true)?;
        return Ok(());
    }
    let mut stream = respond.send_response(head, false)?;
    while !body.is_empty() {
        stream.reserve_capacity(body.len());
        match timeout(WRITE_TIMEOUT, poll_fn(|cx| stream.poll_capacity(cx))).await {
            Ok(Some(Ok(0))) => {}
            Ok(Some(Ok(granted))) => {
                let chunk = body.split_to(granted.min(body.len()));
                stream.send_data(chunk, body.is_empty())?;
            }
            Ok(Some(Err(err))) => return Err(err),
            // The stream was reset or the client took nothing for too long.
            Ok(None) | Err(_) => return Ok(()),
        }
    }
    Ok(())
}
