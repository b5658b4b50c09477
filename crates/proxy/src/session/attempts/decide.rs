//! What follows one attempt of an exchange, the same for every client
//! and upstream protocol: answer, replay on a new connection after a
//! stale one, resend a refused stream, retry (as `retry_on`, `retries`
//! and the retry budget allow), or give up. Pure: no socket, no host;
//! the loop (`attempts::run`) acts on the decision and `hosts` says where a
//! retry goes.

use std::time::Duration;

use http::{Method, StatusCode};

use crate::ids::HostId;
use crate::upstream::retry::{Attempt, RetryPolicy};

#[cfg(test)]
mod tests;

/// What one attempt came to, as far as going again is concerned (any
/// other failure is final and never asks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tried {
    /// No connection (or stream) to the host: refused, failed, timed out.
    NoConnection,
    /// A pooled connection the upstream had already closed: nothing was
    /// answered.
    Stale,
    /// The upstream refused the stream unprocessed (REFUSED_STREAM, GOAWAY).
    Refused,
    /// Closed or reset before any byte of an answer.
    Reset,
    /// A final response head with this status.
    Answered(StatusCode),
}

/// What the loop does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// The outcome stands: the answer is relayed, the failure answered.
    Answer,
    /// Again to the same host at once, on a new connection.
    Replay,
    /// Again to the same host at once (it did not process the request).
    Resend,
    /// Again after [`RetryPolicy::backoff`], where `hosts` sends a
    /// retry of this `Attempt` (another host, or the same one).
    Retry(Attempt),
}

/// One request's attempts: what it may still do after a failed one.
#[derive(Debug, Clone)]
pub(crate) struct Retries {
    /// Attempts gone again so far (retries and resends; not replays).
    made: u32,
    /// `retries` of the upstream.
    retries: u32,
    idempotent: bool,
    /// The whole body is in hand (it can be sent again).
    in_hand: bool,
    /// The next attempt takes a new connection, not a pooled one
    /// (after a replay, until the request moves to another host).
    fresh_only: bool,
}

impl Retries {
    pub(crate) fn new(retries: u32, method: &Method, in_hand: bool) -> Self {
        Self {
            made: 0,
            retries,
            idempotent: is_idempotent(method),
            in_hand,
            fresh_only: false,
        }
    }

    /// Whether the next attempt must take a new connection.
    #[inline]
    pub(crate) fn fresh_only(&self) -> bool {
        self.fresh_only
    }

    /// Whether the whole body is in hand (an attempt may send it again).
    pub(crate) fn in_hand(&self) -> bool {
        self.in_hand
    }

    /// Retries (and resends) made so far.
    #[cfg(test)]
    pub(crate) fn made(&self) -> u32 {
        self.made
    }

    /// Whether the request may be sent again once it went out: an
    /// idempotent one whose body is all in hand.
    fn safe(&self) -> bool {
        self.idempotent && self.in_hand
    }

    /// What follows `tried`, at `now` on the plan's clock (the budget's
    /// window, read only to spend from it); `elsewhere` says whether another host is in, asked only
    /// after a failed connect with retries left. A retry decided is
    /// counted (and spent from the budget).
    #[inline]
    pub(crate) fn decide(
        &mut self,
        tried: Tried,
        policy: &RetryPolicy,
        now: impl FnOnce() -> u64,
        elsewhere: impl FnOnce() -> bool,
    ) -> Then {
        match tried {
            // The common case first, and cheap: one flag when no status is listed.
            Tried::Answered(status) if !policy.on_status(status.as_u16()) => Then::Answer,
            Tried::Answered(status) => {
                self.retry(Attempt::Status(status.as_u16()), self.safe(), policy, now)
            }
            Tried::Stale if replay_after_stale_(self.safe(), self.fresh_only) => {
                self.fresh_only = true;
                Then::Replay
            }
            Tried::Stale => Then::Answer,
            Tried::Refused if resend_after_refused(self.made, self.retries, self.in_hand) => {
                self.made += 1;
                Then::Resend
            }
            Tried::Refused => Then::Answer,
            Tried::Reset => self.retry(Attempt::Reset, self.safe(), policy, now),
            Tried::NoConnection => {
                match after_connect_failure(self.made, self.retries, elsewhere) {
                    AfterConnectFailure::Retry => {
                        // Nothing was sent: any request may go again.
                        self.retry(Attempt::ConnectFailure, true, policy, now)
                    }
                    AfterConnectFailure::GiveUp | AfterConnectFailure::NoHealthyHost => {
                        Then::Answer
                    }
                }
            }
        }
    }

    fn retry(
        &mut self,
        attempt: Attempt,
        safe: bool,
        policy: &RetryPolicy,
        now: impl FnOnce() -> u64,
    ) -> Then {
        if !may_retry(policy, attempt, self.made, self.retries, safe, now()) {
            return Then::Answer;
        }
        self.made += 1;
        self.fresh_only = false;
        Then::Retry(attempt)
    }

    /// The wait before the retry just decided.
    pub(crate) fn backoff(&self, policy: &RetryPolicy) -> Duration {
        policy.backoff(self.made)
    }
}

/// Whether a request whose pooled connection turned out closed before it
/// answered may go again on a new connection: only an idempotent one
/// whose body is all in hand, and only once (the rule of
/// [`Retries::decide`], by method).
#[cfg(test)]
pub(crate) fn replay_after_stale(method: &Method, replayable: bool, fresh_only: bool) -> bool {
    replay_after_stale_(replayable && is_idempotent(method), fresh_only)
}

fn replay_after_stale_(safe: bool, fresh_only: bool) -> bool {
    safe && !fresh_only
}

/// Whether a stream the upstream refused (REFUSED_STREAM, GOAWAY) may be
/// sent again: it was not processed, so any request may, as long as its
/// body can be sent again and retries are left.
pub(crate) fn resend_after_refused(attempts: u32, retries: u32, body_in_hand: bool) -> bool {
    body_in_hand && attempts < retries
}

/// Whether failed attempt number `attempts` (of `retries`) goes again:
/// `retry_on` lists its failure, the request is `safe` to send again (a
/// connect failure always is), and the retry budget has one left. The
/// budget is asked last, as asking spends a retry.
pub(crate) fn may_retry(
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
pub(crate) fn retry_host(
    failed: HostId,
    attempt: Attempt,
    next: Option<HostId>,
    healthy: impl FnOnce() -> usize,
) -> Option<HostId> {
    next.or_else(|| (attempt != Attempt::ConnectFailure && healthy() > 0).then_some(failed))
}

/// What follows a failed connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterConnectFailure {
    /// No retries left: the failure (502 or 504) is the answer.
    GiveUp,
    /// Retries left but no other host in: the failure is the answer.
    NoHealthyHost,
    /// Try another host, as [`may_retry`] and [`retry_host`] decide.
    Retry,
}

/// [`AfterConnectFailure`] for attempt number `attempts` of `retries`;
/// `another_host` says whether a host other than the failed one is in
/// (asked only when retries are left).
pub(crate) fn after_connect_failure(
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

pub(crate) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE | Method::TRACE
    )
}
