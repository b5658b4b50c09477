//! Consistent hashing on a ring (ketama style): each host owns points on
//! a 64-bit circle in proportion to its weight, and a key goes to the
//! first point at or after its hash. Chosen over Maglev because health
//! needs no rebuild here: an ejected host's keys walk on to the next
//! point, so only that host's keys move (Maglev moves a few more and
//! needs its table rebuilt when a host leaves), and the walk is also how
//! bounded load (Mirrokni et al., "Consistent hashing with bounded
//! loads") sends a key past a host that is too busy. A lookup is a binary
//! search over `points` (~160 per host): a few dozen nanoseconds.

/// Points each unit of (gcd-reduced) weight owns.
const POINTS_PER_WEIGHT: u32 = 160;
/// The most points a ring holds, however many hosts and weights.
const MAX_POINTS: usize = 160 * 1024;

#[derive(Debug)]
pub(super) struct Ring {
    /// Sorted by hash: (hash, host).
    points: Vec<(u64, u32)>,
}

impl Ring {
    /// Points named after each host's URL, so that a host keeps its
    /// points when others are added, removed or reordered.
    pub(super) fn new(urls: &[&str], weights: &[u32]) -> Self {
        let divisor = weights.iter().copied().fold(0, super::choice::gcd).max(1);
        let total: u64 = weights.iter().map(|&w| u64::from(w / divisor)).sum();
        let budget = (MAX_POINTS as u64 / total.max(1)).clamp(1, u64::from(POINTS_PER_WEIGHT));
        let mut points = Vec::new();
        for (host, (url, weight)) in urls.iter().zip(weights).enumerate() {
            let count = u64::from(weight / divisor) * budget;
            for i in 0..count {
                let hash = hash_bytes(format!("{url}#{i}").as_bytes());
                points.push((hash, u32::try_from(host).unwrap_or(u32::MAX)));
            }
        }
        points.sort_unstable();
        Self { points }
    }

    /// Hosts in ring order from `key`'s point, each once, to the first
    /// that `accept` takes.
    pub(super) fn find(&self, key: u64, mut accept: impl FnMut(usize) -> bool) -> Option<usize> {
        let start = self.points.partition_point(|&(hash, _)| hash < key);
        let len = self.points.len();
        let mut last = None;
        (0..len)
            .map(|offset| self.points[(start + offset) % len].1 as usize)
            .find(|&host| {
                // Consecutive points of one host are asked once.
                if last == Some(host) {
                    return false;
                }
                last = Some(host);
                accept(host)
            })
    }
}

/// FNV-1a with a splitmix64 finish: stable across runs and processes (so
/// proxies agree on a key's host), and well spread in every bit.
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("http://10.0.0.{i}:80")).collect()
    }

    fn owners(ring: &Ring, keys: u64, down: Option<usize>) -> Vec<usize> {
        (0..keys)
            .map(|k| {
                let key = hash_bytes(format!("user-{k}").as_bytes());
                ring.find(key, |h| Some(h) != down).unwrap()
            })
            .collect()
    }

    #[test]
    fn a_key_always_reaches_the_same_host() {
        let names = urls(5);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let a = Ring::new(&refs, &[1; 5]);
        let b = Ring::new(&refs, &[1; 5]);
        assert_eq!(owners(&a, 1000, None), owners(&b, 1000, None));
    }

    #[test]
    fn removing_a_host_moves_only_its_keys_about_one_nth() {
        for n in [3, 5, 10] {
            let names = urls(n);
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let ring = Ring::new(&refs, &vec![1; n]);
            let keys = 10_000;
            let before = owners(&ring, keys, None);
            // Removed from the configuration: a ring without it.
            let fewer = Ring::new(&refs[1..], &vec![1; n - 1]);
            let after: Vec<usize> = owners(&fewer, keys, None).iter().map(|h| h + 1).collect();
            let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
            let bound = 1.5 / n as f64;
            assert!(
                (moved as f64) / (keys as f64) <= bound,
                "{n} hosts: {moved} of {keys} moved"
            );
            assert!(
                before.iter().zip(&after).all(|(a, b)| a == b || *a == 0),
                "only the removed host's keys move"
            );
            // Ejected (not removed): the same keys move, to the next host.
            let ejected = owners(&ring, keys, Some(0));
            assert_eq!(ejected, after);
        }
    }

    #[test]
    fn weights_scale_the_share() {
        let names = urls(2);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let ring = Ring::new(&refs, &[1, 3]);
        let keys = 10_000;
        let second = owners(&ring, keys, None)
            .iter()
            .filter(|&&h| h == 1)
            .count();
        let share = second as f64 / keys as f64;
        assert!((0.68..0.82).contains(&share), "share {share}");
    }
}
