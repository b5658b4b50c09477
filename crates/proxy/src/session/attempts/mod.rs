//! One exchange with an upstream, whatever the protocols on either side:
//! the loop that takes a connection to the picked host (pooled or new),
//! sends the request, reads the answer's head, and asks `decide` what
//! follows each attempt (the answer stands, a replay, a resend, a retry
//! on the host `Hosts` names, or the failure is the answer). The wire
//! part of an attempt, the only part that differs between the protocol
//! pairs, is a [`ToUpstream`]: one per client/upstream pair, in the files of
//! those pairs.

pub(super) mod decide;
pub(super) mod hosts;
mod policy;
mod proxied;
pub(super) mod to_upstream;
pub(super) mod traced;

use std::time::Instant;

use decide::{Retries, Then, Tried};
use traced::AttemptSpan;

pub(super) use hosts::Hosts;
pub(super) use to_upstream::{Failed, ToUpstream};

use super::Failure;
use crate::{ids::HostId, telemetry::UpstreamError};

/// The answer that stands: its head read at `at` from `host` on `conn`.
pub(super) struct Answered<C, H> {
    pub host: HostId,
    pub conn: C,
    pub head: H,
    pub at: Instant,
}

/// Sends the request to `host` (picked and held), and again as
/// `retries` decides, until an answer stands or a failure is the answer;
/// within the route's `timeouts.request` when it has one (504 past it).
#[inline]
pub(super) async fn run<W: ToUpstream>(
    wire: &mut W,
    hosts: &Hosts<'_>,
    host: HostId,
    retries: &mut Retries,
) -> Result<Answered<W::Conn, W::Head>, Failure> {
    let Some(limit) = hosts.deadline() else {
        return attempts(wire, hosts, host, retries).await;
    };
    let in_hand = retries.in_hand();
    // Boxed: most routes have no deadline, and their futures stay small.
    let bounded = Box::pin(tokio::time::timeout(
        limit,
        attempts(wire, hosts, host, retries),
    ));
    match bounded.await {
        Ok(outcome) => outcome,
        Err(_) => Err(hosts.request_timed_out(limit, !in_hand)),
    }
}

/// The attempts of [`run`].
#[inline]
async fn attempts<W: ToUpstream>(
    wire: &mut W,
    hosts: &Hosts<'_>,
    mut host: HostId,
    retries: &mut Retries,
) -> Result<Answered<W::Conn, W::Head>, Failure> {
    // Attempts before the current one, for its CLIENT span.
    let mut attempt = 0;
    loop {
        let span = AttemptSpan::begin(hosts, host, attempt);
        attempt += 1;
        let fresh_only = retries.fresh_only();
        let mut conn = match wire.pooled(hosts, host, fresh_only) {
            Some(conn) => conn,
            None => match wire.connect(hosts, host, fresh_only).await {
                Ok(Ok(conn)) => conn,
                Ok(Err(failure)) => {
                    span.failed(hosts, "no_connection");
                    host = hosts.after_failure(host, retries, failure).await?;
                    continue;
                }
                Err(failure) => {
                    span.failed(hosts, "client_gone");
                    return Err(failure);
                }
            },
        };
        if let Some(traceparent) = span.traceparent() {
            wire.traceparent(&traceparent);
        }
        let sent_at = Instant::now();
        let failed = match wire.send(hosts, host, &mut conn, sent_at).await {
            Ok(head) => {
                let status = W::status(&head);
                span.answered(hosts, status);
                let at = hosts.answered(host, sent_at, status);
                let then = hosts.decide(Tried::Answered(status), retries);
                if then != Then::Answer {
                    if let Some(next) = hosts.next_host(host, then, retries).await {
                        // The answer is dropped with its connection or stream.
                        wire.close(conn, Some(head));
                        host = next;
                        continue;
                    }
                }
                return Ok(Answered {
                    host,
                    conn,
                    head,
                    at,
                });
            }
            Err(failed) => failed,
        };
        wire.close(conn, None);
        let (tried, failure) = match failed {
            Failed::Stale => (Tried::Stale, None),
            Failed::Refused => (Tried::Refused, None),
            Failed::Reset(failure) => (Tried::Reset, Some(failure)),
            Failed::Final(failure) => {
                span.failed(hosts, failure.status.as_str());
                return Err(failure);
            }
        };
        span.failed(
            hosts,
            match tried {
                Tried::Stale => "stale_connection",
                Tried::Refused => "refused_stream",
                _ => "reset",
            },
        );
        host = match hosts.again(host, tried, retries).await {
            Some(next) => next,
            None => {
                return Err(failure.unwrap_or_else(|| {
                    let what = match tried {
                        Tried::Refused => "the upstream refused the stream",
                        _ => "the upstream closed the connection before answering",
                    };
                    let body_unread = !retries.in_hand();
                    hosts.failure(host, UpstreamError::Broken, what, body_unread)
                }))
            }
        };
    }
}

#[cfg(test)]
mod tests;
