//! One load spread over many processes: shard `i` of `N` takes its share of
//! the connections (users), of `-n` and of the rate, and the shards start
//! together at a wall-clock time (`--start-at`).

use std::{
    fmt,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

/// The environment variable a Kubernetes Indexed Job sets to each pod's index.
pub const JOB_COMPLETION_INDEX: &str = "JOB_COMPLETION_INDEX";

/// Shard `index` of `count` (`0 <= index < count`). Connection (user) `g`
/// of the whole test belongs to shard `g % count`, so the shards together
/// open exactly the connections one process would, with the same global
/// indices: the same round-robin position, the same timetable slot in the
/// open model, the same ramp offset and think-time seed in the users model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Self::WHOLE
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// The whole test in one process.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    pub fn new(index: u32, count: u32) -> Result<Self, String> {
        if count == 0 {
            return Err("the shard count must be at least 1".into());
        }
        if index >= count {
            return Err(format!(
                "shard index {index} is out of range: shards of {count} are numbered 0 to {}",
                count - 1
            ));
        }
        Ok(Self { index, count })
    }

    /// `i/N`, `i` counted from 0 as a Kubernetes Indexed Job counts its pods.
    pub fn parse(text: &str) -> Result<Self, String> {
        let invalid = || format!("invalid shard `{text}`: expected i/N with 0 <= i < N, like 0/4");
        let (index, count) = text.split_once('/').ok_or_else(invalid)?;
        let index = index.trim().parse().map_err(|_| invalid())?;
        let count = count.trim().parse().map_err(|_| invalid())?;
        Self::new(index, count).map_err(|why| format!("invalid shard `{text}`: {why}"))
    }

    /// Shard `$JOB_COMPLETION_INDEX` of `count`, as each pod of a
    /// Kubernetes Indexed Job finds it; `index` is that variable's value.
    pub fn from_job_index(index: Option<&str>, count: u32) -> Result<Self, String> {
        let index = index.ok_or_else(|| {
            format!(
                "--shards {count} needs {JOB_COMPLETION_INDEX} (set in each pod of a \
                 Kubernetes Indexed Job); elsewhere give --shard i/{count}"
            )
        })?;
        let parsed = index.trim().parse().map_err(|_| {
            format!("{JOB_COMPLETION_INDEX}={index:?} is not a shard index (a number from 0)")
        })?;
        Self::new(parsed, count).map_err(|why| format!("{JOB_COMPLETION_INDEX}={index}: {why}"))
    }

    /// This shard's part of `total`: the parts differ by at most one and
    /// add up to `total` exactly.
    pub fn share(&self, total: u64) -> u64 {
        let count = u64::from(self.count);
        total / count + u64::from(u64::from(self.index) < total % count)
    }

    /// The whole test's index of this shard's connection `local`.
    pub fn global(&self, local: usize) -> usize {
        local * self.count as usize + self.index as usize
    }
}

/// `--start-at`: RFC 3339 (`2025-06-01T12:00:00Z`, fractions allowed) or
/// seconds since the Unix epoch (`1748779200`, `1748779200.5`).
pub fn parse_start_at(text: &str) -> Result<SystemTime, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        if !(0.0..1e11).contains(&seconds) {
            return Err(format!(
                "invalid start time `{text}`: unix seconds out of range"
            ));
        }
        return Ok(UNIX_EPOCH + Duration::from_secs_f64(seconds));
    }
    humantime::parse_rfc3339_weak(text).map_err(|err| {
        format!(
            "invalid start time `{text}`: {err} (expected RFC 3339 like \
             2025-06-01T12:00:00Z, or unix seconds)"
        )
    })
}

/// Seconds since the Unix epoch, as interval logs write times.
pub(crate) fn unix_seconds(time: SystemTime) -> f64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(since) => since.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_differ_by_at_most_one() {
        for count in 1..=7u32 {
            for total in [0u64, 1, 6, 7, 10, 1001] {
                let shares: Vec<u64> = (0..count)
                    .map(|index| Shard::new(index, count).unwrap().share(total))
                    .collect();
                assert_eq!(shares.iter().sum::<u64>(), total, "{total} over {count}");
                let (min, max) = (shares.iter().min(), shares.iter().max());
                assert!(max.unwrap() - min.unwrap() <= 1, "{shares:?}");
            }
        }
    }

    #[test]
    fn global_indices_cover_the_whole_test_once() {
        let connections = 10;
        let mut seen: Vec<usize> = (0..3u32)
            .flat_map(|index| {
                let shard = Shard::new(index, 3).unwrap();
                (0..shard.share(connections) as usize).map(move |local| shard.global(local))
            })
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn shards_parse_and_bad_ones_say_why() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(Shard::parse("0/1"), Ok(Shard::WHOLE));
        for bad in ["4/4", "1/0", "x/2", "3", "-1/2", ""] {
            let err = Shard::parse(bad).expect_err(bad);
            assert!(err.starts_with("invalid shard"), "{bad}: {err}");
        }
        assert_eq!(
            Shard::from_job_index(Some("3"), 8),
            Ok(Shard { index: 3, count: 8 })
        );
        let err = Shard::from_job_index(None, 8).unwrap_err();
        assert!(err.contains("JOB_COMPLETION_INDEX"), "{err}");
        let err = Shard::from_job_index(Some("8"), 8).unwrap_err();
        assert!(err.contains("out of range"), "{err}");
    }

    #[test]
    fn start_times_parse_as_rfc3339_or_unix_seconds() {
        let at = UNIX_EPOCH + Duration::from_secs(1_748_779_200);
        assert_eq!(parse_start_at("1748779200"), Ok(at));
        assert_eq!(parse_start_at("2025-06-01T12:00:00Z"), Ok(at));
        assert_eq!(
            parse_start_at("2025-06-01T12:00:00.5Z"),
            Ok(at + Duration::from_millis(500))
        );
        assert_eq!(
            parse_start_at("1748779200.25"),
            Ok(at + Duration::from_millis(250))
        );
        for bad in ["tomorrow", "2025-13-01T00:00:00Z", "-5", ""] {
            let err = parse_start_at(bad).expect_err(bad);
            assert!(err.starts_with("invalid start time"), "{bad}: {err}");
        }
        assert_eq!(unix_seconds(at), 1_748_779_200.0);
    }
}
