//! When a failed attempt is tried again (`retry_on`), how many retries an
//! upstream may spend (`retry_budget`), and how long to wait first
//! (jittered exponential backoff, `retry_backoff`).

use std::{
    sync::atomic::{AtomicU64, Ordering::Relaxed},
    time::Duration,
};

use crate::config::{RetryBudgetSettings, RetryOn, UpstreamSettings};
use crate::ids::HostId;

/// Why an attempt failed, as `retry_on` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    ConnectFailure,
    /// Closed or reset before any byte of an answer.
    Reset,
    Status(u16),
}

#[derive(Debug)]
pub(crate) struct RetryPolicy {
    on: Vec<RetryOn>,
    /// Whether any 5xx is listed (a status check on every answer otherwise costs nothing).
    on_status: bool,
    backoff: Duration,
    budget: Option<Budget>,
}

/// Retries and requests of the current one-second window.
#[derive(Debug)]
struct Budget {
    settings: RetryBudgetSettings,
    /// The window's second on the plan's clock, the requests and the
    /// retries in it; a new second starts them over.
    window: AtomicU64,
    requests: AtomicU64,
    retries: AtomicU64,
}

impl RetryPolicy {
    pub(crate) fn new(settings: &UpstreamSettings) -> Self {
        Self {
            on: settings.retry_on.clone(),
            on_status: settings
                .retry_on
                .iter()
                .any(|r| matches!(r, RetryOn::Status(_))),
            backoff: settings.retry_backoff,
            budget: settings.retry_budget.clone().map(|settings| Budget {
                settings,
                window: AtomicU64::new(0),
                requests: AtomicU64::new(0),
                retries: AtomicU64::new(0),
            }),
        }
    }

    /// A route's own retry rules (`routes[].retries`): no budget.
    pub(crate) fn for_route(on: &[RetryOn], backoff: Duration) -> Self {
        Self {
            on: on.to_vec(),
            on_status: on.iter().any(|r| matches!(r, RetryOn::Status(_))),
            backoff,
            budget: None,
        }
    }

    /// Whether an answer with `status` may be retried at all (before the
    /// request's own conditions).
    #[inline]
    pub(crate) fn on_status(&self, status: u16) -> bool {
        self.on_status && self.on.contains(&RetryOn::Status(status))
    }

    /// Whether `attempt`'s failure is retried: listed in `retry_on` and,
    /// except for a connect failure (nothing was sent), only for an
    /// idempotent request whose body is all in hand (`replayable`).
    pub(crate) fn allows(&self, attempt: Attempt, idempotent: bool, replayable: bool) -> bool {
        let listed = match attempt {
            Attempt::ConnectFailure => self.on.contains(&RetryOn::ConnectFailure),
            Attempt::Reset => self.on.contains(&RetryOn::Reset),
            Attempt::Status(status) => self.on_status(status),
        };
        listed && (attempt == Attempt::ConnectFailure || (idempotent && replayable))
    }

    /// Counts a request against the budget (a no-op without one).
    pub(crate) fn request(&self, now: u64) {
        if let Some(budget) = &self.budget {
            budget.roll(now);
            budget.requests.fetch_add(1, Relaxed);
        }
    }

    /// Spends a retry if the budget has one left.
    pub(crate) fn spend(&self, now: u64) -> bool {
        let Some(budget) = &self.budget else {
            return true;
        };
        budget.roll(now);
        let requests = budget.requests.load(Relaxed);
        let allowed = (requests * u64::from(budget.settings.percent) / 100)
            .max(u64::from(budget.settings.min_per_second));
        budget
            .retries
            .fetch_update(Relaxed, Relaxed, |n| (n < allowed).then_some(n + 1))
            .is_ok()
    }

    /// The wait before retry number `retry` (1, 2, ...): a random time up
    /// to base × 2^(retry-1), at most 10 × base ("full jitter").
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let ceiling = self
            .backoff
            .saturating_mul(1 << retry.saturating_sub(1).min(16))
            .min(self.backoff * 10);
        ceiling.mul_f64(fastrand::f64())
    }
}

/// Where a request goes after its connect to `failed` failed: the next
/// host that takes traffic (`next`); else, after a timeout, `failed`
/// again if it is still in by its health (`in_by_health`). A saturated
/// host drops SYNs while its accept queue is full, and a new attempt is
/// what TCP's own retransmission would be; a refused connection would be
/// refused again, and a host already out (tried only below the panic
/// threshold) gets no second attempt.
pub(crate) fn connect_retry_host(
    failed: HostId,
    timed_out: bool,
    next: Option<HostId>,
    in_by_health: impl FnOnce() -> bool,
) -> Option<HostId> {
    next.or_else(|| (timed_out && in_by_health()).then_some(failed))
}

impl Budget {
    fn roll(&self, now: u64) {
        let second = now / 1_000_000_000 + 1;
        let window = self.window.load(Relaxed);
        if window != second
            && self
                .window
                .compare_exchange(window, second, Relaxed, Relaxed)
                .is_ok()
        {
            self.requests.store(0, Relaxed);
            self.retries.store(0, Relaxed);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The policy of an upstream with one host and the keys in `yaml`
    /// (`retry_on`, `retry_budget`, `retry_backoff`).
    pub(crate) fn policy(yaml: &str) -> RetryPolicy {
        let settings: UpstreamSettings =
            serde_saphyr::from_str(&format!("hosts: [\"http://a:1\"]\n{yaml}")).unwrap();
        RetryPolicy::new(&settings)
    }

    #[test]
    fn only_listed_failures_of_safe_requests_are_retried() {
        let p = policy("retry_on: [connect_failure, reset, 502, \"503\"]");
        assert!(p.allows(Attempt::Reset, true, true), "a GET on a reset");
        assert!(!p.allows(Attempt::Reset, false, true), "a POST is not");
        assert!(
            !p.allows(Attempt::Reset, true, false),
            "a streamed body is gone"
        );
        assert!(
            p.allows(Attempt::ConnectFailure, false, false),
            "nothing was sent"
        );
        assert!(p.allows(Attempt::Status(503), true, true));
        assert!(!p.allows(Attempt::Status(504), true, true), "not listed");
        let default = policy("");
        assert!(default.allows(Attempt::ConnectFailure, true, true));
        assert!(!default.allows(Attempt::Reset, true, true));
        assert!(!default.on_status(502));
    }

    #[test]
    fn the_budget_caps_retries_per_second() {
        let p = policy("retry_budget: { percent: 10, min_per_second: 2 }");
        let now = 5_000_000_000;
        for _ in 0..100 {
            p.request(now);
        }
        let spent = (0..50).filter(|_| p.spend(now)).count();
        assert_eq!(spent, 10, "10% of 100 requests");
        // The next second starts over: the minimum applies.
        let spent = (0..50).filter(|_| p.spend(now + 1_000_000_000)).count();
        assert_eq!(spent, 2);
        assert!(
            policy("").spend(now),
            "no budget: retries only count against `retries`"
        );
    }

    #[test]
    fn a_timed_out_connect_may_go_to_the_same_host_a_refused_one_not() {
        let (a, b) = (HostId::new(0), HostId::new(1));
        assert_eq!(connect_retry_host(a, false, Some(b), || true), Some(b));
        assert_eq!(connect_retry_host(a, true, Some(b), || true), Some(b));
        // The only host: again after a timeout (saturated), not after a refusal.
        assert_eq!(connect_retry_host(a, true, None, || true), Some(a));
        assert_eq!(connect_retry_host(a, false, None, || true), None);
        // Out by its health (tried below the panic threshold): no second attempt.
        assert_eq!(connect_retry_host(a, true, None, || false), None);
    }

    #[test]
    fn backoff_is_jittered_and_capped() {
        let p = policy("retry_backoff: 10ms");
        for retry in 1..8 {
            let wait = p.backoff(retry);
            let ceiling = Duration::from_millis(10 << (retry - 1)).min(Duration::from_millis(100));
            assert!(wait <= ceiling, "retry {retry}: {wait:?}");
        }
        let waits: std::collections::HashSet<_> = (0..20).map(|_| p.backoff(3)).collect();
        assert!(waits.len() > 1, "jittered");
    }
}
