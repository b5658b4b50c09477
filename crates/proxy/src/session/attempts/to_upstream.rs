//! What the loop (`attempts::run`) asks of the wire part of an attempt,
//! for one client/upstream protocol pair, and how an attempt fails.

use std::{future::Future, time::Instant};

use http::StatusCode;

use super::Hosts;
use crate::{ids::HostId, session::Failure};

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

    /// A connection to `host` at hand at once (a pooled one), if any.
    /// Not async: the common case costs no future.
    fn pooled(
        &mut self,
        _sender: &Hosts<'_>,
        _host: HostId,
        _fresh_only: bool,
    ) -> Option<Self::Conn> {
        None
    }

    /// A connection to `host` (a new one with `fresh_only`); `Err` when
    /// the client went away meanwhile, `Ok(Err)` when there is none (the
    /// failure counted against the host by `Hosts::after_failure`).
    fn connect(
        &mut self,
        hosts: &Hosts<'_>,
        host: HostId,
        fresh_only: bool,
    ) -> impl Future<Output = Result<Result<Self::Conn, Failure>, Failure>> + Send;

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

/// The failure of an attempt on a stream whose connection handle an
/// earlier attempt took (each attempt takes a stream of its own).
pub(crate) fn taken(hosts: &Hosts<'_>, host: HostId) -> Failure {
    hosts.broken(host, "the stream was taken", true)
}
