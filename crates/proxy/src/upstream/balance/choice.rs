//! The policies that choose among hosts, without sockets: the smooth
//! weighted round-robin cycle, weighted random, and the two power-of-two-
//! choices policies (fewest in-flight requests; lowest peak-EWMA latency
//! × in-flight, as linkerd and Finagle do).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The smooth weighted round-robin order (nginx's algorithm) of one cycle:
/// with weights 5, 1, 1 it is a a b a c a a, not a a a a a b c. Equal
/// weights give 0, 1, 2, ... Computed once; a pick is an index into it.
pub(super) fn smooth_cycle(weights: &[u32]) -> Vec<u32> {
    let divisor = weights.iter().copied().fold(0, gcd).max(1);
    let weights: Vec<i64> = weights.iter().map(|&w| i64::from(w / divisor)).collect();
    let total: i64 = weights.iter().sum();
    let mut current = vec![0i64; weights.len()];
    let mut cycle = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        let mut best = 0;
        for (host, weight) in weights.iter().enumerate() {
            current[host] += weight;
            if current[host] > current[best] {
                best = host;
            }
        }
        current[best] -= total;
        cycle.push(u32::try_from(best).unwrap_or(0));
    }
    cycle
}

pub(super) fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Running totals of the weights, for a weighted random draw.
#[derive(Debug)]
pub(super) struct Cumulative(Vec<u64>);

impl Cumulative {
    pub(super) fn new(weights: &[u32]) -> Self {
        let mut sum = 0;
        Self(
            weights
                .iter()
                .map(|&w| {
                    sum += u64::from(w);
                    sum
                })
                .collect(),
        )
    }

    /// The host owning `draw` (0 to the total weight, exclusive).
    pub(super) fn host(&self, draw: u64) -> usize {
        self.0.partition_point(|&end| end <= draw)
    }

    pub(super) fn total(&self) -> u64 {
        self.0.last().copied().unwrap_or(0)
    }
}

/// How long a latency peak takes to fade (to 1/e). linkerd and Finagle
/// use 10 s; at tens of thousands of answers a second that makes a fast
/// host's average its worst answer of the last ~10 s, and on a busy
/// machine every host has a bad moment: a host 40 ms slower, faded since
/// it was last tried, then looked no worse than a fast host that once
/// waited for the CPU. 1 s forgets such moments quickly and still tries
/// the slow host only every few seconds (lb-slow, docs/PERFORMANCE.md).
const DECAY_NANOS: f64 = 1e9;

/// A host's response time as a peak-sensitive moving average: a slower
/// answer than the average replaces it at once, faster ones pull it down
/// with a weight that grows with the time since the last update. Racing
/// updates from two workers may lose one sample, which is harmless.
#[derive(Debug, Default)]
pub(super) struct PeakEwma {
    nanos: AtomicU64,
    stamp: AtomicU64,
}

impl PeakEwma {
    pub(super) fn observe(&self, rtt: u64, now: u64) {
        let previous = self.nanos.load(Relaxed);
        let last = self.stamp.swap(now, Relaxed);
        let next = if rtt >= previous {
            rtt
        } else {
            let elapsed = now.saturating_sub(last) as f64;
            let keep = (-elapsed / DECAY_NANOS).exp();
            (previous as f64 * keep + rtt as f64 * (1.0 - keep)) as u64
        };
        self.nanos.store(next.max(1), Relaxed);
    }

    pub(super) fn nanos(&self) -> u64 {
        self.nanos.load(Relaxed)
    }

    pub(super) fn take_over(&self, old: &PeakEwma) {
        self.nanos.store(old.nanos.load(Relaxed), Relaxed);
        self.stamp.store(old.stamp.load(Relaxed), Relaxed);
    }

    /// The average as of `now`: faded for the time since the last answer,
    /// as Finagle reads it, so that a host left alone for being slow is
    /// tried again after a while (40 ms fades below 1 ms in ~3.7 s).
    pub(super) fn at(&self, now: u64) -> u64 {
        let nanos = self.nanos.load(Relaxed);
        let elapsed = now.saturating_sub(self.stamp.load(Relaxed));
        if nanos == 0 || elapsed == 0 {
            return nanos;
        }
        ((nanos as f64 * (-(elapsed as f64) / DECAY_NANOS).exp()) as u64).max(1)
    }
}

/// What a P2C policy compares; lower wins.
/// (`share`: below 1.0 while a host ramps up after `slow_start`.)
pub(super) fn least_request_cost(in_flight: u32, share: f64) -> f64 {
    f64::from(in_flight + 1) / share
}

/// Finagle's cost: latency × (in-flight + 1); a host never measured that
/// already has requests gets a large penalty instead of looking free.
pub(super) fn least_time_cost(ewma: u64, in_flight: u32, share: f64) -> f64 {
    const PENALTY: f64 = 1e12;
    let latency = match (ewma, in_flight) {
        (0, 0) => 1.0,
        (0, _) => PENALTY,
        (nanos, _) => nanos as f64,
    };
    latency * f64::from(in_flight + 1) / share
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_cycle_interleaves_by_weight() {
        assert_eq!(smooth_cycle(&[1, 1, 1]), [0, 1, 2]);
        assert_eq!(smooth_cycle(&[5, 1, 1]), [0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(smooth_cycle(&[2, 6]), [1, 0, 1, 1], "reduced by the gcd");
    }

    #[test]
    fn cumulative_maps_draws_to_hosts() {
        let c = Cumulative::new(&[1, 3]);
        assert_eq!(c.total(), 4);
        let hosts: Vec<_> = (0..4).map(|d| c.host(d)).collect();
        assert_eq!(hosts, [0, 1, 1, 1]);
    }

    #[test]
    fn peak_ewma_jumps_up_and_decays_down() {
        let e = PeakEwma::default();
        e.observe(1_000, 0);
        e.observe(50_000_000, 1);
        assert_eq!(e.nanos(), 50_000_000, "a peak is taken at once");
        e.observe(1_000, 2);
        assert!(
            e.nanos() > 49_000_000,
            "a fast answer right after barely moves it"
        );
        assert!(e.at(40_000_000_000) < 1_000_000, "left alone, it fades");
        e.observe(1_000, 60_000_000_000);
        assert!(e.nanos() < 1_000_000, "a minute later it has faded");
    }

    #[test]
    fn least_time_prefers_fast_hosts_until_they_queue() {
        let fast = 200_000; // 0.2 ms
        let slow = 40_000_000; // 40 ms
        assert!(least_time_cost(fast, 10, 1.0) < least_time_cost(slow, 0, 1.0));
        assert!(least_time_cost(fast, 400, 1.0) > least_time_cost(slow, 0, 1.0));
        assert!(least_time_cost(0, 1, 1.0) > least_time_cost(slow, 5, 1.0));
        assert!(least_request_cost(1, 1.0) < least_request_cost(2, 1.0));
        assert!(
            least_request_cost(1, 0.5) > least_request_cost(2, 1.0),
            "ramping"
        );
    }
}
