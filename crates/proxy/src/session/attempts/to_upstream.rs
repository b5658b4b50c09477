//! What the loop (`attempts::run`) asks of the wire part of an attempt,
//! for one client/upstream protocol pair, and how an attempt fails. A
//! pair is made of a client side ([`ClientSide`]: an HTTP/1.1 session, an
//! HTTP/2 stream) and an upstream protocol ([`UpstreamProtocol`]:
//! [`Http1`] connections, [`Http2`] streams); what only those two decide
//! (taking a connection, watching the client meanwhile) is written once
//! here, for every pair.

use std::{future::Future, time::Instant};

use bytes::Bytes;
use h2::{
    client::{ResponseFuture, SendRequest},
    Reason, SendStream,
};
use http::StatusCode;

use super::{hosts::H2Stream, Hosts};
use crate::{
    ids::HostId,
    session::Failure,
    upstream::{h2_pool::StreamLease, pool::UpstreamConn},
    wire::{fields::Fields, interim::TooMany},
};

/// What an attempt asks of the client's side of its request, whatever
/// the client protocol.
pub(crate) trait ClientSide {
    /// Now, as the client side last read the clock (a pooled connection
    /// idle past its upstream's limit is not taken).
    fn now(&self) -> Instant;

    /// Runs `work` (a wait for a connection or a stream) unless the
    /// client goes away first: then its failure (499), and nothing goes
    /// upstream.
    fn unless_gone<F: Future + Send>(
        &mut self,
        work: F,
    ) -> impl Future<Output = Result<F::Output, Failure>> + Send;

    /// An interim (1xx) answer of the upstream's, passed on to the client
    /// or dropped as the interim rule says (`wire::interim`); past the
    /// bound, `Err` (counted as an interim flood).
    fn interim(&mut self, status: StatusCode, fields: Fields<'_>) -> Result<(), TooMany>;
}

/// How an upstream protocol's connections (or streams) are taken.
pub(crate) trait UpstreamProtocol {
    /// A connection to a host, or a stream on one.
    type Conn: Send;

    /// An idle pooled connection to `host` (none with `fresh_only`), or a
    /// stream on a pooled one with room.
    fn pooled(
        hosts: &Hosts<'_>,
        host: HostId,
        fresh_only: bool,
        now: Instant,
    ) -> Option<Self::Conn>;

    /// A connection opened (or waited for: `max_connecting`) to `host`.
    fn connect(
        hosts: &Hosts<'_>,
        host: HostId,
        fresh_only: bool,
    ) -> impl Future<Output = Result<Self::Conn, Failure>> + Send;
}

/// HTTP/1.1 upstreams: a connection per request.
pub(crate) struct Http1;

impl UpstreamProtocol for Http1 {
    type Conn = UpstreamConn;

    #[inline]
    fn pooled(
        hosts: &Hosts<'_>,
        host: HostId,
        fresh_only: bool,
        now: Instant,
    ) -> Option<Self::Conn> {
        hosts.pooled(host, fresh_only, now)
    }

    fn connect(
        hosts: &Hosts<'_>,
        host: HostId,
        fresh_only: bool,
    ) -> impl Future<Output = Result<Self::Conn, Failure>> + Send {
        hosts.opened(host, fresh_only)
    }
}

/// HTTP/2 upstreams (`h2c`, `h2`): a stream on a multiplexed connection;
/// a stream is never stale, so `fresh_only` asks nothing more of it.
pub(crate) struct Http2;

impl UpstreamProtocol for Http2 {
    type Conn = H2Stream;

    #[inline]
    fn pooled(hosts: &Hosts<'_>, host: HostId, _: bool, _: Instant) -> Option<Self::Conn> {
        hosts.pooled_stream(host)
    }

    fn connect(
        hosts: &Hosts<'_>,
        host: HostId,
        _: bool,
    ) -> impl Future<Output = Result<Self::Conn, Failure>> + Send {
        hosts.stream(host)
    }
}

/// How one attempt failed, as the loop tells failures apart.
pub(crate) enum Failed {
    /// A pooled connection the upstream had already closed; nothing was
    /// answered.
    Stale,
    /// The upstream refused the stream unprocessed (REFUSED_STREAM, GOAWAY).
    Refused,
    /// Closed or reset before any byte of an answer (`retry_on: reset`),
    /// counted against the host already.
    Reset(Failure),
    /// Anything else: the failure is the answer.
    Final(Failure),
}

/// The wire part of an attempt, for one client/upstream protocol pair:
/// a connection (or stream) to a host, and the exchange on it up to the
/// final response head (interim answers go to the client as
/// `wire::interim` says; an early answer ends the request body).
pub(crate) trait ToUpstream {
    /// A connection to a host, or a stream on one.
    type Conn: Send;
    /// The final response head and what relaying its body needs.
    type Head: Send;
    /// The upstream's protocol, which takes its connections.
    type Upstream: UpstreamProtocol<Conn = Self::Conn>;
    /// The client's side of the request.
    type Client: ClientSide;

    fn client(&mut self) -> &mut Self::Client;

    /// A connection to `host` at hand at once (a pooled one), if any.
    /// Not async: the common case costs no future.
    #[inline]
    fn pooled(&mut self, hosts: &Hosts<'_>, host: HostId, fresh_only: bool) -> Option<Self::Conn> {
        let now = self.client().now();
        Self::Upstream::pooled(hosts, host, fresh_only, now)
    }

    /// A connection to `host` (a new one with `fresh_only`); `Err` when
    /// the client went away meanwhile (one that leaves while its request
    /// waits for a connection, `max_connecting`, is not served),
    /// `Ok(Err)` when there is none (the failure counted against the host
    /// by `Hosts::after_failure`).
    fn connect(
        &mut self,
        hosts: &Hosts<'_>,
        host: HostId,
        fresh_only: bool,
    ) -> impl Future<Output = Result<Result<Self::Conn, Failure>, Failure>> + Send {
        let opened = Self::Upstream::connect(hosts, host, fresh_only);
        self.client().unless_gone(opened)
    }

    /// Sends the request on `conn` and reads the final response head.
    fn send(
        &mut self,
        hosts: &Hosts<'_>,
        host: HostId,
        conn: &mut Self::Conn,
        sent_at: Instant,
    ) -> impl Future<Output = Result<Self::Head, Failed>> + Send;

    fn status(head: &Self::Head) -> StatusCode;

    /// Sets the request's `traceparent` (a traced request: its attempt's
    /// CLIENT span), replacing any sent, before `send`.
    fn traceparent(&mut self, value: &[u8; 55]);

    /// Drops a connection whose attempt is over without an answer that
    /// stands: it failed, or its answer (`head`) goes again.
    fn close(&mut self, conn: Self::Conn, head: Option<Self::Head>);
}

impl Http2 {
    /// Opens `request`'s stream once the connection takes one more
    /// (`end`: it has no body).
    pub(crate) async fn open(
        send: SendRequest<Bytes>,
        request: http::Request<()>,
        end: bool,
    ) -> Result<(ResponseFuture, SendStream<Bytes>), h2::Error> {
        let mut send = send.ready().await?;
        send.send_request(request, end)
    }

    /// How a stream that failed before its answer's head counts: refused
    /// unprocessed (REFUSED_STREAM, or GOAWAY, which retires its
    /// connection) it is sent again; anything else is a reset (`retry_on:
    /// reset`) counted against the host (`unread`: the client's body was
    /// not all read).
    pub(crate) fn failed(
        err: &h2::Error,
        (hosts, host): (&Hosts<'_>, HostId),
        lease: &StreamLease,
        what: &str,
        unread: bool,
    ) -> Failed {
        if err.reason() == Some(Reason::REFUSED_STREAM) || err.is_go_away() {
            if err.is_go_away() {
                lease.retire();
            }
            return Failed::Refused;
        }
        Failed::Reset(hosts.broken(host, &format!("{what}: {err}"), unread))
    }
}

/// The handle that opens this attempt's stream (each attempt takes a
/// stream of its own); a failure if an earlier attempt took it.
pub(crate) fn stream_handle(
    handle: &mut Option<SendRequest<Bytes>>,
    hosts: &Hosts<'_>,
    host: HostId,
) -> Result<SendRequest<Bytes>, Failed> {
    let taken = || Failed::Final(hosts.broken(host, "the stream was taken", true));
    handle.take().ok_or_else(taken)
}
