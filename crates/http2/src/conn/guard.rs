//! Flood guards: things a peer can make a connection do cheaply and
//! often, counted in fixed windows of time; past a limit the connection
//! ends with ENHANCE_YOUR_CALM. PING and SETTINGS frames (each makes this
//! side write an acknowledgement), empty DATA frames, PRIORITY frames and
//! window updates that change nothing (the CVE-2019-9512 family), and
//! streams this side had to reset for a fault of the peer's
//! (CVE-2025-8671, MadeYouReset).

use std::time::{Duration, Instant};

/// A count of events in fixed windows.
#[derive(Debug, Clone)]
pub(crate) struct Counter {
    max: u32,
    window: Duration,
    count: u32,
    since: Option<Instant>,
}

impl Counter {
    pub(crate) fn new(max: u32, window: Duration) -> Self {
        Self {
            max,
            window,
            count: 0,
            since: None,
        }
    }

    /// Counts one at `now`; true once the window holds more than `max`.
    pub(crate) fn exceeded(&mut self, now: Instant) -> bool {
        match self.since {
            Some(since) if now.duration_since(since) < self.window => {
                self.count = self.count.saturating_add(1)
            }
            _ => (self.since, self.count) = (Some(now), 1),
        }
        self.count > self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_holds_max_then_refuses_and_starts_again() {
        let start = Instant::now();
        let mut counter = Counter::new(2, Duration::from_secs(10));
        assert!(!counter.exceeded(start));
        assert!(!counter.exceeded(start));
        assert!(counter.exceeded(start + Duration::from_secs(1)));
        assert!(
            !counter.exceeded(start + Duration::from_secs(11)),
            "a new window"
        );
    }
}
