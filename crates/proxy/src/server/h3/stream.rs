//! One HTTP/3 request stream, handed to the HTTP/2 codec as a stream of
//! the connection's in-process HTTP/2 connection: the request head at
//! once, its body and trailers as they come (paced by the HTTP/2 window),
//! and the answer's head, body and trailers back as they come, each send
//! bounded by `limits.send_timeout` (a client that never reads has its
//! stream stopped). A client that resets its stream resets the HTTP/2
//! one, which cancels the upstream exchange as for an HTTP/2 client.

use std::{
    future::{poll_fn, Future},
    pin::Pin,
    task::Poll,
    time::Duration,
};

use bytes::{Buf, Bytes};
use h2::{client::SendRequest, Reason, RecvStream, SendStream};
use h3::{error::Code, server::RequestResolver, server::RequestStream};
use http::{header, HeaderValue, Response, StatusCode};
use tracing::debug;

use crate::upstream::h2_pool::send_data;

type Quic = h3_quinn::Connection;
type SendHalf = RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;
type RecvHalf = RequestStream<h3_quinn::RecvStream, Bytes>;

/// Serves one request stream until its answer has gone out (or failed).
pub(super) async fn serve(
    resolver: RequestResolver<Quic, Bytes>,
    h2: SendRequest<Bytes>,
    send_timeout: Duration,
) {
    // An oversize field section is answered 431 by `h3` itself here.
    let (request, stream) = match resolver.resolve_request().await {
        Ok(resolved) => resolved,
        Err(err) => return debug!(%err, "an HTTP/3 request refused"),
    };
    let (mut send, mut recv) = stream.split();
    // The body is empty if the stream ends right after the head: the
    // HTTP/2 side then sees END_STREAM on HEADERS, so that the upstream
    // gets a request without a body rather than an empty chunked one. A
    // client's end of stream can come a packet after its head, so the
    // first body event is waited for, briefly: a body that has not begun
    // by then (a client waiting for `100 Continue`) streams.
    let begun = tokio::time::timeout(FIRST_BODY_WAIT, poll_fn(|cx| recv.poll_recv_data(cx)));
    let first = match begun.await {
        Ok(Ok(None)) => First::End,
        Ok(Ok(Some(mut data))) => First::Data(data.copy_to_bytes(data.remaining())),
        Ok(Err(err)) => return debug!(%err, "an HTTP/3 request body broke off"),
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
            // A request HTTP/2 cannot carry (a connection-specific
            // field), or the HTTP/2 side is going away.
            let status = match err.is_go_away() || err.is_io() {
                true => StatusCode::SERVICE_UNAVAILABLE,
                false => StatusCode::BAD_REQUEST,
            };
            return problem(&mut send, status, "the request cannot be served").await;
        }
    };
    let pump = async {
        if !matches!(first, First::End) {
            pump_request(first, &mut recv, upstream).await;
        }
        // Then wait: the answer decides when this stream ends.
        std::future::pending::<()>().await;
    };
    let relay = relay_response(response, &mut send, send_timeout);
    let answered = tokio::select! {
        () = pump => false,
        () = relay => true,
    };
    if answered {
        // The answer is complete: the rest of the request is not needed,
        // and the client is told so with H3_NO_ERROR (RFC 9114 4.1), not
        // the bare 0 a dropped QUIC stream would send.
        recv.stop_sending(Code::H3_NO_ERROR);
    }
}

/// How long the head waits for the body's first event (its end, for a
/// request without one). Seen on loopback: the end of stream a packet
/// after the head, and then a GET went upstream chunked.
const FIRST_BODY_WAIT: Duration = Duration::from_millis(20);

/// What the first look at the request body found.
enum First {
    End,
    Data(Bytes),
    Nothing,
}

/// The client's body and trailers to the HTTP/2 side, as they come.
async fn pump_request(first: First, recv: &mut RecvHalf, mut upstream: SendStream<Bytes>) {
    if let First::Data(data) = first {
        if send_data(&mut upstream, data, false, None).await.is_err() {
            return;
        }
    }
    loop {
        match poll_fn(|cx| recv.poll_recv_data(cx)).await {
            Ok(Some(mut data)) => {
                let data = data.copy_to_bytes(data.remaining());
                if send_data(&mut upstream, data, false, None).await.is_err() {
                    // The HTTP/2 side answered or refused: no more needed.
                    recv.stop_sending(Code::H3_NO_ERROR);
                    return;
                }
            }
            Ok(None) => break,
            Err(err) => {
                debug!(%err, "an HTTP/3 request body broke off");
                upstream.send_reset(Reason::CANCEL);
                return;
            }
        }
    }
    match recv.recv_trailers().await {
        Ok(Some(trailers)) => {
            let _ = upstream.send_trailers(trailers);
        }
        Ok(None) => {
            let _ = send_data(&mut upstream, Bytes::new(), true, None).await;
        }
        Err(_) => upstream.send_reset(Reason::CANCEL),
    }
}

/// The HTTP/2 side's answer to the client: its interim (1xx) heads, each
/// an HTTP/3 HEADERS frame before the final one (RFC 9114 4.1), then
/// head, body, trailers. The HTTP/2 codec has already bounded how many
/// interim heads an upstream may send and taken out their hop-by-hop
/// fields.
async fn relay_response(
    mut response: h2::client::ResponseFuture,
    send: &mut SendHalf,
    send_timeout: Duration,
) {
    let response = loop {
        let head = poll_fn(|cx| match response.poll_informational(cx) {
            Poll::Ready(Some(Ok(interim))) => Poll::Ready(Head::Interim(interim)),
            // No interim head waiting (an error shows in the final one).
            _ => Pin::new(&mut response).poll(cx).map(Head::Final),
        })
        .await;
        match head {
            Head::Interim(interim) => {
                if !sent(send_timeout, send.send_response(interim)).await {
                    return send.stop_stream(Code::H3_REQUEST_CANCELLED);
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
            return send.stop_stream(Code::H3_REQUEST_CANCELLED);
        }
    };
    let (parts, mut body) = response.into_parts();
    let head = Response::from_parts(parts, ());
    if !sent(send_timeout, send.send_response(head)).await {
        return send.stop_stream(Code::H3_REQUEST_CANCELLED);
    }
    if relay_body(&mut body, send, send_timeout).await.is_none() {
        // Dropping `body` resets the HTTP/2 stream: the upstream work stops.
        return send.stop_stream(Code::H3_REQUEST_CANCELLED);
    }
    let _ = sent(send_timeout, send.finish()).await;
}

/// What the HTTP/2 side answered next.
enum Head {
    Interim(Response<()>),
    Final(Result<Response<RecvStream>, h2::Error>),
}

/// DATA frames, then trailers; `None` when either side broke off.
async fn relay_body(body: &mut RecvStream, send: &mut SendHalf, timeout: Duration) -> Option<()> {
    while let Some(data) = body.data().await {
        let data = data.ok()?;
        let len = data.len();
        if !sent(timeout, send.send_data(data)).await {
            return None;
        }
        let _ = body.flow_control().release_capacity(len);
    }
    if let Some(trailers) = body.trailers().await.ok()? {
        if !sent(timeout, send.send_trailers(trailers)).await {
            return None;
        }
    }
    Some(())
}

/// Whether a send to the client went out within `limits.send_timeout`.
async fn sent<E>(
    timeout: Duration,
    send: impl std::future::Future<Output = Result<(), E>>,
) -> bool {
    matches!(tokio::time::timeout(timeout, send).await, Ok(Ok(())))
}

/// A problem+json answer of the proxy's own, for a request the HTTP/2
/// side could not take.
async fn problem(send: &mut SendHalf, status: StatusCode, detail: &str) {
    let body = http1::Problem::new(status, detail.to_string()).to_json();
    let mut head = Response::new(());
    *head.status_mut() = status;
    let content_type = HeaderValue::from_static(http1::problem::PROBLEM_JSON);
    head.headers_mut()
        .insert(header::CONTENT_TYPE, content_type);
    head.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    if send.send_response(head).await.is_ok() && send.send_data(Bytes::from(body)).await.is_ok() {
        let _ = send.finish().await;
    }
}
