//! Streams a client resets before their answers are complete, counted per
//! connection: the rapid-reset attack (CVE-2023-44487) opens streams and
//! resets them at once, so that each costs the upstreams work and the
//! client nothing. HTTP/2 and HTTP/3 connections count them the same way
//! (`http2.max_premature_resets` per `http2.premature_reset_window`).

use std::time::Duration;

use tokio::time::Instant;

/// Streams a client reset before their answers were complete, counted
/// in fixed windows (`http2.max_premature_resets` per
/// `http2.premature_reset_window`).
pub(crate) struct PrematureResets {
    max: u32,
    window: Duration,
    count: u32,
    since: Option<Instant>,
}

impl PrematureResets {
    pub(crate) fn new(max: u32, window: Duration) -> Self {
        Self {
            max,
            window,
            count: 0,
            since: None,
        }
    }

    /// Counts one at `now`; true once the window holds more than `max`.
    pub(crate) fn flood(&mut self, now: Instant) -> bool {
        match self.since {
            Some(since) if now.duration_since(since) < self.window => self.count += 1,
            _ => (self.since, self.count) = (Some(now), 1),
        }
        self.count > self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn premature_resets_past_the_limit_in_a_window_are_a_flood() {
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let mut resets = PrematureResets::new(3, 10 * second);
        for n in 0..3 {
            assert!(
                !resets.flood(start + n * second),
                "reset {n} is within the limit"
            );
        }
        assert!(resets.flood(start + 4 * second), "the fourth in 10 s");
        // A new window starts the count again.
        let mut resets = PrematureResets::new(3, 10 * second);
        for n in 0..3 {
            assert!(!resets.flood(start + n * second));
        }
        assert!(!resets.flood(start + 11 * second), "the window has passed");
        assert!(!resets.flood(start + 12 * second));
        assert!(!resets.flood(start + 13 * second));
        assert!(resets.flood(start + 14 * second));
        // 0 allows none.
        assert!(PrematureResets::new(0, second).flood(start));
    }
}
