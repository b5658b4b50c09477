//! The exchange with an upstream spoken to over HTTP/2 (`protocol: h2c |
//! h2`): the HTTP/1.1 request becomes a stream on a multiplexed
//! connection, and the response comes back as HTTP/1.1, trailers kept in
//! a chunked body (docs/LIFECYCLE-h2.md).

use std::{
    future::poll_fn,
    sync::Arc,
    task::Poll,
    time::{Duration, Instant},
};

use bytes::{Buf, Bytes, BytesMut};
use h2::{
    client::{ResponseFuture, SendRequest},
    RecvStream, SendStream,
};
use http::{Response, StatusCode};
use http1::{chunked::body_too_large, Framing as RequestFraming, Head};
use tokio::io::{AsyncRead, AsyncWrite};

use super::{
    exchange::{self, decide::Retries, Answered, Failed, Wire},
    send::Sender,
    upstream_h1::outgoing,
    upstream_h1::poll_client_gone,
    Failure, Next, Session, CLIENT_CLOSED,
};
use crate::{
    ids::{HostId, RouteId, UpstreamId},
    telemetry::UpstreamError,
    upstream::h2_pool::{self, send_data, StreamLease, UpstreamHead},
    wire::{fields::Fields, http2, interim::TooMany},
};

/// What the upstream said to a request on a stream.
type Headed = Result<Response<RecvStream>, h2::Error>;

/// How a wait for the upstream ended.
pub(super) enum Waited<T> {
    Done(T),
    TimedOut,
    /// The client closed its connection (or a flush to it failed).
    ClientGone,
}

/// How sending a request on a stream failed.
enum StreamFailure {
    /// The upstream refused the stream before processing it (REFUSED_STREAM
    /// or, with `goaway`, GOAWAY): safe to send again.
    Refused {
        goaway: bool,
    },
    /// The stream or its connection failed before any answer (counted
    /// against the host already): `retry_on: reset`.
    Reset(Failure),
    Failed(Failure),
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// `forward` for an HTTP/2 upstream.
    pub(super) async fn forward_h2(
        &mut self,
        head: &Head,
        route: RouteId,
    ) -> Result<Next, Failure> {
        let plan = Arc::clone(&self.plan);
        let worker = Arc::clone(&self.worker);
        let upstream_index = plan.route(route).upstream;
        let upstream = &plan.upstream(upstream_index);
        let picker = Sender::new(&plan, &worker, upstream_index, self.peer);
        let context = self.request_context(head, upstream.host_header.as_ref())?;
        let scheme = if upstream.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let fallback = upstream.host_name(HostId::new(0));
        let outgoing = outgoing(&self.conn.rbuf, head, &self.fields);
        let request = http2::upstream_request(&outgoing, &context, scheme, fallback, None)
            .ok_or_else(|| {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    "the request cannot be expressed in HTTP/2",
                )
            })?;
        let picked = picker.pick(&outgoing).await;
        self.conn.rbuf.advance(head.len);
        let host = picked?;
        // The body streams from the client's connection: only an empty
        // one can go again.
        let in_hand = head.framing == RequestFraming::Empty;
        let mut retries = Retries::new(upstream.retries, &head.method, in_hand);
        let mut wire = H2Wire {
            session: self,
            head,
            request,
            upstream: upstream_index,
        };
        let answered = exchange::run(&mut wire, &picker, host, &mut retries).await?;
        let Answered {
            host,
            answer: (response, lease),
            ..
        } = answered;
        picker.learn_cookies(host, Fields::Map(response.headers()));
        let cookie = picker.cookie(host);
        Ok(self
            .respond_h2(head, route, upstream_index, response, lease, cookie)
            .await)
    }

    /// Opens the stream, sends the body and waits for the response head.
    async fn send_h2(
        &mut self,
        head: &Head,
        sender: h2::client::SendRequest<Bytes>,
        request: http::Request<()>,
        upstream: UpstreamId,
        host: HostId,
    ) -> Result<Response<RecvStream>, StreamFailure> {
        let timeout = self.plan.upstream(upstream).timeouts.request;
        let refused_or = |this: &Self, err: h2::Error, what: &str| {
            if err.reason() == Some(h2::Reason::REFUSED_STREAM) || err.is_go_away() {
                return StreamFailure::Refused {
                    goaway: err.is_go_away(),
                };
            }
            let body_unread = head.framing != RequestFraming::Empty;
            let what = format!("{what}: {err}");
            StreamFailure::Reset(this.sender(upstream).broken(host, &what, body_unread))
        };
        let too_many = |this: &Self| {
            this.upstream_failure(
                upstream,
                host,
                UpstreamError::Broken,
                TooMany::DETAIL,
                head.framing != RequestFraming::Empty,
            )
        };
        let mut sender = match sender.ready().await {
            Ok(sender) => sender,
            Err(err) => return Err(refused_or(self, err, "the connection is closed")),
        };
        let empty = head.framing == RequestFraming::Empty;
        let (mut response, mut body) = match sender.send_request(request, empty) {
            Ok(sent) => sent,
            Err(err) => return Err(refused_or(self, err, "cannot open a stream")),
        };
        let early = if empty {
            None
        } else {
            self.stream_body_h2(head, &mut body, &mut response, upstream, host)
                .await
                .map_err(StreamFailure::Failed)?
        };
        let response = match early {
            // The upstream answered before the body ended: the rest is not
            // sent, and the client's connection closes after the answer.
            Some(answered) => {
                self.body_abandoned = true;
                Some(answered)
            }
            None => {
                self.wait_head(head, &mut response, timeout, &too_many)
                    .await?
            }
        };
        match response {
            Some(Ok(response)) => Ok(response),
            Some(Err(err)) => Err(refused_or(self, err, "the stream failed")),
            None => {
                let mut failure = self.upstream_failure(
                    upstream,
                    host,
                    UpstreamError::Timeout,
                    &format!("no response within {timeout:?}"),
                    false,
                );
                failure.status = StatusCode::GATEWAY_TIMEOUT;
                self.sender(upstream).count_failure(host);
                Err(StreamFailure::Failed(failure))
            }
        }
    }

    /// The final response head, the interim ones before it forwarded or
    /// dropped (`wire::interim`); `None` when none came within `timeout`
    /// (counted afresh after each interim answer).
    async fn wait_head(
        &mut self,
        head: &Head,
        response: &mut ResponseFuture,
        timeout: Duration,
        failed: &(dyn Fn(&Self) -> Failure + Sync),
    ) -> Result<Option<Headed>, StreamFailure> {
        loop {
            let next = poll_fn(|cx| h2_pool::poll_head(response, cx));
            match self.wait(next, timeout, true).await {
                Waited::TimedOut => return Ok(None),
                Waited::ClientGone => {
                    let gone = Failure::new(CLIENT_CLOSED, "the client closed its connection");
                    return Err(StreamFailure::Failed(gone));
                }
                Waited::Done(Ok(UpstreamHead::Interim(interim))) => self
                    .take_interim(
                        head,
                        interim.status(),
                        Fields::Map(interim.headers()),
                        failed,
                    )
                    .map_err(StreamFailure::Failed)?,
                Waited::Done(Ok(UpstreamHead::Final(answered))) => return Ok(Some(Ok(answered))),
                Waited::Done(Err(err)) => return Ok(Some(Err(err))),
            }
        }
    }

    /// Awaits `future` for at most `timeout`; answers already waiting for
    /// the client are written first if it is not ready at once. With
    /// `watch_client` (while the answer's head is awaited), a client that
    /// closes its connection ends the wait, as in `read_upstream`.
    pub(super) async fn wait<F: std::future::Future + Unpin>(
        &mut self,
        mut future: F,
        timeout: Duration,
        watch_client: bool,
    ) -> Waited<F::Output> {
        let polled = poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut future).poll(cx))).await;
        if let Poll::Ready(output) = polled {
            return Waited::Done(output);
        }
        if !self.conn.flush().await {
            return Waited::ClientGone;
        }
        let max_buffered = self.plan.limits.max_head;
        let client = &mut self.conn;
        let watched = poll_fn(|cx| {
            if watch_client && poll_client_gone(client, max_buffered, cx).is_ready() {
                return Poll::Ready(None);
            }
            std::pin::Pin::new(&mut future).poll(cx).map(Some)
        });
        match tokio::time::timeout(timeout, watched).await {
            Ok(Some(output)) => Waited::Done(output),
            Ok(None) => Waited::ClientGone,
            Err(_) => Waited::TimedOut,
        }
    }

    /// Sends the request body (Content-Length or chunked from the client);
    /// the response instead, when it comes before the body ends.
    async fn stream_body_h2(
        &mut self,
        head: &Head,
        send: &mut SendStream<Bytes>,
        response: &mut ResponseFuture,
        upstream: UpstreamId,
        host: HostId,
    ) -> Result<Option<Headed>, Failure> {
        if head.expect_continue {
            self.conn
                .wbuf
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        let broken = |this: &Self| {
            this.upstream_failure(
                upstream,
                host,
                UpstreamError::Broken,
                "cannot send the request body",
                true,
            )
        };
        let too_many = |this: &Self| {
            this.upstream_failure(upstream, host, UpstreamError::Broken, TooMany::DETAIL, true)
        };
        if let RequestFraming::Length(len) = head.framing {
            let mut left = len;
            loop {
                let take = left.min(self.conn.rbuf.len());
                left -= take;
                let data = self.conn.rbuf.split_to(take).freeze();
                if send_data(send, data, left == 0, None).await.is_err() {
                    return Err(broken(self));
                }
                if left == 0 {
                    return Ok(None);
                }
                if let Some(answered) = self.more_body_or_answer(head, response, &too_many).await? {
                    return Ok(Some(answered));
                }
            }
        }
        self.chunked.reset();
        let limits = self.body_limits();
        loop {
            let mut data = BytesMut::new();
            let decoded = self
                .chunked
                .decode(&self.conn.rbuf, &limits, |part| {
                    data.extend_from_slice(part)
                })
                .map_err(|rejection| Failure {
                    body_unread: true,
                    ..Failure::new(rejection.status, rejection.detail)
                })?;
            let _ = self.conn.rbuf.split_to(decoded.consumed);
            if send_data(send, data.freeze(), decoded.done, None)
                .await
                .is_err()
            {
                return Err(broken(self));
            }
            if decoded.done {
                return Ok(None);
            }
            if self.chunked.data_len() > self.max_body {
                let rejection = body_too_large(&limits);
                return Err(Failure {
                    body_unread: true,
                    ..Failure::new(rejection.status, rejection.detail)
                });
            }
            if let Some(answered) = self.more_body_or_answer(head, response, &too_many).await? {
                return Ok(Some(answered));
            }
        }
    }

    /// Reads more of the request body, unless the upstream answers first
    /// (its interim answers are taken as they come, and the body goes on).
    async fn more_body_or_answer(
        &mut self,
        head: &Head,
        response: &mut ResponseFuture,
        failed: &(dyn Fn(&Self) -> Failure + Sync),
    ) -> Result<Option<Headed>, Failure> {
        loop {
            let answered = tokio::select! {
                biased;
                answered = poll_fn(|cx| h2_pool::poll_head(response, cx)) => answered,
                part = self.read_body_part() => return part.map(|()| None),
            };
            match answered {
                Ok(UpstreamHead::Interim(interim)) => {
                    let fields = Fields::Map(interim.headers());
                    self.take_interim(head, interim.status(), fields, failed)?;
                }
                Ok(UpstreamHead::Final(answered)) => return Ok(Some(Ok(answered))),
                Err(err) => return Ok(Some(Err(err))),
            }
        }
    }
}

/// An HTTP/1.1 client's request to an HTTP/2 upstream, one attempt at a
/// time: a stream on a pooled multiplexed connection, the body streamed
/// from the client while the answer is watched for.
struct H2Wire<'s, S> {
    session: &'s mut Session<S>,
    head: &'s Head,
    /// The request head, in HTTP/2 form (each attempt sends a copy).
    request: http::Request<()>,
    upstream: UpstreamId,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Wire for H2Wire<'_, S> {
    type Conn = (SendRequest<Bytes>, StreamLease);
    type Answer = (Response<RecvStream>, StreamLease);

    async fn connect(
        &mut self,
        sender: &Sender<'_>,
        host: HostId,
        _fresh_only: bool,
    ) -> Result<Result<Self::Conn, Failure>, Failure> {
        self.session.unless_client_gone(sender.stream(host)).await
    }

    async fn send(
        &mut self,
        _sender: &Sender<'_>,
        host: HostId,
        (send, lease): Self::Conn,
        _sent_at: Instant,
    ) -> Result<Self::Answer, Failed> {
        let request = self.request.clone();
        let sent = self
            .session
            .send_h2(self.head, send, request, self.upstream, host)
            .await;
        match sent {
            Ok(response) => Ok((response, lease)),
            Err(StreamFailure::Refused { goaway }) => {
                if goaway {
                    lease.retire();
                }
                Err(Failed::Refused)
            }
            Err(StreamFailure::Reset(failure)) => Err(Failed::Reset(failure)),
            Err(StreamFailure::Failed(failure)) => Err(Failed::Final(failure)),
        }
    }

    fn status(answer: &Self::Answer) -> StatusCode {
        answer.0.status()
    }

    fn discard(&mut self, _: Self::Answer) {
        // Dropped: the stream is reset, its lease given back.
    }
}
