//! An HTTP/2 client's stream to an HTTP/1.1 upstream: the request head
//! (with the body when it is all in hand) in one write on a pooled
//! connection; a streaming body is written, chunked unless its length is
//! known, while the upstream's answer is read and relayed (`pump_h1`),
//! so an early answer is relayed at once and a bidirectional stream
//! interleaves. The response body goes back as DATA frames, its chunked
//! trailers as HTTP/2 trailers. An idempotent request whose body is empty
//! or held is retried as `retry_on` says: on a reset before any byte of
//! an answer, and on a listed status (as the HTTP/1.1 clients' path).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use super::{
    pump_h1::{BodyPump, PumpStop},
    unless_reset, RequestBody, Stream, TrailerRules,
};
use crate::session::attempts::to_upstream::ClientSide;
use crate::{
    config::TrailerPolicy,
    ids::{HostId, UpstreamId},
    middleware::{body_filter::ResponseBodyFilter, Outcome},
    session::{
        attempts::Hosts,
        attempts::{self, decide::Retries, to_upstream::Http1, Answered, Failed, ToUpstream},
        body_filter, filtered, passable_trailers, Failure, UPSTREAM_LIMITS,
    },
    telemetry::{Event, Shard, UpstreamError},
    upstream::{
        h2_pool::{send_data, StreamBroken},
        pool::UpstreamConn,
    },
    wire::{
        edits::HeaderEdits,
        fields::Fields,
        head::{self, Framing, Outgoing, RequestContext},
        http2,
        interim::{self, TooMany},
    },
};
use bytes::{Buf, Bytes, BytesMut};
use h2::{Reason, RecvStream, SendStream};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use http1::{io::write_bounded, BodyFraming, ChunkedDecoder, Part, ResponseHead};

/// Forwards the stream's request to an HTTP/1.1 upstream (a pooled
/// connection of the picked host) and relays its answer to the client.
pub(super) async fn forward(
    stream: &mut Stream,
    upstream: UpstreamId,
    outgoing: &Outgoing<'_>,
    context: &RequestContext<'_>,
    body: RequestBody,
    max_body: usize,
) -> Result<(), Failure> {
    let plan = Arc::clone(&stream.plan);
    let worker = Arc::clone(&stream.worker);
    let config = plan.upstream(upstream);
    let mut hosts = Hosts::new(&plan, &worker, upstream, stream.origin.peer);
    hosts.local = stream.origin.proxied.as_ref().and_then(|p| p.local);
    hosts.trace = crate::session::traced::for_attempts(
        &stream.span,
        plan.tracer.as_deref(),
        outgoing.method,
        || (context.path(outgoing), context.query(outgoing)),
    );
    let mut request = Vec::with_capacity(1024);
    head::request_head(&mut request, outgoing, context);
    let replayable = body.in_hand();
    let (held, mut client) = match body {
        RequestBody::Empty => (None, None),
        // Sent with its length: HTTP/1.1 carries no trailers then.
        RequestBody::Held(bytes, _) => (Some(bytes), None),
        RequestBody::Streaming(client) => (None, Some(client)),
    };
    if let Some(bytes) = &held {
        request.extend_from_slice(bytes);
    }
    let chunked = context.framing == Framing::Chunked;
    hosts.route = stream.route.map(|route| &plan.route(route).policy);
    // The answer's head within the attempt's timeout; its body between
    // parts within the upstream's.
    let (timeout, body_timeout) = (hosts.attempt_timeout(), config.timeouts.request);
    let head_request = *outgoing.method == Method::HEAD;
    let mut retries = Retries::new(hosts.retries(), outgoing.method, replayable);
    let stream_trailers = stream.request_trailers();
    let host = hosts.pick(outgoing).await?;
    let mut wire = H2ToH1 {
        stream,
        request,
        client: client.as_mut(),
        taken: false,
        chunked,
        max_body,
        head_request,
        timeout,
        trailer_rules: TrailerRules {
            // A chunked body can carry them; one sent with its length cannot.
            forward: chunked && stream_trailers == TrailerPolicy::Forward,
            edits: context.edits,
            metrics: worker.metrics(),
        },
        replayable,
    };
    let answered = attempts::run(&mut wire, &hosts, host, &mut retries).await;
    let stream = wire.stream;
    let Answered {
        host,
        mut conn,
        head: (response, fields, mut pump),
        ..
    } = answered?;
    hosts.learn_cookies(
        host,
        Fields::H1 {
            buf: &conn.buf,
            fields: &fields,
        },
    );
    stream.outcome = Outcome {
        status: response.status,
        upstream: Some(upstream),
        body_bytes: 0,
    };
    let mut edits = hosts.with_cookie(host, stream.response_edits(response.status));
    let fields_h1 = Fields::H1 {
        buf: &conn.buf,
        fields: &fields,
    };
    let empty =
        head_request || matches!(response.framing, BodyFraming::None | BodyFraming::Length(0));
    let exchange = Some(&mut stream.exchange);
    let filter = body_filter(exchange, response.status, fields_h1, empty, &mut edits);
    // A filtered body's length is not known before it ends.
    let keep_length =
        matches!(response.framing, BodyFraming::Length(_)) && filter.is_none() || head_request;
    let head = http2::client_response(
        response.status,
        Fields::H1 {
            buf: &conn.buf,
            fields: &fields,
        },
        keep_length,
        edits.as_ref(),
    );
    if let Some(edits) = edits {
        stream.exchange.response_headers = edits;
    }
    conn.buf.advance(response.len);
    let framing = if head_request {
        BodyFraming::None
    } else {
        response.framing
    };
    let end = matches!(framing, BodyFraming::None | BodyFraming::Length(0));
    let Some(send) = stream.send_head(head, end) else {
        worker.metrics().upstream_open(upstream, -1);
        return Ok(());
    };
    let relayed = if end {
        Ok(0)
    } else {
        let send_timeout = plan.send_timeout;
        let edits = Some(&stream.exchange.response_headers).filter(|e| !e.is_empty());
        let trailer_rules = (edits, worker.metrics());
        let timeouts = (body_timeout, send_timeout);
        let send = (send, filter);
        relay_body(&mut conn, &mut pump, framing, send, timeouts, trailer_rules).await
    };
    match relayed {
        Ok(bytes) => {
            stream.outcome.body_bytes = bytes;
            // The request body must be all sent too for the connection to stay.
            if response.keep_alive && conn.buf.is_empty() && pump.complete() {
                worker
                    .pool
                    .put(config, worker.metrics(), conn, Instant::now());
            } else {
                worker.metrics().upstream_open(upstream, -1);
            }
        }
        Err(stop) => {
            worker.metrics().upstream_open(upstream, -1);
            match stop {
                RelayStop::Client => stream.reset = true,
                RelayStop::SendTimedOut => worker.metrics().event(Event::SendTimeout),
                RelayStop::Upstream(what) => {
                    worker
                        .metrics()
                        .upstream_error(upstream, UpstreamError::Broken);
                    tracing::warn!(upstream = %config.name, host = %config.host_name(host), "the upstream broke off a response body: {what}");
                }
            }
        }
    }
    Ok(())
}

/// An HTTP/2 client's request to an HTTP/1.1 upstream, one attempt at a
/// time: the head (with the body when it is in hand) in one write, then
/// the response head read while the pump sends a streaming body.
struct H2ToH1<'s, 'a> {
    stream: &'s mut Stream,
    /// The head, and the body when it is in hand.
    request: Vec<u8>,
    /// The client's body, while it is streaming and no attempt took it.
    client: Option<&'a mut RecvStream>,
    /// An attempt took the streaming body: none can send it again.
    taken: bool,
    chunked: bool,
    max_body: usize,
    head_request: bool,
    timeout: Duration,
    trailer_rules: TrailerRules<'a>,
    replayable: bool,
}

impl<'a> ToUpstream for H2ToH1<'_, 'a> {
    type Conn = UpstreamConn;
    type Head = (ResponseHead, Vec<http1::Field>, BodyPump<'a>);
    type Upstream = Http1;
    type Client = Stream;

    fn client(&mut self) -> &mut Stream {
        self.stream
    }

    async fn send(
        &mut self,
        hosts: &Hosts<'_>,
        host: HostId,
        conn: &mut UpstreamConn,
        _sent_at: Instant,
    ) -> Result<Self::Head, Failed> {
        // Not watched for a reset: the write is bounded by `timeout`, and
        // a reset is seen at the wait for the answer, right after.
        if self.taken || !write_bounded(&mut conn.stream, &self.request, self.timeout).await {
            let what = "cannot send the request";
            return Err(match conn.reused && !self.taken {
                true => Failed::Stale,
                false => Failed::Reset(hosts.broken(host, what, !self.replayable)),
            });
        }
        self.taken = !self.replayable;
        let client = self.client.take();
        let mut pump = BodyPump::new(client, self.chunked, self.max_body, self.trailer_rules);
        let deadline = tokio::time::Instant::now() + self.timeout;
        let read = loop {
            let read = read_head(conn, &mut pump, self.head_request, deadline);
            let read = self
                .stream
                .unless_reset(read)
                .await
                .map_err(Failed::Final)?;
            match read {
                Ok(Parsed::Interim(interim, fields)) => {
                    let fields = Fields::H1 {
                        buf: &conn.buf,
                        fields: &fields,
                    };
                    if ClientSide::interim(self.stream, interim.status, fields).is_err() {
                        break Err(HeadError::Broken(TooMany::DETAIL.into()));
                    }
                    conn.buf.advance(interim.len);
                }
                Ok(Parsed::Final(response, fields)) => break Ok((response, fields)),
                Err(err) => break Err(err),
            }
        };
        let err = match read {
            Ok((response, fields)) => return Ok((response, fields, pump)),
            Err(err) => err,
        };
        let unread = !self.replayable;
        Err(match err {
            HeadError::Stale => Failed::Stale,
            // Closed or reset before a byte of an answer (`retry_on: reset`).
            HeadError::Reset(what) => Failed::Reset(hosts.broken(host, &what, unread)),
            HeadError::TimedOut => Failed::Final(hosts.timed_out(host, self.timeout)),
            HeadError::TooLarge => Failed::Final(Failure::body_too_large(self.max_body)),
            HeadError::Client => Failed::Final(Failure::new(
                StatusCode::BAD_REQUEST,
                "the client broke off its request body",
            )),
            HeadError::Broken(what) => Failed::Final(hosts.broken(host, &what, unread)),
        })
    }

    fn traceparent(&mut self, value: &[u8; 55]) {
        crate::wire::traceparent::set_in_h1(&mut self.request, value);
    }

    fn status(head: &Self::Head) -> StatusCode {
        head.0.status
    }

    fn close(&mut self, conn: UpstreamConn, _: Option<Self::Head>) {
        let metrics = self.stream.worker.metrics();
        metrics.upstream_open(conn.upstream, -1);
    }
}

/// Why no response head came.
enum HeadError {
    /// A pooled connection the upstream had closed: nothing was answered.
    Stale,
    /// A new connection closed or failed before any byte of an answer.
    Reset(String),
    TimedOut,
    TooLarge,
    Client,
    Broken(String),
}

/// A response head read from the upstream.
enum Parsed {
    /// An interim (1xx) one, still at the front of the buffer.
    Interim(ResponseHead, Vec<http1::Field>),
    Final(ResponseHead, Vec<http1::Field>),
}

/// Reads the next response head while the pump sends the client's body.
async fn read_head(
    conn: &mut UpstreamConn,
    pump: &mut BodyPump<'_>,
    head_request: bool,
    deadline: tokio::time::Instant,
) -> Result<Parsed, HeadError> {
    loop {
        let mut fields = Vec::new();
        match http1::parse_response_head(
            &conn.buf,
            UPSTREAM_LIMITS.max_head,
            head_request,
            &mut fields,
        ) {
            Ok(Some(head)) if interim::is_interim(head.status) => {
                return Ok(Parsed::Interim(head, fields))
            }
            Ok(Some(head)) => return Ok(Parsed::Final(head, fields)),
            Ok(None) => {}
            Err(rejection) => return Err(HeadError::Broken(rejection.detail)),
        }
        match pump.read(conn, deadline).await {
            Ok(0) | Err(PumpStop::Read(_))
                if conn.reused && conn.buf.is_empty() && pump.sent == 0 =>
            {
                return Err(HeadError::Stale)
            }
            Ok(0) if !conn.reused && conn.buf.is_empty() => {
                return Err(HeadError::Reset(
                    "the upstream closed the connection before answering".into(),
                ))
            }
            Err(PumpStop::Read(err)) if !conn.reused && conn.buf.is_empty() => {
                return Err(HeadError::Reset(format!("read failed: {err}")))
            }
            Ok(0) => {
                return Err(HeadError::Broken(
                    "the upstream closed the connection before answering".into(),
                ))
            }
            Ok(_) => {}
            Err(PumpStop::Read(err)) => {
                return Err(HeadError::Broken(format!("read failed: {err}")))
            }
            Err(PumpStop::TimedOut) => return Err(HeadError::TimedOut),
            Err(PumpStop::TooLarge) => return Err(HeadError::TooLarge),
            Err(PumpStop::Client) => return Err(HeadError::Client),
        }
    }
}

/// Why relaying a response body stopped early.
pub(super) enum RelayStop {
    /// The client reset its stream.
    Client,
    /// The client granted no window for `limits.send_timeout`: its
    /// stream is reset.
    SendTimedOut,
    /// The upstream broke off, or the request body failed meanwhile.
    Upstream(String),
}

/// Relays an HTTP/1.1 response body as DATA frames; chunked trailers
/// become HTTP/2 trailers. The bytes relayed, or why it broke off.
async fn relay_body(
    conn: &mut UpstreamConn,
    pump: &mut BodyPump<'_>,
    framing: BodyFraming,
    (mut send, mut filter): (SendStream<Bytes>, Option<ResponseBodyFilter>),
    (timeout, send_timeout): (std::time::Duration, std::time::Duration),
    (edits, metrics): (Option<&HeaderEdits>, &Shard),
) -> Result<u64, RelayStop> {
    let mut left = match framing {
        BodyFraming::Length(n) => n,
        _ => u64::MAX,
    };
    let mut decoder = ChunkedDecoder::default();
    let mut trailers = HeaderMap::new();
    let mut relayed = 0;
    loop {
        let (data, done) = if framing == BodyFraming::Chunked {
            let mut data = BytesMut::new();
            let decoded = decoder
                .decode_parts(&conn.buf, &UPSTREAM_LIMITS, |part| match part {
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
                .map_err(|rejection| RelayStop::Upstream(rejection.detail))?;
            conn.buf.advance(decoded.consumed);
            (data.freeze(), decoded.done)
        } else {
            let take = usize::try_from(left)
                .unwrap_or(usize::MAX)
                .min(conn.buf.len());
            left -= take as u64;
            (conn.buf.split_to(take).freeze(), left == 0)
        };
        relayed += data.len() as u64;
        let data = match filter.as_mut() {
            None => data,
            Some(filter) => filtered(filter, &data, done.then_some(&mut trailers))
                .map_err(|why| RelayStop::Upstream(why.into()))?,
        };
        let last = done && trailers.is_empty();
        if !data.is_empty() || last {
            let sent = send_data(&mut send, data, last, Some(send_timeout)).await;
            sent.map_err(|broken| stopped(&mut send, broken))?;
        }
        if done {
            if !trailers.is_empty() {
                let _ = send.send_trailers(passable_trailers(trailers, edits, metrics));
            }
            return Ok(relayed);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let Some(read) = unless_reset(&mut send, pump.read(conn, deadline)).await else {
            return Err(RelayStop::Client);
        };
        let broke = match read {
            Ok(0) if framing == BodyFraming::UntilClose => {
                let sent = send_data(&mut send, Bytes::new(), true, Some(send_timeout)).await;
                sent.map_err(|broken| stopped(&mut send, broken))?;
                return Ok(relayed);
            }
            Ok(0) => "the upstream closed the connection mid-body".to_string(),
            Ok(_) => continue,
            Err(PumpStop::Read(err)) => err.to_string(),
            Err(PumpStop::TimedOut) => "timed out".into(),
            Err(PumpStop::TooLarge) => "the request body went past the route's limit".into(),
            Err(PumpStop::Client) => "the client broke off its request body".into(),
        };
        send.send_reset(Reason::INTERNAL_ERROR);
        return Err(RelayStop::Upstream(broke));
    }
}

/// Why sending response body bytes to the client failed; a client that
/// granted no window for `limits.send_timeout` gets its stream reset.
pub(super) fn stopped(send: &mut SendStream<Bytes>, broken: StreamBroken) -> RelayStop {
    match broken {
        StreamBroken::Closed => RelayStop::Client,
        StreamBroken::TimedOut => {
            send.send_reset(Reason::CANCEL);
            RelayStop::SendTimedOut
        }
    }
}
