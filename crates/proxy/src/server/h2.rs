//! HTTP/2 from clients (docs/LIFECYCLE-h2.md). The `h2` crate runs the
//! connection: frames, HPACK, flow control, and the flood limits set here.
//! Each stream becomes one HTTP/1.1 exchange written into an in-memory
//! pipe, at whose other end an ordinary `Session` routes it, runs the
//! middleware and talks to the upstream; its answer is read back and sent
//! as HTTP/2 frames. (HAProxy's first HTTP/2 support worked this way.)
//! One request path means one set of routing, middleware, retry and
//! metrics rules for every protocol; the price is a copy and a parse of
//! each head and body on loopback memory.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use h2::{
    server::{Builder, SendResponse},
    Reason, RecvStream, SendStream,
};
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http1::{chunked::encode_chunk, BodyFraming, ChunkedDecoder, Part, Problem};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf},
    sync::watch,
    task::JoinSet,
};
use tracing::debug;

use crate::{
    session::Worker,
    session::{ClientOrigin, Session},
    upstream::h2_pool::{send_data, StreamBroken},
    wire::head::HOP_BY_HOP,
};

/// Bytes in flight in each stream's pipe, each way.
const PIPE_BYTES: usize = 64 * 1024;
const READ_RESERVE: usize = 16 * 1024;
/// Response bytes the `h2` crate may buffer per stream beyond the peer's window.
const SEND_BUFFER: usize = 256 * 1024;
/// Answers from the pipe may have heads this large.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

type Pipe = tokio::io::DuplexStream;

/// Serves one HTTP/2 client connection until it closes, goes idle or the
/// proxy shuts down (then GOAWAY, and open streams may finish).
pub(crate) async fn serve<S>(
    io: S,
    origin: ClientOrigin,
    worker: &Arc<Worker>,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let plan = worker.plans.current();
    let gateway = &plan;
    let handshake = builder(gateway).handshake::<_, Bytes>(io);
    let mut conn = match tokio::time::timeout(gateway.header_read_timeout, handshake).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(err)) => return debug!(peer = %origin.peer, %err, "HTTP/2 handshake failed"),
        Err(_) => return debug!(peer = %origin.peer, "HTTP/2 handshake timed out"),
    };
    let idle = gateway.idle_timeout;
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
                    streams.spawn(exchange(request, respond, origin, worker, shutdown.clone()));
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
fn builder(gateway: &crate::plan::Plan) -> Builder {
    let settings = &gateway.http2;
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

/// One stream: its request into a pipe to a `Session`, the answer back.
async fn exchange(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    origin: ClientOrigin,
    worker: Arc<Worker>,
    shutdown: watch::Receiver<bool>,
) {
    let (parts, body) = request.into_parts();
    if parts.method == Method::CONNECT {
        let problem = Problem::new(
            StatusCode::NOT_IMPLEMENTED,
            "CONNECT is not supported over HTTP/2",
        );
        return answer_problem(&mut respond, &problem);
    }
    let chunked = !body.is_end_stream() && !parts.headers.contains_key(header::CONTENT_LENGTH);
    let mut head = Vec::with_capacity(512);
    encode_request_head(&mut head, &parts, chunked);
    let head_request = parts.method == Method::HEAD;
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let session = Session::new(theirs, BytesMut::new(), origin, worker, shutdown);
    let (reader, writer) = tokio::io::split(ours);
    tokio::join!(
        session.run(),
        send_request(writer, head, body, chunked),
        relay_response(reader, respond, head_request),
    );
}

/// The HTTP/1.1 head for an HTTP/2 request (RFC 9113 8.3.1): `:authority`
/// becomes `Host`, cookie fields are joined (8.2.3), and a body without
/// Content-Length is sent chunked.
fn encode_request_head(out: &mut Vec<u8>, parts: &http::request::Parts, chunked: bool) {
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let authority = parts.uri.authority();
    if let Some(authority) = authority {
        field(out, b"host", authority.as_str().as_bytes());
    }
    let mut cookies = parts.headers.get_all(header::COOKIE).iter().peekable();
    if cookies.peek().is_some() {
        out.extend_from_slice(b"cookie: ");
        for (i, cookie) in cookies.enumerate() {
            if i > 0 {
                out.extend_from_slice(b"; ");
            }
            out.extend_from_slice(cookie.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    }
    for (name, value) in &parts.headers {
        let skip = name == header::COOKIE || (name == header::HOST && authority.is_some());
        if !skip {
            field(out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    if chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Writes the head and streams the body (chunked when it has no length,
/// trailers and all) into the pipe, returning flow-control credit to the
/// client only as the session takes the bytes.
async fn send_request(
    mut pipe: WriteHalf<Pipe>,
    head: Vec<u8>,
    mut body: RecvStream,
    chunked: bool,
) {
    if pipe.write_all(&head).await.is_err() {
        return;
    }
    let mut framed = Vec::new();
    while let Some(data) = body.data().await {
        let Ok(data) = data else {
            return;
        };
        let len = data.len();
        let written = if chunked {
            framed.clear();
            encode_chunk(&mut framed, &data);
            pipe.write_all(&framed).await
        } else {
            pipe.write_all(&data).await
        };
        if written.is_err() {
            return;
        }
        let _ = body.flow_control().release_capacity(len);
    }
    if chunked {
        framed.clear();
        let trailers = body.trailers().await.ok().flatten().unwrap_or_default();
        http1::chunked::encode_last_chunk(
            &mut framed,
            trailers
                .iter()
                .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes())),
        );
        if pipe.write_all(&framed).await.is_err() {
            return;
        }
    }
    let _ = pipe.shutdown().await;
}

/// Reads the session's HTTP/1.1 answer and sends it as HTTP/2.
async fn relay_response(
    mut pipe: ReadHalf<Pipe>,
    mut respond: SendResponse<Bytes>,
    head_request: bool,
) {
    let mut buf = BytesMut::with_capacity(READ_RESERVE);
    let mut fields = Vec::new();
    let head = loop {
        fields.clear();
        match http1::parse_response_head(&buf, MAX_RESPONSE_HEAD, head_request, &mut fields) {
            Ok(Some(head)) if head.status.is_informational() => {
                let _ = buf.split_to(head.len);
            }
            Ok(Some(head)) => break head,
            Ok(None) if read_more(&mut pipe, &mut buf).await => {}
            Ok(None) | Err(_) => return respond.send_reset(Reason::INTERNAL_ERROR),
        }
    };
    let mut response = Response::new(());
    *response.status_mut() = head.status;
    *response.headers_mut() = response_headers(&buf, &fields);
    let _ = buf.split_to(head.len);
    let framing = if head_request {
        BodyFraming::None
    } else {
        head.framing
    };
    let empty = matches!(framing, BodyFraming::None | BodyFraming::Length(0));
    let Ok(mut send) = respond.send_response(response, empty) else {
        return;
    };
    if !empty {
        let relayed = match framing {
            BodyFraming::Chunked => relay_chunked(&mut pipe, &mut buf, &mut send).await,
            BodyFraming::Length(len) => relay_length(&mut pipe, &mut buf, &mut send, len).await,
            BodyFraming::None | BodyFraming::UntilClose => {
                relay_length(&mut pipe, &mut buf, &mut send, u64::MAX).await
            }
        };
        if relayed.is_err() {
            send.send_reset(Reason::INTERNAL_ERROR);
        }
    }
}

/// The answer's fields minus those HTTP/2 forbids (RFC 9113 8.2.2).
fn response_headers(buf: &[u8], fields: &[http1::Field]) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(fields.len());
    for (name, value) in fields {
        let name = &buf[name.clone()];
        if HOP_BY_HOP
            .iter()
            .any(|hop| name.eq_ignore_ascii_case(hop.as_bytes()))
        {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name),
            HeaderValue::from_bytes(&buf[value.clone()]),
        ) {
            headers.append(name, value);
        }
    }
    headers
}

async fn relay_length(
    pipe: &mut ReadHalf<Pipe>,
    buf: &mut BytesMut,
    send: &mut SendStream<Bytes>,
    len: u64,
) -> Result<(), StreamBroken> {
    let mut left = len;
    loop {
        let take = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        left -= take as u64;
        let data = buf.split_to(take).freeze();
        let until_close = len == u64::MAX;
        send_data(send, data, left == 0).await?;
        if left == 0 {
            return Ok(());
        }
        if !read_more(pipe, buf).await {
            return if until_close {
                send_data(send, Bytes::new(), true).await
            } else {
                Err(StreamBroken)
            };
        }
    }
}

async fn relay_chunked(
    pipe: &mut ReadHalf<Pipe>,
    buf: &mut BytesMut,
    send: &mut SendStream<Bytes>,
) -> Result<(), StreamBroken> {
    let limits = http1::Limits {
        max_head: MAX_RESPONSE_HEAD,
        max_body: usize::MAX,
    };
    let mut decoder = ChunkedDecoder::default();
    let mut trailers = HeaderMap::new();
    loop {
        let mut data = BytesMut::new();
        let decoded = decoder
            .decode_parts(buf, &limits, |part| match part {
                Part::Data(bytes) => data.extend_from_slice(bytes),
                Part::Trailer(line) => {
                    if let Some((name, value)) = http1::chunked::split_field(line) {
                        if let (Ok(name), Ok(value)) =
                            (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
                        {
                            trailers.append(name, value);
                        }
                    }
                }
            })
            .map_err(|_| StreamBroken)?;
        let _ = buf.split_to(decoded.consumed);
        if !data.is_empty() {
            send_data(send, data.freeze(), false).await?;
        }
        if decoded.done {
            return if trailers.is_empty() {
                send_data(send, Bytes::new(), true).await
            } else {
                send.send_trailers(trailers).map_err(|_| StreamBroken)
            };
        }
        if !read_more(pipe, buf).await {
            return Err(StreamBroken);
        }
    }
}

/// Reads more of the answer; false at its end.
async fn read_more(pipe: &mut ReadHalf<Pipe>, buf: &mut BytesMut) -> bool {
    buf.reserve(READ_RESERVE);
    // No timer: the session bounds every wait and closes its end when done.
    matches!(pipe.read_buf(buf).await, Ok(n) if n > 0)
}

/// An answer of the adapter's own (before any session is involved).
fn answer_problem(respond: &mut SendResponse<Bytes>, problem: &Problem) {
    let body = Bytes::from(problem.to_json());
    let mut response = Response::new(());
    *response.status_mut() = problem.status();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(http1::problem::PROBLEM_JSON),
    );
    if let Ok(mut send) = respond.send_response(response, false) {
        let _ = send.send_data(body, true);
    }
}
