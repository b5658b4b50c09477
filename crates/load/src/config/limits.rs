//! What keeps a run bounded: the checks on stages, the request mix and
//! the checks' captures, so that nothing a scenario says can make the
//! generator's memory grow without bound (docs/LOAD.md, "Memory").

use crate::{
    checks::{Rule, MAX_BODY_LIMIT, MAX_CHECKS},
    LoadConfig,
};

use super::ConfigError;

/// Most load threads of one run.
pub const MAX_THREADS: usize = 1_024;
/// Most requests in a scenario's mix.
pub const MAX_REQUESTS: usize = 10_000;
/// Longest rotation the weights make (weights over their greatest common
/// divisor, added up): 4 bytes an entry.
pub const MAX_ROTATION: u64 = 100_000;
/// Most bytes of request bodies one scenario holds (each is held once).
pub const MAX_BODIES: usize = 256 << 20;
/// Most bytes the checks may keep at once, at worst: every request in
/// flight with a body as long as `check_body_limit`.
pub const MAX_CAPTURE: u64 = 1 << 30;

impl LoadConfig {
    pub(super) fn check_stages(&self) -> Result<(), ConfigError> {
        let fail = |message: String| Err(ConfigError(message));
        let Some(stages) = &self.stages else {
            return Ok(());
        };
        let open = self.rate.is_some();
        stages
            .check(if open { "rate" } else { "number of users" })
            .map_err(ConfigError)?;
        if self.total_requests.is_some() {
            return fail("stages set the run's length: not with --requests (-n)".into());
        }
        if !self.warmup.is_zero() {
            return fail("stages go without --warmup: make the first stage the warm-up".into());
        }
        if !self.ramp.is_zero() {
            return fail("stages go without --ramp: a ramp is a stage from 0 users".into());
        }
        if self.duration != stages.duration() {
            return fail(format!(
                "the stages last {:?}: that is the run's duration, not {:?}",
                stages.duration(),
                self.duration
            ));
        }
        let peak = stages.peak();
        match self.rate {
            Some(rate) if rate != peak => fail(format!(
                "with stages the rate is their peak ({peak}), not {rate}"
            )),
            Some(_) => Ok(()),
            None if (self.connections as f64) < peak.ceil() => fail(format!(
                "the stages ramp to {peak} users: connections must be at least {}, got {}",
                peak.ceil(),
                self.connections
            )),
            None => Ok(()),
        }
    }

    pub(super) fn check_limits(&self) -> Result<(), ConfigError> {
        let fail = |message: String| Err(ConfigError(message));
        if self.requests.len() > MAX_REQUESTS {
            return fail(format!(
                "at most {MAX_REQUESTS} requests in a mix, got {}",
                self.requests.len()
            ));
        }
        if let Some(spec) = self.requests.iter().find(|spec| spec.weight == 0) {
            return fail(format!(
                "the weight of `{} {}` must be at least 1",
                spec.method, spec.url
            ));
        }
        let rotation = self.rotation_len();
        if rotation > MAX_ROTATION {
            return fail(format!(
                "the weights make a rotation of {rotation} requests: at most {MAX_ROTATION} \
                 (smaller weights, or weights with a common divisor)"
            ));
        }
        let bodies = self.requests.iter().filter_map(|spec| spec.body.as_ref());
        let bytes: usize = self.body.len() + bodies.map(|body| body.len()).sum::<usize>();
        if bytes > MAX_BODIES {
            return fail(format!(
                "the request bodies hold {bytes} bytes: at most {MAX_BODIES}"
            ));
        }
        if self.checks.len() > MAX_CHECKS {
            return fail(format!(
                "at most {MAX_CHECKS} checks, got {}",
                self.checks.len()
            ));
        }
        if self.check_body_limit > MAX_BODY_LIMIT {
            return fail(format!(
                "check_body_limit must be at most {MAX_BODY_LIMIT} bytes, got {}",
                self.check_body_limit
            ));
        }
        let reads_body = self
            .checks
            .iter()
            .any(|c| matches!(c.rule, Rule::BodyContains(_) | Rule::JsonPointer { .. }));
        let in_flight = self.connections as u64 * self.pipeline.max(self.streams) as u64;
        let worst = in_flight.saturating_mul(self.check_body_limit as u64);
        if reads_body && worst > MAX_CAPTURE {
            return fail(format!(
                "checks reading bodies could keep {worst} bytes ({in_flight} requests in flight \
                 × check_body_limit {}): at most {MAX_CAPTURE}; lower check_body_limit",
                self.check_body_limit
            ));
        }
        Ok(())
    }

    /// The weights over their greatest common divisor.
    fn reduced_weights(&self) -> Vec<u64> {
        let weights = self.requests.iter().map(|spec| u64::from(spec.weight));
        let divisor = weights.clone().fold(0, gcd).max(1);
        weights.map(|weight| weight / divisor).collect()
    }

    /// The rotation's length: the weights over their greatest common divisor.
    pub fn rotation_len(&self) -> u64 {
        self.reduced_weights().iter().sum()
    }

    /// The order requests go in: each index as often as its weight (over
    /// the weights' divisor), spread out (nginx's smooth weighted
    /// round-robin), so that a 3:1 mix sends `0 0 1 0`, not `0 0 0 1`.
    pub(crate) fn rotation(&self) -> Vec<u32> {
        let weights: Vec<i64> = self
            .reduced_weights()
            .into_iter()
            .map(|w| w as i64)
            .collect();
        let total: i64 = weights.iter().sum();
        let mut current = vec![0i64; weights.len()];
        (0..total)
            .map(|_| {
                for (c, w) in current.iter_mut().zip(&weights) {
                    *c += w;
                }
                let (best, _) = current
                    .iter()
                    .enumerate()
                    .max_by_key(|&(i, c)| (*c, std::cmp::Reverse(i)))
                    .unwrap_or((0, &0));
                current[best] -= total;
                best as u32
            })
            .collect()
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
