//! Sending a request upstream: which host (the balancer, then another
//! after a failed attempt, within `retries`, `retry_on` and the budget),
//! which connection (a pooled one, or a new one when a pooled one turned
//! out stale), and how failures are answered (502, 503, 504).

use super::{upstream_h1::Reset, upstream_h1::Stale, Failure, Next, SendFailed, Session};
use crate::config::Protocol;
use crate::ids::{HostId, RouteId, UpstreamId};
use crate::telemetry::UpstreamError;
use crate::upstream::pool::UpstreamConn;
use crate::upstream::retry::{Attempt, RetryPolicy};
use crate::wire::fields::Fields;
use http1::Head;

use std::{sync::Arc, time::Instant};

use bytes::Buf;
use http::Method;
use tokio::io::{AsyncRead, AsyncWrite};

pub(super) use super::sender::Sender;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Sends the request upstream (retrying where safe) and streams the answer back.
    pub(super) async fn forward(&mut self, head: &Head, route: RouteId) -> Result<Next, Failure> {
        let plan = Arc::clone(&self.plan);
        let worker = Arc::clone(&self.worker);
        let upstream_index = plan.route(route).upstream;
        let upstream = &plan.upstream(upstream_index);
        if upstream.protocol != Protocol::Http1 {
            return self.forward_h2(head, route).await;
        }
        let sender = Sender::new(&plan, &worker, upstream_index, self.peer);
        // Picked while the client's head is at hand (hash keys, cookies);
        // a 503 is answered once the head is consumed.
        let (rbuf, fields) = (&self.conn.rbuf, &self.fields);
        let picked = sender.choose(|| super::upstream_h1::outgoing(rbuf, head, fields));
        self.build_request(head, upstream.host_header.as_ref())?;
        // The head is in `ubuf` now; the client's copy is not needed any more.
        self.conn.rbuf.advance(head.len);
        let replayable = self.buffer_body(head)?;
        let mut host = picked?;
        if sender.waits() {
            self.unless_client_gone(sender.hold(host)).await??;
        }
        let safe = replayable && is_idempotent(&head.method);

        let mut attempts = 0;
        let mut fresh_only = false;
        loop {
            // A client that leaves while its request waits for a
            // connection (a full pool, `max_connecting`) is not served.
            let now = self.conn.last_read().into_std();
            let conn = match sender.pooled(host, fresh_only, now) {
                Some(conn) => Ok(conn),
                None => {
                    self.unless_client_gone(sender.opened(host, fresh_only))
                        .await?
                }
            };
            let mut conn = match conn {
                Ok(conn) => conn,
                Err(failure) => {
                    host = sender.after_failure(host, &mut attempts, failure).await?;
                    continue;
                }
            };
            let sent_at = Instant::now();
            let outcome = self
                .send_and_read_head(head, &mut conn, replayable, sent_at)
                .await;
            match outcome {
                Ok(response) => {
                    let answered = sender.answered(host, sent_at, response.status);
                    if sender.retries_status(response.status) {
                        let status = Attempt::Status(response.status.as_u16());
                        if let Some(next) = sender.retry(host, status, &mut attempts, safe).await {
                            // The answer is dropped with its connection.
                            worker.metrics().upstream_open(upstream_index, -1);
                            (host, fresh_only) = (next, false);
                            continue;
                        }
                    }
                    sender.learn_cookies(
                        host,
                        Fields::H1 {
                            buf: &conn.buf,
                            fields: &self.response_fields,
                        },
                    );
                    let cookie = sender.cookie(host);
                    return self
                        .respond(head, route, conn, response, answered, cookie)
                        .await;
                }
                // A pooled connection the upstream had closed: try a new one.
                Err(Stale) if replay_after_stale(&head.method, replayable, fresh_only) => {
                    worker.metrics().upstream_open(upstream_index, -1);
                    fresh_only = true;
                }
                Err(Stale) => {
                    worker.metrics().upstream_open(upstream_index, -1);
                    return Err(sender.failure(
                        host,
                        UpstreamError::Broken,
                        "the upstream closed the connection before answering",
                        !replayable,
                    ));
                }
                // Closed or reset before a byte of an answer (`retry_on: reset`).
                Err(Reset(failure)) => {
                    worker.metrics().upstream_open(upstream_index, -1);
                    match sender
                        .retry(host, Attempt::Reset, &mut attempts, safe)
                        .await
                    {
                        Some(next) => (host, fresh_only) = (next, false),
                        None => return Err(failure),
                    }
                }
                Err(SendFailed(failure)) => {
                    worker.metrics().upstream_open(upstream_index, -1);
                    return Err(failure);
                }
            }
        }
    }

    /// The retry and failure rules for one upstream, for one step of this
    /// request (it holds no host: see [`Sender::pick`]).
    pub(super) fn sender(&self, upstream: UpstreamId) -> Sender<'_> {
        Sender::new(&self.plan, &self.worker, upstream, self.peer)
    }

    pub(super) fn upstream_failure(
        &self,
        upstream: UpstreamId,
        host: HostId,
        kind: UpstreamError,
        what: &str,
        body_unread: bool,
    ) -> Failure {
        self.sender(upstream).failure(host, kind, what, body_unread)
    }

    pub(super) fn connect_failure(
        &self,
        upstream: UpstreamId,
        host: HostId,
        err: crate::upstream::connect::ConnectError,
    ) -> Failure {
        self.sender(upstream).connect_failure(host, err)
    }

    pub(super) fn broken(&self, conn: &UpstreamConn, what: &str, body_unread: bool) -> Failure {
        self.sender(conn.upstream)
            .broken(conn.host, what, body_unread)
    }

    pub(super) fn timed_out(&self, conn: &UpstreamConn, timeout: std::time::Duration) -> Failure {
        self.sender(conn.upstream).timed_out(conn.host, timeout)
    }
}

/// Whether a request whose pooled connection turned out closed before it
/// answered may go again on a new connection: only an idempotent one
/// whose body is all in hand, and only once.
pub(super) fn replay_after_stale(method: &Method, replayable: bool, fresh_only: bool) -> bool {
    replayable && is_idempotent(method) && !fresh_only
}

/// Whether a stream the upstream refused (REFUSED_STREAM, GOAWAY) may be
/// sent again: it was not processed, so any request may, as long as its
/// body can be sent again and retries are left.
pub(super) fn resend_after_refused(attempts: u32, retries: u32, body_in_hand: bool) -> bool {
    body_in_hand && attempts < retries
}

/// Whether failed attempt number `attempts` (of `retries`) goes again:
/// `retry_on` lists its failure, the request is `safe` to send again (a
/// connect failure always is), and the retry budget has one left. The
/// budget is asked last, as asking spends a retry.
pub(super) fn may_retry(
    policy: &RetryPolicy,
    attempt: Attempt,
    attempts: u32,
    retries: u32,
    safe: bool,
    now: u64,
) -> bool {
    attempts < retries && policy.allows(attempt, safe, safe) && policy.spend(now)
}

/// Where a retry of an `attempt` that failed on `failed` goes: `next`, the
/// next host in after it, if any; else the same host again, unless the
/// connection to it failed (it would again) or no host is in any more
/// (`healthy`, only counted then).
pub(super) fn retry_host(
    failed: HostId,
    attempt: Attempt,
    next: Option<HostId>,
    healthy: impl FnOnce() -> usize,
) -> Option<HostId> {
    next.or_else(|| (attempt != Attempt::ConnectFailure && healthy() > 0).then_some(failed))
}

/// What follows a failed connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterConnectFailure {
    /// No retries left: the failure (502 or 504) is the answer.
    GiveUp,
    /// Retries left but no other host in: 503.
    NoHealthyHost,
    /// Try another host, as [`may_retry`] and [`retry_host`] decide.
    Retry,
}

/// [`AfterConnectFailure`] for attempt number `attempts` of `retries`;
/// `another_host` says whether a host other than the failed one is in
/// (asked only when retries are left).
pub(super) fn after_connect_failure(
    attempts: u32,
    retries: u32,
    another_host: impl FnOnce() -> bool,
) -> AfterConnectFailure {
    if attempts >= retries {
        AfterConnectFailure::GiveUp
    } else if !another_host() {
        AfterConnectFailure::NoHealthyHost
    } else {
        AfterConnectFailure::Retry
    }
}

pub(super) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE | Method::TRACE
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::retry::tests::policy;

    #[test]
    fn only_idempotent_requests_with_their_body_in_hand_replay_once() {
        assert!(replay_after_stale(&Method::GET, true, false));
        assert!(replay_after_stale(&Method::PUT, true, false));
        assert!(!replay_after_stale(&Method::POST, true, false));
        assert!(
            !replay_after_stale(&Method::GET, false, false),
            "body streamed"
        );
        assert!(
            !replay_after_stale(&Method::GET, true, true),
            "already replayed"
        );
    }

    #[test]
    fn refused_streams_are_resent_within_the_retries() {
        assert!(resend_after_refused(0, 2, true));
        assert!(resend_after_refused(1, 2, true));
        assert!(!resend_after_refused(2, 2, true));
        assert!(!resend_after_refused(0, 2, false), "the body is gone");
        assert!(!resend_after_refused(0, 0, true), "no retries");
    }

    #[test]
    fn failed_attempts_go_again_only_when_listed_safe_within_retries_and_budget() {
        let listed = "retry_on: [connect_failure, reset, 503]";
        let get = true;
        let post = false;
        // (retry_on, failure, attempts made, retries, safe, goes again, why)
        let table = [
            (
                listed,
                Attempt::Reset,
                0,
                2,
                get,
                true,
                "a GET reset, retries left",
            ),
            (listed, Attempt::Reset, 1, 2, get, true, "the second retry"),
            (listed, Attempt::Reset, 2, 2, get, false, "retries spent"),
            (listed, Attempt::Reset, 0, 0, get, false, "retries: 0"),
            (
                listed,
                Attempt::Reset,
                0,
                2,
                post,
                false,
                "a POST is not sent twice",
            ),
            (
                listed,
                Attempt::Status(503),
                0,
                2,
                get,
                true,
                "a listed status",
            ),
            (
                listed,
                Attempt::Status(502),
                0,
                2,
                get,
                false,
                "an unlisted status",
            ),
            (
                listed,
                Attempt::ConnectFailure,
                0,
                2,
                post,
                true,
                "nothing was sent",
            ),
            (
                "",
                Attempt::ConnectFailure,
                0,
                2,
                get,
                true,
                "connect_failure by default",
            ),
            (
                "",
                Attempt::Reset,
                0,
                2,
                get,
                false,
                "reset is not a default",
            ),
            (
                "retry_on: []",
                Attempt::ConnectFailure,
                0,
                2,
                get,
                false,
                "nothing listed",
            ),
        ];
        for (yaml, attempt, attempts, retries, safe, expected, why) in table {
            let got = may_retry(&policy(yaml), attempt, attempts, retries, safe, 0);
            assert_eq!(
                got, expected,
                "{why}: {yaml:?} {attempt:?} {attempts}/{retries}"
            );
        }
    }

    #[test]
    fn the_budget_is_asked_last_and_caps_retries() {
        // At most one retry a second (no requests counted, so the minimum).
        let p = policy("retry_on: [reset]\nretry_budget: { percent: 0, min_per_second: 1 }");
        assert!(!may_retry(&p, Attempt::Reset, 0, 2, false, 0), "a POST");
        assert!(
            !may_retry(&p, Attempt::Reset, 2, 2, true, 0),
            "no retries left"
        );
        assert!(
            may_retry(&p, Attempt::Reset, 0, 2, true, 0),
            "the refusals spent nothing"
        );
        assert!(
            !may_retry(&p, Attempt::Reset, 1, 2, true, 0),
            "the budget is spent"
        );
        let next_second = 1_000_000_000;
        assert!(may_retry(&p, Attempt::Reset, 1, 2, true, next_second));
    }

    #[test]
    fn a_retry_goes_to_another_host_or_back_to_one_that_still_answers() {
        let (failed, other) = (HostId::new(0), HostId::new(1));
        // (failure, next host in, hosts in, where the retry goes, why)
        let table = [
            (Attempt::Reset, Some(other), 2, Some(other), "another host"),
            (
                Attempt::ConnectFailure,
                Some(other),
                2,
                Some(other),
                "another host",
            ),
            (
                Attempt::Reset,
                None,
                1,
                Some(failed),
                "the only host, again",
            ),
            (
                Attempt::Status(503),
                None,
                1,
                Some(failed),
                "the only host, again",
            ),
            (Attempt::Reset, None, 0, None, "ejected meanwhile"),
            (
                Attempt::ConnectFailure,
                None,
                1,
                None,
                "it would refuse again",
            ),
        ];
        for (attempt, next, healthy, expected, why) in table {
            assert_eq!(
                retry_host(failed, attempt, next, || healthy),
                expected,
                "{why}"
            );
        }
        let counted = std::cell::Cell::new(false);
        retry_host(failed, Attempt::Reset, Some(other), || {
            counted.set(true);
            1
        });
        assert!(
            !counted.get(),
            "hosts in are counted only without a next one"
        );
    }

    #[test]
    fn a_failed_connect_gives_up_without_retries_and_answers_503_without_another_host() {
        use AfterConnectFailure::{GiveUp, NoHealthyHost, Retry};
        // (attempts made, retries, another host in, what follows)
        let table = [
            (0, 2, true, Retry),
            (1, 2, true, Retry),
            (2, 2, true, GiveUp),
            (0, 0, true, GiveUp),
            (0, 0, false, GiveUp),
            (0, 2, false, NoHealthyHost),
        ];
        for (attempts, retries, another, expected) in table {
            let got = after_connect_failure(attempts, retries, || another);
            assert_eq!(
                got, expected,
                "{attempts}/{retries}, another host: {another}"
            );
        }
    }
}
