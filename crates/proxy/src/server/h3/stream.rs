//! One HTTP/3 request stream, handed to the HTTP/2 codec as a stream of
//! the connection's in-process HTTP/2 connection: the request head at
//! once, its body and trailers as they come (paced by the HTTP/2 window),
//! and the answer's head, body and trailers back as they come, each send
//! bounded by `limits.send_timeout` (a client that never reads has its
//! stream stopped). A client that resets its request or stops reading
//! the answer, at any point, drops the HTTP/2 stream, which cancels the
//! upstream exchange as for an HTTP/2 client; the connection counts it.

use std::{
    future::{poll_fn, Future},
    pin::Pin,
    task::Poll,
    time::Duration,
};

use bytes::Bytes;
use h2::{client::SendRequest, Reason, RecvStream, SendStream};
use http::{header, Response, StatusCode};
use http3::{
    head::FieldSection,
    request::Event,
    server::{ReadError, RequestReader, RequestStream, ResponseWriter},
    Code, Error,
};
use tracing::debug;

use super::bridge;
use crate::upstream::h2_pool::send_data;

/// How a request stream ended, for the connection's reset count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    Done,
    /// The client reset or stopped it before its answer was complete.
    Reset,
}

/// The deadlines of a request stream.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// For the head to arrive (`limits.header_read_timeout`).
    pub head: Duration,
    /// For each send to the client (`limits.send_timeout`).
    pub send: Duration,
}

/// Serves one request stream until its answer has gone out, failed, or
/// the client gave up on it.
pub(super) async fn serve(stream: RequestStream, h2: SendRequest<Bytes>, limits: Limits) -> Ended {
    let RequestStream {
        mut reader,
        mut writer,
    } = stream;
    // STOP_SENDING from the client, at any point: also after its request
    // ended, when a RESET_STREAM of its request side is no longer heard.
    let stopped = writer.stopped();
    let ended = tokio::select! {
        ended = exchange(&mut reader, &mut writer, h2, limits) => Some(ended),
        code = stopped => code.map(|_| Ended::Reset),
    };
    match ended {
        Some(ended) => ended,
        None => Ended::Done,
    }
    .also_reset(&mut reader, &mut writer)
}

impl Ended {
    /// A stream given up on is given up on both ways.
    fn also_reset(self, reader: &mut RequestReader, writer: &mut ResponseWriter) -> Self {
        if self == Ended::Reset {
            writer.reset(Code::H3_REQUEST_CANCELLED);
            reader.stop(Code::H3_REQUEST_CANCELLED);
        }
        self
    }
}

async fn exchange(
    reader: &mut RequestReader,
    writer: &mut ResponseWriter,
    h2: SendRequest<Bytes>,
    limits: Limits,
) -> Ended {
    let head = match tokio::time::timeout(limits.head, reader.next()).await {
        Ok(Ok(Some(Event::Head(head)))) => head,
        Ok(Err(ReadError::Protocol(Error::HeadTooLarge))) => {
            reader.stop(Code::H3_NO_ERROR);
            let detail = "the request head is larger than the advertised field section limit";
            problem(writer, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, detail).await;
            return Ended::Done;
        }
        Ok(Err(err)) => return refused(writer, err),
        Ok(Ok(_)) => return Ended::Done,
        Err(_) => {
            debug!("an HTTP/3 request head did not arrive in time");
            reader.stop(Code::H3_REQUEST_INCOMPLETE);
            writer.reset(Code::H3_REQUEST_INCOMPLETE);
            return Ended::Done;
        }
    };
    let Some(request) = bridge::request(&head) else {
        return refused(
            writer,
            ReadError::Protocol(Error::Stream(Code::H3_MESSAGE_ERROR, "")),
        );
    };
    drop(head);
    // The body is empty if the stream ends right after the head: the
    // HTTP/2 side then sees END_STREAM on HEADERS, so that the upstream
    // gets a request without a body rather than an empty chunked one. A
    // client's end of stream can come a packet after its head, so the
    // first body event is waited for, briefly: a body that has not begun
    // by then (a client waiting for `100 Continue`) streams.
    let first = match tokio::time::timeout(FIRST_BODY_WAIT, reader.next()).await {
        Ok(Ok(None | Some(Event::End))) => First::End,
        Ok(Ok(Some(Event::Trailers(trailers)))) => match until_end(reader, trailers).await {
            Ok(trailers) => First::Event(Event::Trailers(trailers)),
            Err(err) => return refused(writer, err),
        },
        Ok(Ok(Some(event))) => First::Event(event),
        Ok(Err(err)) => return refused(writer, err),
        Err(_) => First::Nothing,
    };
    let opened = match h2.ready().await {
        Ok(mut h2) => h2.send_request(request, matches!(first, First::End)),
        Err(err) => Err(err),
    };
    let (response, upstream) = match opened {
        Ok(opened) => opened,
        Err(err) => {
            debug!(%err, "an HTTP/3 request not passed on");
            // The HTTP/2 side is going away, or refused what it was given.
            let status = match err.is_go_away() || err.is_io() {
                true => StatusCode::SERVICE_UNAVAILABLE,
                false => StatusCode::BAD_REQUEST,
            };
            problem(writer, status, "the request cannot be served").await;
            return Ended::Done;
        }
    };
    let pump = async {
        if matches!(first, First::End) {
            // The answer decides when this stream ends.
            return std::future::pending().await;
        }
        match pump_request(first, reader, upstream).await {
            Ok(()) => std::future::pending().await,
            Err(err) => err,
        }
    };
    let relay = relay_response(response, writer, limits.send);
    let outcome = tokio::select! {
        err = pump => Outcome::RequestBroke(err),
        answered = relay => Outcome::Answered(answered),
    };
    match outcome {
        Outcome::Answered(true) => {
            // The answer is complete: the rest of the request is not needed,
            // and the client is told so with H3_NO_ERROR (RFC 9114 4.1).
            if !reader.ended() {
                reader.stop(Code::H3_NO_ERROR);
            }
            Ended::Done
        }
        Outcome::Answered(false) => Ended::Done,
        Outcome::RequestBroke(err) => refused(writer, err),
    }
}

/// How the exchange's two directions ended.
enum Outcome {
    /// The answer went out whole (`true`) or broke off (`false`).
    Answered(bool),
    /// The request side failed first (its HTTP/2 stream is reset).
    RequestBroke(ReadError),
}

/// The end of a request that could not be read: a client reset counts
/// against the connection, a malformed request resets the stream with its
/// code; a connection error has closed the connection already.
fn refused(writer: &mut ResponseWriter, err: ReadError) -> Ended {
    debug!(?err, "an HTTP/3 request refused or broken off");
    match err {
        ReadError::Reset(_) => Ended::Reset,
        ReadError::Protocol(Error::Stream(code, _)) => {
            writer.reset(code);
            Ended::Done
        }
        ReadError::Protocol(_) | ReadError::Lost => Ended::Done,
    }
}

/// How long the head waits for the body's first event (its end, for a
/// request without one). Seen on loopback: the end of stream a packet
/// after the head, and then a GET went upstream chunked.
const FIRST_BODY_WAIT: Duration = Duration::from_millis(20);

/// What the first look at the request body found.
enum First {
    End,
    Event(Event),
    Nothing,
}

/// The client's body and trailers to the HTTP/2 side, as they come. A
/// body that breaks off (a reset, a malformed end, a body longer or
/// shorter than its content-length) resets the HTTP/2 stream, so that an
/// upstream never takes a cut-off body for a whole one.
async fn pump_request(
    first: First,
    reader: &mut RequestReader,
    mut upstream: SendStream<Bytes>,
) -> Result<(), ReadError> {
    let mut next = match first {
        First::Event(event) => Some(Ok(Some(event))),
        _ => None,
    };
    loop {
        let event = match next.take() {
            Some(event) => event,
            None => reader.next().await,
        };
        match event {
            Ok(Some(Event::Data(data))) => {
                if send_data(&mut upstream, data, false, None).await.is_err() {
                    // The HTTP/2 side answered or refused: no more needed.
                    reader.stop(Code::H3_NO_ERROR);
                    return Ok(());
                }
            }
            Ok(Some(Event::Trailers(trailers))) => {
                let trailers = match until_end(reader, trailers).await {
                    Ok(trailers) => trailers,
                    Err(err) => {
                        upstream.send_reset(Reason::CANCEL);
                        return Err(err);
                    }
                };
                match bridge::trailers(&trailers) {
                    Some(map) => drop(upstream.send_trailers(map)),
                    None => upstream.send_reset(Reason::CANCEL),
                }
                return Ok(());
            }
            Ok(None | Some(Event::End)) => {
                let _ = send_data(&mut upstream, Bytes::new(), true, None).await;
                return Ok(());
            }
            Ok(Some(Event::Head(_))) => unreachable_head(&mut upstream),
            Err(err) => {
                upstream.send_reset(Reason::CANCEL);
                return Err(err);
            }
        }
    }
}

/// Trailers end a request only together with its stream, so they are
/// passed on once the stream has ended: a frame after them (HEADERS,
/// HEADERS, DATA) closes the connection instead, and what came before
/// never reaches the upstream as a whole request.
async fn until_end(
    reader: &mut RequestReader,
    trailers: FieldSection,
) -> Result<FieldSection, ReadError> {
    match reader.next().await {
        Ok(None | Some(Event::End)) => Ok(trailers),
        // Nothing but the end can follow trailers in the decoder.
        Ok(Some(_)) => Err(ReadError::Protocol(Error::Stream(
            Code::H3_MESSAGE_ERROR,
            "more after trailers",
        ))),
        Err(err) => Err(err),
    }
}

/// The decoder yields one head per stream; were it to yield another, the
/// request is cancelled rather than trusted.
fn unreachable_head(upstream: &mut SendStream<Bytes>) {
    upstream.send_reset(Reason::CANCEL);
}

/// The HTTP/2 side's answer to the client: its interim (1xx) heads, each
/// an HTTP/3 HEADERS frame before the final one (RFC 9114 4.1), then
/// head, body, trailers. The HTTP/2 codec has already bounded how many
/// interim heads an upstream may send and taken out their hop-by-hop
/// fields. `true` when the whole answer went out.
async fn relay_response(
    mut response: h2::client::ResponseFuture,
    writer: &mut ResponseWriter,
    send_timeout: Duration,
) -> bool {
    let response = loop {
        let head = poll_fn(|cx| match response.poll_informational(cx) {
            Poll::Ready(Some(Ok(interim))) => Poll::Ready(Head::Interim(interim)),
            // No interim head waiting (an error shows in the final one).
            _ => Pin::new(&mut response).poll(cx).map(Head::Final),
        })
        .await;
        match head {
            Head::Interim(interim) => {
                let head =
                    writer.head(interim.status().as_u16(), bridge::fields(interim.headers()));
                if !sent(send_timeout, head).await {
                    return cancelled(writer);
                }
            }
            Head::Final(response) => break response,
        }
    };
    let response = match response {
        Ok(response) => response,
        Err(err) => {
            // The client's own reset (its body broke off) or a broken bridge.
            debug!(%err, "no answer for an HTTP/3 request");
            return cancelled(writer);
        }
    };
    let (parts, mut body) = response.into_parts();
    let head = writer.head(parts.status.as_u16(), bridge::fields(&parts.headers));
    if !sent(send_timeout, head).await {
        return cancelled(writer);
    }
    if relay_body(&mut body, writer, send_timeout).await.is_none() {
        // Dropping `body` resets the HTTP/2 stream: the upstream work stops.
        return cancelled(writer);
    }
    writer.finish();
    true
}

fn cancelled(writer: &mut ResponseWriter) -> bool {
    writer.reset(Code::H3_REQUEST_CANCELLED);
    false
}

/// What the HTTP/2 side answered next.
enum Head {
    Interim(Response<()>),
    Final(Result<Response<RecvStream>, h2::Error>),
}

/// DATA frames, then trailers; `None` when either side broke off.
async fn relay_body(
    body: &mut RecvStream,
    writer: &mut ResponseWriter,
    timeout: Duration,
) -> Option<()> {
    while let Some(data) = body.data().await {
        let data = data.ok()?;
        let len = data.len();
        if !sent(timeout, writer.data(data)).await {
            return None;
        }
        let _ = body.flow_control().release_capacity(len);
    }
    if let Some(trailers) = body.trailers().await.ok()? {
        if !sent(timeout, writer.trailers(bridge::fields(&trailers))).await {
            return None;
        }
    }
    Some(())
}

/// Whether a send to the client went out within `limits.send_timeout`.
async fn sent<E>(timeout: Duration, send: impl Future<Output = Result<(), E>>) -> bool {
    matches!(tokio::time::timeout(timeout, send).await, Ok(Ok(())))
}

/// A problem+json answer of the proxy's own.
async fn problem(writer: &mut ResponseWriter, status: StatusCode, detail: &str) {
    let body = http1::Problem::new(status, detail.to_string()).to_json();
    let length = body.len().to_string();
    let fields = [
        (
            header::CONTENT_TYPE.as_str().as_bytes(),
            http1::problem::PROBLEM_JSON.as_bytes(),
        ),
        (
            header::CONTENT_LENGTH.as_str().as_bytes(),
            length.as_bytes(),
        ),
    ];
    if writer.head(status.as_u16(), fields).await.is_ok()
        && writer.data(Bytes::from(body)).await.is_ok()
    {
        writer.finish();
    }
}
