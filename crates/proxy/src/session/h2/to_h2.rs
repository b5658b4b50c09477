//! An HTTP/2 client's stream to an HTTP/2 upstream: a stream on a pooled
//! multiplexed connection. The request body is pumped upstream while the
//! response comes back, each with its own flow control, so both flow at
//! once; trailers pass both ways.

use std::{future::poll_fn, sync::Arc, time::Instant};

use bytes::Bytes;
use h2::{client::ResponseFuture, Reason, RecvStream, SendStream};
use http::{header, HeaderMap, Request, StatusCode, Uri};

use super::{RequestBody, Stream};
use crate::{
    ids::{HostId, UpstreamId},
    session::{
        send::{resend_after_refused, Sender},
        Failure,
    },
    telemetry::UpstreamError,
    upstream::h2_pool::{self, send_data, Counted},
    wire::{
        head::{Outgoing, RequestContext},
        http2,
    },
};

/// Why pumping the request body stopped early.
pub(super) enum PumpError {
    /// The client broke off (or reset) its stream.
    Client,
    /// The upstream stream cannot take more.
    Upstream,
    /// More than the route allows.
    TooLarge,
}

/// Forwards the stream's request as a stream of an HTTP/2 upstream
/// connection and relays its answer (head, body, trailers) to the client.
#[allow(clippy::too_many_arguments)]
pub(super) async fn forward(
    stream: &mut Stream,
    upstream: UpstreamId,
    outgoing: &Outgoing<'_>,
    context: &RequestContext<'_>,
    source: &Uri,
    body: RequestBody,
    max_body: usize,
) -> Result<(), Failure> {
    let plan = Arc::clone(&stream.plan);
    let worker = Arc::clone(&stream.worker);
    let config = plan.upstream(upstream);
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let build = || {
        let fallback = config.host_name(HostId::new(0));
        http2::upstream_request(outgoing, context, scheme, fallback, Some(source)).ok_or_else(
            || {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    "the request cannot be expressed in HTTP/2",
                )
            },
        )
    };
    // Built once; again only if a refused stream is sent again.
    let mut request = Some(build()?);
    let sender = Sender::new(&plan, &worker, upstream, stream.origin.peer);
    let counted = Counted {
        metrics: Arc::clone(&worker.metrics),
        shard: worker.index,
    };
    let max_header_list = u32::try_from(plan.limits.max_head).unwrap_or(u32::MAX);
    let in_hand = body.in_hand();
    let empty = matches!(body, RequestBody::Empty);
    let mut host = sender.pick(outgoing).await?;
    let mut attempts = 0;
    let (response, upstream_body, lease, sent_at) = loop {
        let (send, lease) = match h2_pool::stream(
            &worker.h2_pool,
            config,
            upstream,
            host,
            max_header_list,
            &counted,
        )
        .await
        {
            Ok(found) => found,
            Err(err) => {
                let failure = sender.connect_failure(host, err);
                host = sender.after_failure(host, &mut attempts, failure).await?;
                continue;
            }
        };
        let this = match request.take() {
            Some(built) => built,
            None => build()?,
        };
        match open(send, this, empty).await {
            Ok((response, body)) => break (response, body, lease, Instant::now()),
            Err(err)
                if refused(&err) && resend_after_refused(attempts, config.retries, in_hand) =>
            {
                attempts += 1;
            }
            Err(err) => {
                let what = if refused(&err) {
                    "the upstream refused the stream".to_string()
                } else {
                    format!("cannot open a stream: {err}")
                };
                return Err(sender.failure(host, UpstreamError::Broken, &what, !in_hand));
            }
        }
    };
    let timeout = config.timeouts.request;
    let pump = pump(body, upstream_body, max_body);
    let relay = relay(stream, &sender, host, response, sent_at, timeout);
    tokio::pin!(pump, relay);
    let mut pumped = false;
    let outcome = loop {
        tokio::select! {
            done = &mut pump, if !pumped => {
                pumped = true;
                match done {
                    Ok(()) => {}
                    // The response still comes; the client is told by its reset.
                    Err(PumpError::Client | PumpError::Upstream) => {}
                    Err(PumpError::TooLarge) => break Err(super::too_large(max_body)),
                }
            }
            // An answer that ends before the request does stops the pump
            // (RFC 9113 8.1: the rest of the request is not needed).
            relayed = &mut relay => break relayed,
        }
    };
    drop(lease);
    outcome
}

/// Opens the stream once the connection takes one more.
async fn open(
    send: h2::client::SendRequest<Bytes>,
    request: Request<()>,
    end: bool,
) -> Result<(ResponseFuture, SendStream<Bytes>), h2::Error> {
    let mut send = send.ready().await?;
    send.send_request(request, end)
}

/// Refused before the upstream processed it: safe to send again.
fn refused(err: &h2::Error) -> bool {
    err.reason() == Some(Reason::REFUSED_STREAM) || err.is_go_away()
}

/// Sends the request body upstream: the held bytes, or the client's DATA
/// frames as they come (their flow-control credit returned to the client
/// only once the upstream took them), then the client's trailers.
pub(super) async fn pump(
    body: RequestBody,
    mut upstream: SendStream<Bytes>,
    max_body: usize,
) -> Result<(), PumpError> {
    let mut client = match body {
        RequestBody::Empty => return Ok(()),
        RequestBody::Held(bytes, trailers) => {
            send_data(&mut upstream, bytes, trailers.is_none())
                .await
                .map_err(|_| PumpError::Upstream)?;
            return match trailers {
                Some(trailers) => upstream
                    .send_trailers(trailers)
                    .map_err(|_| PumpError::Upstream),
                None => Ok(()),
            };
        }
        RequestBody::Streaming(client) => client,
    };
    let mut sent = 0;
    while let Some(data) = client.data().await {
        let data = data.map_err(|_| {
            upstream.send_reset(Reason::CANCEL);
            PumpError::Client
        })?;
        let len = data.len();
        sent += len;
        if sent > max_body {
            upstream.send_reset(Reason::CANCEL);
            return Err(PumpError::TooLarge);
        }
        let last = client.is_end_stream();
        send_data(&mut upstream, data, last)
            .await
            .map_err(|_| PumpError::Upstream)?;
        let _ = client.flow_control().release_capacity(len);
        if last {
            return Ok(());
        }
    }
    match client.trailers().await {
        Ok(Some(trailers)) => upstream
            .send_trailers(trailers)
            .map_err(|_| PumpError::Upstream),
        Ok(None) => send_data(&mut upstream, Bytes::new(), true)
            .await
            .map_err(|_| PumpError::Upstream),
        Err(_) => {
            upstream.send_reset(Reason::CANCEL);
            Err(PumpError::Client)
        }
    }
}

/// Waits for the response head, then relays the response to the client.
async fn relay(
    stream: &mut Stream,
    sender: &Sender<'_>,
    host: HostId,
    response: ResponseFuture,
    sent_at: Instant,
    timeout: std::time::Duration,
) -> Result<(), Failure> {
    let response = match tokio::time::timeout(timeout, response).await {
        Ok(Ok(response)) => response,
        Ok(Err(err)) => {
            return Err(sender.broken(host, &format!("the stream failed: {err}"), false));
        }
        Err(_) => return Err(sender.timed_out(host, timeout)),
    };
    sender.answered(host, sent_at, response.status());
    sender.learn_cookies(host, crate::wire::fields::Fields::Map(response.headers()));
    let (parts, body) = response.into_parts();
    let status = parts.status;
    stream.outcome = crate::middleware::Outcome {
        status,
        upstream: Some(sender.upstream),
        body_bytes: 0,
    };
    let edits = sender.with_cookie(host, stream.response_edits(status));
    // A body's length is kept when the upstream gave it; a trailers-only
    // answer (gRPC errors) carries none.
    let head = http2::client_response_from(status, parts.headers, edits.as_ref());
    if let Some(edits) = edits {
        stream.exchange.response_headers = edits;
    }
    let end = body.is_end_stream();
    let Some(send) = stream.send_head(head, end) else {
        return Ok(());
    };
    if end {
        return Ok(());
    }
    let relayed = relay_body(body, send, timeout).await;
    stream.outcome.body_bytes = relayed.bytes;
    if let Some(what) = relayed.broken {
        sender
            .worker
            .metrics()
            .upstream_error(sender.upstream, UpstreamError::Broken);
        tracing::debug!(upstream = %sender.plan.upstream(sender.upstream).name, %what, "an HTTP/2 response body broke off");
    }
    Ok(())
}

/// How relaying a body went.
pub(super) struct Relayed {
    pub bytes: u64,
    /// Why it broke off, if it did (the client's stream was reset).
    pub broken: Option<String>,
}

/// Relays DATA frames and trailers from the upstream to the client.
async fn relay_body(
    mut body: RecvStream,
    mut client: SendStream<Bytes>,
    timeout: std::time::Duration,
) -> Relayed {
    let mut bytes = 0;
    let broke = |client: &mut SendStream<Bytes>, bytes, what: String| {
        client.send_reset(Reason::INTERNAL_ERROR);
        Relayed {
            bytes,
            broken: Some(what),
        }
    };
    loop {
        let next = tokio::time::timeout(timeout, poll_fn(|cx| body.poll_data(cx))).await;
        let data = match next {
            Err(_) => return broke(&mut client, bytes, "timed out".into()),
            Ok(None) => break,
            Ok(Some(Err(err))) => return broke(&mut client, bytes, err.to_string()),
            Ok(Some(Ok(data))) => data,
        };
        let len = data.len();
        bytes += len as u64;
        // The upstream's last frame ends the client's stream too: one
        // frame, not the data and then an empty one.
        let last = body.is_end_stream();
        if send_data(&mut client, data, last).await.is_err() {
            // The client went away: nothing more to send it.
            return Relayed {
                bytes,
                broken: None,
            };
        }
        let _ = body.flow_control().release_capacity(len);
        if last {
            return Relayed {
                bytes,
                broken: None,
            };
        }
    }
    let trailers = tokio::time::timeout(timeout, poll_fn(|cx| body.poll_trailers(cx))).await;
    match trailers {
        Ok(Ok(Some(trailers))) => {
            let _ = client.send_trailers(without_framing(trailers));
        }
        Ok(Ok(None)) => {
            let _ = send_data(&mut client, Bytes::new(), true).await;
        }
        Ok(Err(err)) => return broke(&mut client, bytes, err.to_string()),
        Err(_) => return broke(&mut client, bytes, "timed out".into()),
    }
    Relayed {
        bytes,
        broken: None,
    }
}

/// Trailers may not carry framing or routing fields (RFC 9110 6.5.1).
pub(super) fn without_framing(mut trailers: HeaderMap) -> HeaderMap {
    trailers.remove(header::CONTENT_LENGTH);
    trailers.remove(header::TRANSFER_ENCODING);
    trailers.remove(header::HOST);
    trailers
}
