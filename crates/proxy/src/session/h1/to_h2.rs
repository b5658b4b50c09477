//! The wire part of an HTTP/1.1 client's attempt on an HTTP/2 upstream
//! (`protocol: h2c | h2`; `H1ToH2`, run by `attempts::run`): a stream on
//! a pooled multiplexed connection, the body streamed from the client's
//! connection while the answer is watched for, the response head after
//! its interim answers (docs/LIFECYCLE-h2.md). `relay_h2` relays the
//! response.

use std::{future::poll_fn, task::Poll, time::Instant};

use bytes::{Bytes, BytesMut};
use h2::{
    client::{ResponseFuture, SendRequest},
    RecvStream, SendStream,
};
use http::{Response, StatusCode};
use http1::{Framing as RequestFraming, Head};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::session::{
    attempts::{
        hosts::{H2Stream, Hosts},
        to_upstream::{stream_handle, ClientSide, Failed, Http2, ToUpstream},
    },
    h1::waits::Waited,
    Failure, Session, CLIENT_CLOSED,
};
use crate::{
    ids::HostId,
    telemetry::UpstreamError,
    upstream::h2_pool::{self, send_data, StreamLease, UpstreamHead},
    wire::{fields::Fields, interim::TooMany},
};

/// What the upstream said to a request on a stream.
type Headed = Result<Response<RecvStream>, h2::Error>;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Opens the stream, sends the body and waits for the response head.
    async fn send_h2(
        &mut self,
        (hosts, host): (&Hosts<'_>, HostId),
        head: &Head,
        (send, lease): (SendRequest<Bytes>, &StreamLease),
        request: http::Request<()>,
    ) -> Result<Response<RecvStream>, Failed> {
        let timeout = hosts.attempt_timeout();
        let empty = head.framing == RequestFraming::Empty;
        let failed =
            |err: h2::Error, what: &str| Http2::failed(&err, (hosts, host), lease, what, !empty);
        let (mut response, mut body) = match Http2::open(send, request, empty).await {
            Ok(sent) => sent,
            Err(err) => return Err(failed(err, "cannot open a stream")),
        };
        let too_many = || hosts.failure(host, UpstreamError::Broken, TooMany::DETAIL, !empty);
        let early = if empty {
            None
        } else {
            self.stream_body_h2(hosts, host, head, &mut body, &mut response)
                .await
                .map_err(Failed::Final)?
        };
        let response = match early {
            // The upstream answered before the body ended: the rest is not
            // sent, and the client's connection closes after the answer.
            Some(answered) => {
                self.body_abandoned = true;
                Some(answered)
            }
            None => self.wait_head(&mut response, timeout, &too_many).await?,
        };
        match response {
            Some(Ok(response)) => Ok(response),
            Some(Err(err)) => Err(failed(err, "the stream failed")),
            None => Err(Failed::Final(hosts.timed_out(host, timeout))),
        }
    }

    /// The final response head, the interim ones before it forwarded or
    /// dropped (`wire::interim`); `None` when none came within `timeout`
    /// (counted afresh after each interim answer).
    async fn wait_head(
        &mut self,
        response: &mut ResponseFuture,
        timeout: std::time::Duration,
        failed: &(dyn Fn() -> Failure + Sync),
    ) -> Result<Option<Headed>, Failed> {
        loop {
            let next = poll_fn(|cx| h2_pool::poll_head(response, cx));
            match self.wait(next, timeout, true).await {
                Waited::TimedOut => return Ok(None),
                Waited::ClientGone => {
                    let gone = Failure::new(CLIENT_CLOSED, "the client closed its connection");
                    return Err(Failed::Final(gone));
                }
                Waited::Done(Ok(UpstreamHead::Interim(interim))) => {
                    let fields = Fields::Map(interim.headers());
                    let passed = ClientSide::interim(self, interim.status(), fields);
                    passed.map_err(|TooMany| Failed::Final(failed()))?;
                }
                Waited::Done(Ok(UpstreamHead::Final(answered))) => return Ok(Some(Ok(answered))),
                Waited::Done(Err(err)) => return Ok(Some(Err(err))),
            }
        }
    }

    /// Sends the request body (Content-Length or chunked from the client);
    /// the response instead, when it comes before the body ends.
    async fn stream_body_h2(
        &mut self,
        hosts: &Hosts<'_>,
        host: HostId,
        head: &Head,
        send: &mut SendStream<Bytes>,
        response: &mut ResponseFuture,
    ) -> Result<Option<Headed>, Failure> {
        if head.expect_continue {
            self.conn
                .wbuf
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        let broken = || {
            hosts.failure(
                host,
                UpstreamError::Broken,
                "cannot send the request body",
                true,
            )
        };
        let too_many = || hosts.failure(host, UpstreamError::Broken, TooMany::DETAIL, true);
        if let RequestFraming::Length(len) = head.framing {
            let mut left = len;
            loop {
                let take = left.min(self.conn.rbuf.len());
                left -= take;
                let data = self.conn.rbuf.split_to(take).freeze();
                let data = self.request_filtered(data, left == 0)?;
                if send_data(send, data, left == 0, None).await.is_err() {
                    return self.answered_first(response, &too_many, broken);
                }
                if left == 0 {
                    return Ok(None);
                }
                if let Some(answered) = self.more_body_or_answer(response, &too_many).await? {
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
            let data = self.request_filtered(data.freeze(), decoded.done)?;
            if send_data(send, data, decoded.done, None).await.is_err() {
                return self.answered_first(response, &too_many, broken);
            }
            if decoded.done {
                return Ok(None);
            }
            if self.chunked.data_len() > self.max_body {
                return Err(Failure::body_too_large(self.max_body));
            }
            if let Some(answered) = self.more_body_or_answer(response, &too_many).await? {
                return Ok(Some(answered));
            }
        }
    }

    /// `data` of the request body through the chain's request filter,
    /// when it asked for one (gRPC-Web's text mode); `last` ends it. A
    /// body the filter refuses is a 400.
    fn request_filtered(&mut self, data: Bytes, last: bool) -> Result<Bytes, Failure> {
        let filter = match self.exchange.request_filter.as_mut() {
            Some(filter) if self.chain.is_some() => filter,
            _ => return Ok(data),
        };
        let mut out = Vec::new();
        let filtered =
            filter
                .data(&data, &mut out)
                .and_then(|()| if last { filter.end() } else { Ok(()) });
        filtered.map_err(|failed| Failure {
            body_unread: !last,
            ..Failure::new(StatusCode::BAD_REQUEST, failed.0)
        })?;
        Ok(Bytes::from(out))
    }

    /// After the stream stopped taking the body: the answer the upstream
    /// gave before it reset the rest of the request (an early answer,
    /// RFC 9113 8.1), if it is in; else `broken`.
    fn answered_first(
        &mut self,
        response: &mut ResponseFuture,
        failed: &(dyn Fn() -> Failure + Sync),
        broken: impl Fn() -> Failure,
    ) -> Result<Option<Headed>, Failure> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        loop {
            match h2_pool::poll_head(response, &mut cx) {
                Poll::Ready(Ok(UpstreamHead::Interim(interim))) => {
                    let fields = Fields::Map(interim.headers());
                    let passed = ClientSide::interim(self, interim.status(), fields);
                    passed.map_err(|TooMany| failed())?;
                }
                Poll::Ready(Ok(UpstreamHead::Final(answered))) => return Ok(Some(Ok(answered))),
                Poll::Ready(Err(_)) | Poll::Pending => return Err(broken()),
            }
        }
    }

    /// Reads more of the request body, unless the upstream answers first
    /// (its interim answers are taken as they come, and the body goes on).
    async fn more_body_or_answer(
        &mut self,
        response: &mut ResponseFuture,
        failed: &(dyn Fn() -> Failure + Sync),
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
                    let passed = ClientSide::interim(self, interim.status(), fields);
                    passed.map_err(|TooMany| failed())?;
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
pub(in crate::session) struct H1ToH2<'s, S> {
    pub session: &'s mut Session<S>,
    pub head: &'s Head,
    /// The request head, in HTTP/2 form (each attempt sends a copy).
    pub request: http::Request<()>,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> ToUpstream for H1ToH2<'_, S> {
    type Conn = H2Stream;
    type Head = Response<RecvStream>;
    type Upstream = Http2;
    type Client = Session<S>;

    fn client(&mut self) -> &mut Session<S> {
        self.session
    }

    async fn send(
        &mut self,
        hosts: &Hosts<'_>,
        host: HostId,
        (send, lease): &mut Self::Conn,
        _sent_at: Instant,
    ) -> Result<Self::Head, Failed> {
        let send = stream_handle(send, hosts, host)?;
        let request = self.request.clone();
        let (head, lease) = (self.head, &*lease);
        self.session
            .send_h2((hosts, host), head, (send, lease), request)
            .await
    }

    fn traceparent(&mut self, value: &[u8; 55]) {
        crate::wire::traceparent::set_in_map(self.request.headers_mut(), value);
    }

    fn status(head: &Self::Head) -> StatusCode {
        head.status()
    }

    fn close(&mut self, _: Self::Conn, _: Option<Self::Head>) {
        // Dropped: the stream is reset, its lease given back.
    }
}
