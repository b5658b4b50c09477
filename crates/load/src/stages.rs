//! Ramping stages (k6's `ramping-arrival-rate` and `ramping-vus`): a
//! target that moves linearly from one value to the next over each
//! stage's duration. In the open model the target is the request rate,
//! and request `n` of the whole test is due when the rate's integral
//! reaches `n`; in the closed and users models it is the number of
//! connections (users), and user `i` sends while the target is above `i`.
//!
//! The curve is computed once before the run; a connection asks it for a
//! time only when its next request falls due (open model) or when its
//! user starts or stops (closed model), never in between.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Most stages a scenario may have: each is 48 bytes of the curve.
pub const MAX_STAGES: usize = 1_000;

/// One stage: the target moves linearly to `target` over `duration`
/// (zero: it jumps there).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    #[serde(with = "humantime_serde_secs")]
    pub duration: Duration,
    pub target: f64,
}

/// The stages of a run and the target they start from (k6's `startRate`,
/// `startVUs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stages {
    pub from: f64,
    pub steps: Vec<Stage>,
}

impl Stages {
    /// Stages from `from` through each `(duration, target)`.
    pub fn new(from: f64, steps: impl IntoIterator<Item = (Duration, f64)>) -> Self {
        Self {
            from,
            steps: steps
                .into_iter()
                .map(|(duration, target)| Stage { duration, target })
                .collect(),
        }
    }

    /// The time the stages take together: the run's duration.
    pub fn duration(&self) -> Duration {
        self.steps.iter().map(|s| s.duration).sum()
    }

    /// The target `at` seconds after the start (0 after the last stage).
    pub fn value_at(&self, at: f64) -> f64 {
        Curve::new(self).value(at)
    }

    /// The highest target of the run.
    pub fn peak(&self) -> f64 {
        self.steps
            .iter()
            .map(|s| s.target)
            .fold(self.from, f64::max)
    }

    /// A mistake in the stages, if any: `what` names the target (`rate`, `users`).
    pub fn check(&self, what: &str) -> Result<(), String> {
        if self.steps.is_empty() {
            return Err("stages: give at least one stage".into());
        }
        if self.steps.len() > MAX_STAGES {
            return Err(format!(
                "stages: at most {MAX_STAGES} stages, got {}",
                self.steps.len()
            ));
        }
        let targets = std::iter::once(self.from).chain(self.steps.iter().map(|s| s.target));
        for (index, target) in targets.enumerate() {
            if !target.is_finite() || target < 0.0 {
                let at = match index {
                    0 => "the starting target".to_string(),
                    n => format!("stage {n}'s target"),
                };
                return Err(format!(
                    "stages: {at} must be a {what} of 0 or more, got {target}"
                ));
            }
        }
        if self.peak() <= 0.0 {
            return Err(format!("stages: every target is 0: no {what} at all"));
        }
        if self.duration().is_zero() {
            return Err("stages: the stages last no time at all".into());
        }
        Ok(())
    }
}

/// `Duration` as seconds in the JSON report and logs.
mod humantime_serde_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(value.as_secs_f64())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let seconds = f64::deserialize(d)?;
        Duration::try_from_secs_f64(seconds).map_err(serde::de::Error::custom)
    }
}

/// The stages as a piecewise-linear function of the time since the start.
#[derive(Debug, Clone)]
pub(crate) struct Curve {
    /// `(time in s, value, integral up to that time)` at each stage's
    /// start and at the end.
    points: Vec<(f64, f64, f64)>,
}

impl Curve {
    pub(crate) fn new(stages: &Stages) -> Self {
        let mut points = Vec::with_capacity(stages.steps.len() + 1);
        let (mut time, mut value, mut integral) = (0.0, stages.from, 0.0);
        points.push((time, value, integral));
        for stage in &stages.steps {
            let length = stage.duration.as_secs_f64();
            integral += (value + stage.target) / 2.0 * length;
            time += length;
            value = stage.target;
            points.push((time, value, integral));
        }
        Self { points }
    }

    /// The target `at` seconds after the start (0 after the last stage).
    pub(crate) fn value(&self, at: f64) -> f64 {
        let Some(k) = self.segment(at) else {
            return 0.0;
        };
        let ((t0, v0, _), (t1, v1, _)) = (self.points[k], self.points[k + 1]);
        if t1 <= t0 {
            return v1;
        }
        v0 + (v1 - v0) * (at - t0) / (t1 - t0)
    }

    /// The integral of the target from the start to `at` seconds: the
    /// requests due by then in the open model.
    pub(crate) fn integral(&self, at: f64) -> f64 {
        let last = self.points[self.points.len() - 1];
        if at >= last.0 {
            return last.2;
        }
        let Some(k) = self.segment(at) else {
            return 0.0;
        };
        let (t0, v0, c0) = self.points[k];
        let tau = at - t0;
        c0 + v0 * tau + (self.value(at) - v0) / 2.0 * tau
    }

    /// When the integral reaches `n` (request `n` of the test is due),
    /// in seconds from the start; `None` if it never does.
    pub(crate) fn time_of(&self, n: f64) -> Option<f64> {
        // The first point whose integral reaches n.
        let k = self.points.partition_point(|p| p.2 < n);
        if k == 0 {
            return Some(0.0);
        }
        let (t0, v0, c0) = *self.points.get(k - 1)?;
        let (t1, v1, _) = *self.points.get(k)?;
        let length = t1 - t0;
        let x = n - c0;
        // v0·τ + (v1 − v0)/(2·length)·τ² = x, in the form that stays
        // exact when the rate is constant and when it starts at 0.
        let a = (v1 - v0) / (2.0 * length);
        let denominator = v0 + (v0 * v0 + 4.0 * a * x).max(0.0).sqrt();
        let tau = if denominator > 0.0 {
            2.0 * x / denominator
        } else {
            length
        };
        Some(t0 + tau.clamp(0.0, length))
    }

    /// User `index` sends while the target is above its index: the first
    /// stretch `[from, until)` at or after `at` (seconds) when it is;
    /// `None` if it never is again.
    pub(crate) fn active_window(&self, index: f64, at: f64) -> Option<(f64, f64)> {
        let mut start: Option<f64> = None;
        for pair in self.points.windows(2) {
            let ((t0, v0, _), (t1, v1, _)) = (pair[0], pair[1]);
            // Past, or a jump (a stage of no time: the next starts at v1).
            if t1 <= at || t1 <= t0 {
                continue;
            }
            // Within [t0, t1) the target is above `index` on [above, below).
            let cross = || t0 + (index - v0) / (v1 - v0) * (t1 - t0);
            let (above, below) = match (v0 > index, v1 > index) {
                (true, true) => (t0, t1),
                (true, false) => (t0, cross()),
                (false, true) => (cross(), t1),
                (false, false) => (t1, t1),
            };
            let above = above.max(at);
            match start {
                None if above < below => {
                    if below < t1 {
                        return Some((above, below));
                    }
                    start = Some(above);
                }
                None => {}
                // The stretch went on to this stage's start: does it go on?
                Some(from) if above > t0 || above >= below => return Some((from, t0)),
                Some(from) if below < t1 => return Some((from, below)),
                Some(_) => {}
            }
        }
        start.map(|from| (from, self.end()))
    }

    /// The segment `[k, k + 1]` that holds `at`, if within the stages.
    fn segment(&self, at: f64) -> Option<usize> {
        if at < 0.0 || at >= self.points[self.points.len() - 1].0 {
            return None;
        }
        // The last point at or before `at`, then past stages of no time.
        let k = self.points.partition_point(|p| p.0 <= at).saturating_sub(1);
        Some(k.min(self.points.len() - 2))
    }

    /// The stages' total length in seconds.
    pub(crate) fn end(&self) -> f64 {
        self.points[self.points.len() - 1].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stages(from: f64, steps: &[(u64, f64)]) -> Curve {
        let steps = steps.iter().map(|&(ms, t)| (Duration::from_millis(ms), t));
        Curve::new(&Stages::new(from, steps))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_constant_rate_is_due_every_one_over_the_rate() {
        let curve = stages(100.0, &[(10_000, 100.0)]);
        for n in [0.0, 1.0, 2.0, 999.0, 1000.0] {
            let at = curve.time_of(n).unwrap();
            assert!(close(at, n / 100.0), "{n}: {at}");
        }
        assert_eq!(curve.time_of(1000.5), None);
        assert!(close(curve.integral(2.5), 250.0));
    }

    #[test]
    fn a_ramp_from_zero_is_due_on_the_square_root() {
        // 0 → 100/s over 10 s: the integral is 5 t², 500 at the end.
        let curve = stages(0.0, &[(10_000, 100.0), (5_000, 100.0)]);
        assert!(close(curve.integral(10.0), 500.0));
        assert!(close(curve.time_of(500.0).unwrap(), 10.0));
        assert!(close(curve.time_of(20.0).unwrap(), 2.0));
        assert!(close(curve.time_of(1000.0).unwrap(), 15.0));
        assert!(close(curve.value(5.0), 50.0));
        // Integral and time agree everywhere.
        for n in 1..1000 {
            let at = curve.time_of(f64::from(n)).unwrap();
            assert!((curve.integral(at) - f64::from(n)).abs() < 1e-6, "{n}");
        }
    }

    #[test]
    fn a_ramp_down_and_a_stage_at_zero_send_nothing_there() {
        let curve = stages(200.0, &[(1_000, 0.0), (1_000, 0.0), (1_000, 200.0)]);
        assert!(close(curve.integral(2.0), 100.0));
        // Request 100 is the last of the first second; 101 comes in the third.
        assert!(curve.time_of(100.0).unwrap() <= 1.0);
        let next = curve.time_of(101.0).unwrap();
        assert!(next > 2.0 && next < 3.0, "{next}");
        assert_eq!(curve.value(3.5), 0.0);
    }

    #[test]
    fn a_jump_takes_effect_at_once() {
        let curve = stages(0.0, &[(0, 50.0), (2_000, 50.0)]);
        assert!(close(curve.time_of(50.0).unwrap(), 1.0));
        assert!(close(curve.value(0.0), 50.0));
    }

    #[test]
    fn users_start_in_turn_and_stop_on_the_way_down() {
        // 0 → 10 users over 10 s, hold 10 s, back to 0 over 10 s.
        let curve = stages(0.0, &[(10_000, 10.0), (10_000, 10.0), (10_000, 0.0)]);
        // User i starts at i s (as --ramp 10s starts user i of 10).
        for i in 0..10 {
            let (from, until) = curve.active_window(f64::from(i), 0.0).unwrap();
            assert!(close(from, f64::from(i)), "user {i}: {from}");
            // ... and stops when the target falls to its index.
            assert!(close(until, 30.0 - f64::from(i)), "user {i}: {until}");
        }
        assert_eq!(curve.active_window(10.0, 0.0), None);
        // Asked later, the window starts then.
        assert_eq!(curve.active_window(2.0, 15.0), Some((15.0, 28.0)));
        assert_eq!(curve.active_window(2.0, 28.0), None);
    }

    #[test]
    fn a_user_comes_back_when_the_target_rises_again() {
        let curve = stages(4.0, &[(1_000, 4.0), (1_000, 0.0), (1_000, 4.0)]);
        let (from, until) = curve.active_window(2.0, 0.0).unwrap();
        assert!(close(from, 0.0) && close(until, 1.5), "{from} {until}");
        let (from, until) = curve.active_window(2.0, until).unwrap();
        assert!(close(from, 2.5) && close(until, 3.0), "{from} {until}");
    }

    #[test]
    fn bad_stages_say_why() {
        let bad = |from, steps: Vec<Stage>| Stages { from, steps }.check("rate").unwrap_err();
        assert!(bad(0.0, vec![]).contains("at least one stage"));
        let one = |target| Stage {
            duration: Duration::from_secs(1),
            target,
        };
        assert!(bad(0.0, vec![one(-1.0)]).contains("stage 1's target"));
        assert!(bad(f64::NAN, vec![one(1.0)]).contains("starting target"));
        assert!(bad(0.0, vec![one(0.0)]).contains("every target is 0"));
        let instant = Stage {
            duration: Duration::ZERO,
            target: 5.0,
        };
        assert!(bad(0.0, vec![instant]).contains("no time"));
    }
}
