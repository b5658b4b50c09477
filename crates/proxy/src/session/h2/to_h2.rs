//! An HTTP/2 client's stream to an HTTP/2 upstream: a stream on a pooled
//! multiplexed connection. The request body is pumped upstream while the
//! response comes back, each with its own flow control, so both flow at
//! once; trailers pass both ways. Each attempt asks `attempts::decide`
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
use http::{HeaderMap, Request, Response, StatusCode, Uri};

use super::{
    pump_h2::{pump, pumped, PumpError},
    to_h1::{stopped, RelayStop},
    unless_reset, RequestBody, ResetWatch, Stream, TrailerRules,
};
use crate::session::attempts::to_upstream::ClientSide;
use crate::{
    config::TrailerPolicy,
    ids::{HostId, UpstreamId},
    middleware::body_filter::ResponseBodyFilter,
    session::{
        attempts::Hosts,
        attempts::{
            self,
            decide::Retries,
            hosts::H2Stream,
            to_upstream::{stream_handle, Http2},
            Answered, Failed, ToUpstream,
        },
        body_filter, filtered, passable_trailers, Failure,
    },
    telemetry::{Event, Shard, UpstreamError},
    upstream::h2_pool::{self, send_data, UpstreamHead},
    wire::{
        edits::HeaderEdits,
        fields::Fields,
        head::{Outgoing, RequestContext},
        http2,
        interim::TooMany,
    },
};

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
    let mut hosts = Hosts::new(&plan, &worker, upstream, stream.origin.peer);
    hosts.local = stream.origin.proxied.as_ref().and_then(|p| p.local);
    hosts.trace = crate::session::traced::for_attempts(
        &stream.span,
        plan.tracer.as_deref(),
        outgoing.method,
        || (context.path(outgoing), context.query(outgoing)),
    );
    hosts.route = stream.route.map(|route| &plan.route(route).policy);
    let mut retries = Retries::new(hosts.retries(), outgoing.method, body.in_hand());
    // The answer's head within the attempt's timeout; its body between
    // parts within the upstream's.
    let (timeout, body_timeout) = (hosts.attempt_timeout(), config.timeouts.request);
    let trailer_rules = TrailerRules {
        forward: stream.request_trailers() != TrailerPolicy::Drop,
        edits: context.edits,
        metrics: worker.metrics(),
    };
    let mut wire = H2ToH2 {
        stream,
        outgoing,
        context,
        source,
        scheme,
        fallback: config.host_name(HostId::new(0)),
        // Built once; again only if the request is sent again.
        request: None,
        traceparent: None,
        empty: matches!(body, RequestBody::Empty),
        in_hand: body.in_hand(),
        body,
        max_body,
        timeout,
        trailer_rules,
        pumping: pin!(None),
        start: pump,
    };
    wire.request = Some(wire.build()?);
    let host = hosts.pick(outgoing).await?;
    let answered = attempts::run(&mut wire, &hosts, host, &mut retries).await;
    let H2ToH2 {
        stream,
        mut pumping,
        ..
    } = wire;
    let Answered {
        host,
        conn: (_, lease),
        head: response,
        ..
    } = answered?;
    let relay = relay(stream, &hosts, host, response, body_timeout);
    tokio::pin!(relay);
    let outcome = loop {
        tokio::select! {
            // In order: no random start to draw on every poll.
            biased;
            done = pumped(pumping.as_mut()) => match done {
                Ok(()) => {}
                // The response still comes; the client is told by its reset.
                Err(PumpError::Client | PumpError::Upstream) => {}
                Err(PumpError::TooLarge) => break Err(Failure::body_too_large(max_body)),
            },
            // An answer that ends before the request does stops the pump
            // (RFC 9113 8.1: the rest of the request is not needed).
            relayed = &mut relay => break relayed,
        }
    };
    drop(lease);
    outcome
}

/// Waits for the final response head (sending interim answers on) while
/// the request body goes up, unless the client resets its stream first.
/// `Err(h2::Error)`: the stream failed (or was refused) before it.
async fn wait_head<F: Future<Output = Result<(), PumpError>>>(
    stream: &mut Stream,
    hosts: &Hosts<'_>,
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
            // The body all up (or stopped), the head is awaited alone, in
            // this same wait (no timer more).
            let pumped = pumping.as_mut().as_pin_mut().map(|pump| pump.poll(cx));
            if let Some(Poll::Ready(done)) = pumped {
                pumping.set(None);
                if let Err(PumpError::TooLarge) = done {
                    return Poll::Ready(Some(Err(())));
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
                if ClientSide::interim(stream, interim.status(), fields).is_err() {
                    return Err(hosts.broken(host, TooMany::DETAIL, false));
                }
            }
            Ok(Ok(Ok(UpstreamHead::Final(response)))) => return Ok(Ok(response)),
            Ok(Ok(Err(err))) => return Ok(Err(err)),
            Ok(Err(())) => return Err(Failure::body_too_large(max_body)),
            Err(_) => return Err(hosts.timed_out(host, timeout)),
        }
    }
}

/// An HTTP/2 client's request to an HTTP/2 upstream, one attempt at a
/// time: a stream on a pooled multiplexed connection, its body pumped
/// (`start`, into `pumping`) while the response head is awaited; the
/// pump goes on while the response is relayed.
struct H2ToH2<'s, 'a, P> {
    stream: &'s mut Stream,
    outgoing: &'s Outgoing<'s>,
    context: &'s RequestContext<'s>,
    source: &'s Uri,
    scheme: &'static str,
    /// The authority when the request names none.
    fallback: &'s str,
    request: Option<Request<()>>,
    /// This attempt's `traceparent`, when the request is traced.
    traceparent: Option<[u8; 55]>,
    empty: bool,
    /// The whole body is in hand (it can go again).
    in_hand: bool,
    body: RequestBody,
    max_body: usize,
    timeout: std::time::Duration,
    trailer_rules: TrailerRules<'a>,
    /// The request body on its way up, from the attempt that opened it on.
    pumping: Pin<&'s mut Option<P>>,
    start: fn(RequestBody, SendStream<Bytes>, usize, TrailerRules<'a>) -> P,
}

impl<P> H2ToH2<'_, '_, P> {
    /// The request head in HTTP/2 form, from the client's own values.
    fn build(&self) -> Result<Request<()>, Failure> {
        let (outgoing, context, fallback) = (self.outgoing, self.context, self.fallback);
        http2::upstream_request(outgoing, context, self.scheme, fallback, Some(self.source))
            .ok_or_else(|| {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    "the request cannot be expressed in HTTP/2",
                )
            })
    }
}

impl<'a, P> ToUpstream for H2ToH2<'_, 'a, P>
where
    P: Future<Output = Result<(), PumpError>> + Send,
{
    type Conn = H2Stream;
    type Head = Response<RecvStream>;
    type Upstream = Http2;
    type Client = Stream;

    fn client(&mut self) -> &mut Stream {
        self.stream
    }

    async fn send(
        &mut self,
        hosts: &Hosts<'_>,
        host: HostId,
        (send, lease): &mut Self::Conn,
        _sent_at: Instant,
    ) -> Result<Self::Head, Failed> {
        let send = stream_handle(send, hosts, host)?;
        let mut request = match self.request.take() {
            Some(built) => built,
            None => self.build().map_err(Failed::Final)?,
        };
        if let Some(traceparent) = &self.traceparent {
            crate::wire::traceparent::set_in_map(request.headers_mut(), traceparent);
        }
        let opened = Http2::open(send, request, self.empty);
        let opened = self.stream.unless_reset(opened).await;
        let waited = match opened.map_err(Failed::Final)? {
            Ok((mut response, upstream_body)) => {
                // An empty body ended with the head: nothing to pump.
                if !self.empty {
                    let body = self.body.for_attempt();
                    let rules = self.trailer_rules;
                    let pump = (self.start)(body, upstream_body, self.max_body, rules);
                    self.pumping.set(Some(pump));
                }
                let limits = (self.timeout, self.max_body);
                let pump = self.pumping.as_mut();
                let head = wait_head(self.stream, hosts, host, &mut response, pump, limits);
                head.await.map_err(Failed::Final)?
            }
            Err(err) => Err(err),
        };
        waited.map_err(|err| {
            let what = "the stream failed";
            Http2::failed(&err, (hosts, host), lease, what, !self.in_hand)
        })
    }

    fn traceparent(&mut self, value: &[u8; 55]) {
        self.traceparent = Some(*value);
    }

    fn status(head: &Self::Head) -> StatusCode {
        head.status()
    }

    fn close(&mut self, _: Self::Conn, _: Option<Self::Head>) {
        // Dropped with its stream (reset); the request body stops with it.
        self.pumping.set(None);
    }
}

/// Relays the response (head, body, trailers) to the client.
async fn relay(
    stream: &mut Stream,
    hosts: &Hosts<'_>,
    host: HostId,
    response: Response<RecvStream>,
    timeout: std::time::Duration,
) -> Result<(), Failure> {
    let (parts, body) = response.into_parts();
    let status = parts.status;
    stream.outcome = crate::middleware::Outcome {
        status,
        upstream: Some(hosts.upstream),
        body_bytes: 0,
    };
    let mut edits = hosts.with_cookie(host, stream.response_edits(status));
    let end = body.is_end_stream();
    let fields = Fields::Map(&parts.headers);
    let filter = body_filter(Some(&mut stream.exchange), status, fields, end, &mut edits);
    // A body's length is kept when the upstream gave it (a filter's edits
    // remove it); a trailers-only answer (gRPC errors) carries none.
    let head = http2::client_response_from(status, parts.headers, edits.as_ref());
    if let Some(edits) = edits {
        stream.exchange.response_headers = edits;
    }
    let Some(send) = stream.send_head(head, end) else {
        return Ok(());
    };
    if end {
        return Ok(());
    }
    let send_timeout = stream.plan.send_timeout;
    let edits = Some(&stream.exchange.response_headers).filter(|e| !e.is_empty());
    let trailer_rules = (edits, hosts.worker.metrics());
    let send = (send, filter);
    let (bytes, stopped) = relay_body(body, send, timeout, send_timeout, trailer_rules).await;
    stream.outcome.body_bytes = bytes;
    match stopped {
        None => {}
        Some(RelayStop::Client) => stream.reset = true,
        Some(RelayStop::SendTimedOut) => hosts.worker.metrics().event(Event::SendTimeout),
        Some(RelayStop::Upstream(what)) => {
            hosts
                .worker
                .metrics()
                .upstream_error(hosts.upstream, UpstreamError::Broken);
            tracing::debug!(upstream = %hosts.plan.upstream(hosts.upstream).name, %what, "an HTTP/2 response body broke off");
        }
    }
    Ok(())
}

/// Relays DATA frames and trailers from the upstream to the client: the
/// bytes relayed, and why it stopped early if it did.
async fn relay_body(
    mut body: RecvStream,
    (mut client, mut filter): (SendStream<Bytes>, Option<ResponseBodyFilter>),
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
        let data = match filter.as_mut() {
            None => data,
            Some(filter) => match filtered(filter, &data, last.then(HeaderMap::new).as_mut()) {
                Ok(data) => data,
                Err(why) => return broke(&mut client, bytes, why.into()),
            },
        };
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
        Some(Ok(Ok(trailers))) => {
            let mut trailers = trailers.unwrap_or_default();
            // The filter's last bytes (and a gRPC-Web trailer frame).
            let last = match filter.as_mut() {
                None => Bytes::new(),
                Some(filter) => match filtered(filter, &[], Some(&mut trailers)) {
                    Ok(last) => last,
                    Err(why) => return broke(&mut client, bytes, why.into()),
                },
            };
            let end = trailers.is_empty();
            if !last.is_empty() || end {
                let sent = send_data(&mut client, last, end, Some(send_timeout)).await;
                if let Err(broken) = sent {
                    return (bytes, Some(stopped(&mut client, broken)));
                }
            }
            if !end {
                let _ = client.send_trailers(passable_trailers(trailers, edits, metrics));
            }
        }
        Some(Ok(Err(err))) => return broke(&mut client, bytes, err.to_string()),
        Some(Err(_)) => return broke(&mut client, bytes, "timed out".into()),
    }
    (bytes, None)
}
