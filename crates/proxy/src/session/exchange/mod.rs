//! One exchange with an upstream, whatever the protocols on either side:
//! the loop that takes a connection to the picked host (pooled or new),
//! sends the request, reads the answer's head, and asks `decide` what
//! follows each attempt (the answer stands, a replay, a resend, a retry
//! on the host `Sender` names, or the failure is the answer). The wire
//! part of an attempt, the only part that differs between the protocol
//! pairs, is a [`Wire`]: one per client/upstream pair, in the files of
//! those pairs.

pub(super) mod decide;

use std::{future::Future, time::Instant};

use http::StatusCode;

use decide::{Retries, Then, Tried};

use super::{sender::Sender, Failure};
use crate::{ids::HostId, telemetry::UpstreamError};

/// How one attempt failed, as the loop tells failures apart.
pub(super) enum Failed {
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
pub(super) trait Wire {
    /// A connection to a host, or a stream on one.
    type Conn: Send;
    /// The final response head and what relaying its body needs.
    type Answer: Send;

    /// A connection to `host` (a new one with `fresh_only`); `Err` when
    /// the client went away meanwhile, `Ok(Err)` when there is none (the
    /// failure counted against the host by `Sender::after_failure`).
    fn connect(
        &mut self,
        sender: &Sender<'_>,
        host: HostId,
        fresh_only: bool,
    ) -> impl Future<Output = Result<Result<Self::Conn, Failure>, Failure>> + Send;

    /// Sends the request on `conn` and reads the final response head.
    /// What it fails with is dropped with its connection or stream.
    fn send(
        &mut self,
        sender: &Sender<'_>,
        host: HostId,
        conn: Self::Conn,
        sent_at: Instant,
    ) -> impl Future<Output = Result<Self::Answer, Failed>> + Send;

    fn status(answer: &Self::Answer) -> StatusCode;

    /// Drops an answer that is not relayed (the request goes again).
    fn discard(&mut self, answer: Self::Answer);
}

/// The answer that stands, from `host`, its head read at `at`.
pub(super) struct Answered<A> {
    pub host: HostId,
    pub answer: A,
    pub at: Instant,
}

/// Sends the request to `host` (picked and held), and again as
/// `retries` decides, until an answer stands or a failure is the answer.
#[inline]
pub(super) async fn run<W: Wire>(
    wire: &mut W,
    sender: &Sender<'_>,
    mut host: HostId,
    retries: &mut Retries,
) -> Result<Answered<W::Answer>, Failure> {
    loop {
        let conn = match wire.connect(sender, host, retries.fresh_only()).await? {
            Ok(conn) => conn,
            Err(failure) => {
                host = sender.after_failure(host, retries, failure).await?;
                continue;
            }
        };
        let sent_at = Instant::now();
        let (tried, failure) = match wire.send(sender, host, conn, sent_at).await {
            Ok(answer) => {
                let status = W::status(&answer);
                let at = sender.answered(host, sent_at, status);
                let then = sender.decide(Tried::Answered(status), retries);
                if then != Then::Answer {
                    if let Some(next) = sender.next_host(host, then, retries).await {
                        // The answer is dropped with its connection or stream.
                        wire.discard(answer);
                        host = next;
                        continue;
                    }
                }
                return Ok(Answered { host, answer, at });
            }
            Err(Failed::Stale) => (Tried::Stale, None),
            Err(Failed::Refused) => (Tried::Refused, None),
            Err(Failed::Reset(failure)) => (Tried::Reset, Some(failure)),
            Err(Failed::Final(failure)) => return Err(failure),
        };
        host = match sender.again(host, tried, retries).await {
            Some(next) => next,
            None => {
                return Err(failure.unwrap_or_else(|| {
                    let what = match tried {
                        Tried::Refused => "the upstream refused the stream",
                        _ => "the upstream closed the connection before answering",
                    };
                    let body_unread = !retries.in_hand();
                    sender.failure(host, UpstreamError::Broken, what, body_unread)
                }))
            }
        };
    }
}

#[cfg(test)]
mod tests;
