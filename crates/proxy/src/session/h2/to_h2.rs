//! An HTTP/2 client's stream to an HTTP/2 upstream: a stream on a pooled
//! multiplexed connection. The request body is pumped upstream while the
//! response comes back, each with its own flow control, so both flow at
//! once; trailers pass both ways. Each attempt asks `exchange::decide`
//! what follows it (a refused stream resent, `retry_on`), as every pair.

use std::{
    future::{poll_fn, Future},
    pin::{pin, Pin},
    sync::Arc,
    task::Poll,
    time::Instant,
};

use bytes::Bytes;
use h2::{client::ResponseFuture, Reason, RecvStream, SendStream};
use http::{Request, Response, StatusCode, Uri};

use super::{
    to_h1::{stopped, RelayStop},
    unless_reset, ClientSide, RequestBody, Stream, TrailerRules,
};
use crate::{
    config::TrailerPolicy,
    ids::{HostId, UpstreamId},
    session::{
        exchange::decide::{Retries, Then, Tried},
        passable_trailers,
        send::Sender,
        Failure,
    },
    telemetry::{Event, Shard, UpstreamError},
    upstream::h2_pool::{self, send_data, Counted, UpstreamHead},
    wire::{
        edits::HeaderEdits,
        fields::Fields,
        head::{Outgoing, RequestContext},
        http2,
        interim::TooMany,
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
    // Built once; again only if the request is sent again.
    let mut request = Some(build()?);
    let sender = Sender::new(&plan, &worker, upstream, stream.origin.peer);
    let counted = Counted {
        metrics: Arc::clone(&worker.metrics),
        shard: worker.index,
    };
    let max_header_list = u32::try_from(plan.limits.max_head).unwrap_or(u32::MAX);
    let empty = matches!(body, RequestBody::Empty);
    let mut retries = Retries::new(config.retries, outgoing.method, body.in_hand());
    let mut body = body;
    let timeout = config.timeouts.request;
    let trailer_rules = TrailerRules {
        forward: stream.request_trailers() != TrailerPolicy::Drop,
        edits: context.edits,
        metrics: worker.metrics(),
    };
    // The request body on its way up, from the attempt that opened it on.
    let mut pumping = pin!(None);
    let mut host = sender.pick(outgoing).await?;
    let (response, lease) = loop {
        let taken = h2_pool::stream(
            &worker.h2_pool,
            config,
            upstream,
            host,
            max_header_list,
            &counted,
        );
        let (send, lease) = match stream.unless_reset(taken).await? {
            Ok(found) => found,
            Err(err) => {
                let failure = sender.connect_failure(host, err);
                host = sender.after_failure(host, &mut retries, failure).await?;
                continue;
            }
        };
        let this = match request.take() {
            Some(built) => built,
            None => build()?,
        };
        let sent_at = Instant::now();
        let opened = stream.unless_reset(open(send, this, empty)).await?;
        let waited = match opened {
            Ok((mut response, upstream_body)) => {
                let body = body.for_attempt();
                pumping.set(Some(pump(body, upstream_body, max_body, trailer_rules)));
                let pump = pumping.as_mut();
                let limits = (timeout, max_body);
                wait_head(stream, &sender, host, &mut response, pump, limits).await?
            }
            Err(err) => Err(err),
        };
        let (tried, failure) = match waited {
            Ok(response) => {
                sender.answered(host, sent_at, response.status());
                let then = sender.decide(Tried::Answered(response.status()), &mut retries);
                if then != Then::Answer {
                    if let Some(next) = sender.next_host(host, then, &retries).await {
                        // The answer is dropped with its stream (reset).
                        pumping.set(None);
                        host = next;
                        continue;
                    }
                }
                break (response, lease);
            }
            Err(err) if refused(&err) => {
                if err.is_go_away() {
                    lease.retire();
                }
                (Tried::Refused, None)
            }
            Err(err) => {
                let what = format!("the stream failed: {err}");
                let failure = sender.broken(host, &what, !retries.in_hand());
                (Tried::Reset, Some(failure))
            }
        };
        pumping.set(None);
        host = match sender.again(host, tried, &mut retries).await {
            Some(next) => next,
            None => {
                return Err(failure.unwrap_or_else(|| {
                    let what = "the upstream refused the stream";
                    sender.failure(host, UpstreamError::Broken, what, !retries.in_hand())
                }))
            }
        };
    };
    let relay = relay(stream, &sender, host, response, timeout);
    tokio::pin!(relay);
    let outcome = loop {
        tokio::select! {
            // In order: no random start to draw on every poll.
            biased;
            done = pumped(pumping.as_mut()) => match done {
                Ok(()) => {}
                // The response still comes; the client is told by its reset.
                Err(PumpError::Client | PumpError::Upstream) => {}
                Err(PumpError::TooLarge) => break Err(super::too_large(max_body)),
            },
            // An answer that ends before the request does stops the pump
            // (RFC 9113 8.1: the rest of the request is not needed).
            relayed = &mut relay => break relayed,
        }
    };
    drop(lease);
    outcome
}

/// The pump's end, once (pending after, and while there is none).
async fn pumped<F: Future<Output = Result<(), PumpError>>>(
    mut pumping: Pin<&mut Option<F>>,
) -> Result<(), PumpError> {
    let done = poll_fn(|cx| match pumping.as_mut().as_pin_mut() {
        Some(pump) => pump.poll(cx),
        None => Poll::Pending,
    })
    .await;
    pumping.set(None);
    done
}

/// Waits for the final response head (sending interim answers on) while
/// the request body goes up, unless the client resets its stream first.
/// `Err(h2::Error)`: the stream failed (or was refused) before it.
async fn wait_head<F: Future<Output = Result<(), PumpError>>>(
    stream: &mut Stream,
    sender: &Sender<'_>,
    host: HostId,
    response: &mut ResponseFuture,
    mut pumping: Pin<&mut Option<F>>,
    (timeout, max_body): (std::time::Duration, usize),
) -> Result<Result<Response<RecvStream>, h2::Error>, Failure> {
    loop {
        // The head, unless the client resets its stream first (in the
        // one poll: `Stream::unless_reset` would be a layer more).
        let respond = &mut stream.respond;
        let next = poll_fn(|cx| {
            if let Poll::Ready(head) = h2_pool::poll_head(response, cx) {
                return Poll::Ready(Some(Ok(head)));
            }
            if let Some(pump) = pumping.as_mut().as_pin_mut() {
                if let Poll::Ready(done) = pump.poll(cx) {
                    return Poll::Ready(Some(Err(done)));
                }
            }
            respond.poll_client_reset(cx).map(|()| None)
        });
        let Some(next) = tokio::time::timeout(timeout, next).await.transpose() else {
            return Err(stream.cancelled());
        };
        match next {
            Ok(Ok(Ok(UpstreamHead::Interim(interim)))) => {
                let fields = Fields::Map(interim.headers());
                if stream.interim(interim.status(), fields).is_err() {
                    sender.worker.metrics().event(Event::InterimFlood);
                    return Err(sender.broken(host, TooMany::DETAIL, false));
                }
            }
            Ok(Ok(Ok(UpstreamHead::Final(response)))) => return Ok(Ok(response)),
            Ok(Ok(Err(err))) => return Ok(Err(err)),
            // The body is all up (or stopped): the head is awaited alone.
            Ok(Err(done)) => {
                pumping.set(None);
                if let Err(PumpError::TooLarge) = done {
                    return Err(super::too_large(max_body));
                }
            }
            Err(_) => return Err(sender.timed_out(host, timeout)),
        }
    }
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
/// only once the upstream took them), then the client's trailers as the
/// route's `request_trailers` and the trailer rules allow.
pub(super) async fn pump(
    body: RequestBody,
    mut upstream: SendStream<Bytes>,
    max_body: usize,
    trailer_rules: TrailerRules<'_>,
) -> Result<(), PumpError> {
    let mut client = match body {
        RequestBody::Empty => return Ok(()),
        RequestBody::Held(bytes, trailers) => {
            let trailers = trailers.and_then(|t| trailer_rules.passable(t));
            send_data(&mut upstream, bytes, trailers.is_none(), None)
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
        send_data(&mut upstream, data, last, None)
            .await
            .map_err(|_| PumpError::Upstream)?;
        let _ = client.flow_control().release_capacity(len);
        if last {
            return Ok(());
        }
    }
    match client.trailers().await {
        Ok(Some(trailers)) => match trailer_rules.passable(trailers) {
            Some(trailers) => upstream
                .send_trailers(trailers)
                .map_err(|_| PumpError::Upstream),
            None => send_data(&mut upstream, Bytes::new(), true, None)
                .await
                .map_err(|_| PumpError::Upstream),
        },
        Ok(None) => send_data(&mut upstream, Bytes::new(), true, None)
            .await
            .map_err(|_| PumpError::Upstream),
        Err(_) => {
            upstream.send_reset(Reason::CANCEL);
            Err(PumpError::Client)
        }
    }
}

/// Relays the response (head, body, trailers) to the client.
async fn relay(
    stream: &mut Stream,
    sender: &Sender<'_>,
    host: HostId,
    response: Response<RecvStream>,
    timeout: std::time::Duration,
) -> Result<(), Failure> {
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
    let send_timeout = stream.plan.send_timeout;
    let edits = Some(&stream.exchange.response_headers).filter(|e| !e.is_empty());
    let trailer_rules = (edits, sender.worker.metrics());
    let (bytes, stopped) = relay_body(body, send, timeout, send_timeout, trailer_rules).await;
    stream.outcome.body_bytes = bytes;
    match stopped {
        None => {}
        Some(RelayStop::Client) => stream.reset = true,
        Some(RelayStop::SendTimedOut) => sender.worker.metrics().event(Event::SendTimeout),
        Some(RelayStop::Upstream(what)) => {
            sender
                .worker
                .metrics()
                .upstream_error(sender.upstream, UpstreamError::Broken);
            tracing::debug!(upstream = %sender.plan.upstream(sender.upstream).name, %what, "an HTTP/2 response body broke off");
        }
    }
    Ok(())
}

/// Relays DATA frames and trailers from the upstream to the client: the
/// bytes relayed, and why it stopped early if it did.
async fn relay_body(
    mut body: RecvStream,
    mut client: SendStream<Bytes>,
    timeout: std::time::Duration,
    send_timeout: std::time::Duration,
    (edits, metrics): (Option<&HeaderEdits>, &Shard),
) -> (u64, Option<RelayStop>) {
    let mut bytes = 0;
    let broke = |client: &mut SendStream<Bytes>, bytes, what: String| {
        client.send_reset(Reason::INTERNAL_ERROR);
        (bytes, Some(RelayStop::Upstream(what)))
    };
    loop {
        let next = tokio::time::timeout(timeout, poll_fn(|cx| body.poll_data(cx)));
        let data = match unless_reset(&mut client, next).await {
            None => return (bytes, Some(RelayStop::Client)),
            Some(Err(_)) => return broke(&mut client, bytes, "timed out".into()),
            Some(Ok(None)) => break,
            Some(Ok(Some(Err(err)))) => return broke(&mut client, bytes, err.to_string()),
            Some(Ok(Some(Ok(data)))) => data,
        };
        let len = data.len();
        bytes += len as u64;
        // The upstream's last frame ends the client's stream too: one
        // frame, not the data and then an empty one.
        let last = body.is_end_stream();
        if let Err(broken) = send_data(&mut client, data, last, Some(send_timeout)).await {
            return (bytes, Some(stopped(&mut client, broken)));
        }
        let _ = body.flow_control().release_capacity(len);
        if last {
            return (bytes, None);
        }
    }
    let trailers = tokio::time::timeout(timeout, poll_fn(|cx| body.poll_trailers(cx)));
    match unless_reset(&mut client, trailers).await {
        None => return (bytes, Some(RelayStop::Client)),
        Some(Ok(Ok(Some(trailers)))) => {
            let _ = client.send_trailers(passable_trailers(trailers, edits, metrics));
        }
        Some(Ok(Ok(None))) => {
            let end = send_data(&mut client, Bytes::new(), true, Some(send_timeout)).await;
            if let Err(broken) = end {
                return (bytes, Some(stopped(&mut client, broken)));
            }
        }
        Some(Ok(Err(err))) => return broke(&mut client, bytes, err.to_string()),
        Some(Err(_)) => return broke(&mut client, bytes, "timed out".into()),
    }
    (bytes, None)
}
