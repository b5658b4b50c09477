//! Rounds: every row of a block is measured once per round, the block's
//! rows in an order rotated by one each round (A B C, then B C A, then
//! C A B), so that no system always runs first on a cold cache or last
//! on a hot machine (two rows alternate: A B, B A). A row's figures are
//! the median of its rounds. A row on a JVM first runs whole rounds that
//! are discarded (its warm-up).
//!
//! A row of a saturating group waits first until its target has worked
//! off what earlier rows left it ([`crate::drain`]); a row of those groups
//! whose window turns out shorter than its latency is measured again
//! with a window long enough ([`crate::window`]), and the rest of its
//! block keeps that window.

use std::time::Duration;

use crate::{
    drain::DrainProbe,
    measure::{Measured, RowSpec},
    process::Component,
    results::{Drain, Figures, LoadShape, Row},
    stage::Bench,
    stage::Round,
    window,
};

/// One row to measure and the components on its stage, as indices into
/// the group's components: the first is the system under test, the rest
/// must stay alive while it is measured.
#[derive(Debug)]
pub(crate) struct Trial {
    pub(crate) spec: RowSpec,
    pub(crate) stage: Vec<usize>,
    /// Probe the target before each run until it has drained (the
    /// saturating groups).
    pub(crate) drain: Option<DrainProbe>,
    /// Its window may be lengthened to its latency (the saturating
    /// groups, unless `--duration` fixed the windows).
    pub(crate) adaptive: bool,
}

impl Trial {
    pub(crate) fn new(spec: RowSpec, stage: &[usize]) -> Self {
        Self {
            spec,
            stage: stage.to_vec(),
            drain: None,
            adaptive: false,
        }
    }

    /// Before each run, wait for the target to drain (its load must be
    /// plain HTTP/1.1, as the saturating groups' are).
    pub(crate) fn drained(mut self) -> Self {
        self.drain = DrainProbe::of(&self.spec.load);
        self
    }

    /// Lengthen its window to its latency when it is short.
    pub(crate) fn adaptive(mut self) -> Self {
        self.adaptive = true;
        self
    }
}

/// The order of `n` rows in round `round`: rotated left by `round`.
pub(crate) fn rotation(n: usize, round: usize) -> impl Iterator<Item = usize> {
    let start = if n == 0 { 0 } else { round % n };
    (start..n).chain(0..start)
}

/// A block's window once lengthened: (warm-up, measured time).
type Window = Option<(Duration, Duration)>;

impl Bench<'_> {
    /// Measures every block's rows for the run's rounds, a block at a
    /// time (its rounds back to back, so that the rows compared with each
    /// other ran close in time), calling `between` after each sample; the
    /// rows come back in the order given. The targets to drain are
    /// probed unloaded before anything runs.
    pub(crate) fn run_blocks(
        &mut self,
        group: &str,
        components: &mut [Component],
        blocks: Vec<Vec<Trial>>,
        between: &mut dyn FnMut(),
    ) -> anyhow::Result<Vec<Row>> {
        let rounds = self.options.rounds();
        // A group's components are its own: a port another group's
        // component had says nothing about this one's latency.
        self.unloaded = Default::default();
        self.previous = None;
        self.measure_unloaded(blocks.iter().flatten().filter_map(|t| t.drain.as_ref()));
        let mut rows = Vec::new();
        for block in blocks {
            let mut window: Window = None;
            let mut trials = Vec::with_capacity(block.len());
            let mut measured = Vec::with_capacity(block.len());
            for trial in block {
                let Trial {
                    spec,
                    stage,
                    drain,
                    adaptive,
                } = trial;
                measured.push(Measured::new(spec));
                trials.push((stage, drain, adaptive));
            }
            let warmups = measured
                .iter()
                .map(|m| m.spec().warmup_rounds)
                .max()
                .unwrap_or(0);
            for index in 0..warmups {
                let round = Round {
                    index,
                    of: warmups,
                    warmup: true,
                };
                for i in rotation(measured.len(), index) {
                    if measured[i].spec().warmup_rounds <= index {
                        continue;
                    }
                    let (stage, drain, _) = &trials[i];
                    // Discarded; and a cold JVM's latency says nothing of
                    // the window its warm rounds need.
                    self.run_trial(
                        group,
                        measured[i].spec(),
                        stage,
                        drain,
                        window,
                        round,
                        components,
                    )?;
                    between();
                }
            }
            for index in 0..rounds {
                let round = Round::measured(index, rounds);
                for i in rotation(measured.len(), index) {
                    let (stage, drain, adaptive) = &trials[i];
                    let spec = measured[i].spec().clone();
                    let mut sample =
                        self.run_trial(group, &spec, stage, drain, window, round, components)?;
                    if *adaptive {
                        if let Some(longer) = self.longer(&spec, &sample.1, window) {
                            window = Some(longer);
                            between();
                            sample = self
                                .run_trial(group, &spec, stage, drain, window, round, components)?;
                        }
                    }
                    measured[i].add(sample);
                    between();
                }
            }
            rows.extend(measured.into_iter().filter_map(Measured::finish));
        }
        Ok(rows)
    }

    /// One run of a row: the drain first when it has a probe (of the row
    /// run before it too, whose target may be another process still
    /// busy on the same CPUs), then the load with the block's window.
    #[allow(clippy::too_many_arguments)]
    fn run_trial(
        &mut self,
        group: &str,
        spec: &RowSpec,
        stage: &[usize],
        drain: &Option<DrainProbe>,
        window: Window,
        round: Round,
        components: &mut [Component],
    ) -> anyhow::Result<(LoadShape, Figures)> {
        let drained = drain.as_ref().map(|probe| {
            let before = self
                .previous
                .take()
                .filter(|previous| previous.addr() != probe.addr())
                .map(|previous| self.drain(&previous));
            let own = self.drain(probe);
            self.previous = Some(probe.clone());
            match before {
                Some(before) if !before.drained || before.waited_s > own.waited_s => Drain {
                    drained: before.drained && own.drained,
                    ..before
                },
                _ => own,
            }
        });
        let mut spec = spec.clone();
        if let Some((warmup, duration)) = window {
            spec.load.warmup = warmup;
            spec.load.duration = duration;
            if !spec.load.ramp.is_zero() {
                spec.load.ramp = warmup;
            }
        }
        let mut stage = pick(components, stage);
        let (load, mut figures) = self.sample(group, &spec, round, &mut stage)?;
        figures.drain = drained;
        Ok((load, figures))
    }

    /// The window to measure `spec`'s block with from now on, when the
    /// run's `figures` show its window was too short, the run did not fix
    /// the windows (`--duration`) and a longer one is allowed.
    fn longer(&mut self, spec: &RowSpec, figures: &Figures, window: Window) -> Window {
        if self.options.duration.is_some() {
            return None;
        }
        let now = window.unwrap_or((spec.load.warmup, spec.load.duration));
        let think = spec.load.think.map_or(Duration::ZERO, |t| t.max);
        let longer = window::longer(figures, think, now)?;
        self.observer.note(&format!(
            "{}: window shorter than its latency; measuring it again, and the rest of its block, \
             with {:.0}s after a {:.0}s warm-up",
            spec.label,
            longer.1.as_secs_f64(),
            longer.0.as_secs_f64()
        ));
        Some(longer)
    }
}

/// The components at `indices`, in that order.
fn pick<'c>(components: &'c mut [Component], indices: &[usize]) -> Vec<&'c mut Component> {
    let mut picked: Vec<(usize, &mut Component)> = components
        .iter_mut()
        .enumerate()
        .filter_map(|(i, c)| indices.iter().position(|&j| j == i).map(|at| (at, c)))
        .collect();
    picked.sort_by_key(|(at, _)| *at);
    picked.into_iter().map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_round_starts_one_further() {
        let order = |round| rotation(3, round).collect::<Vec<_>>();
        assert_eq!(order(0), [0, 1, 2]);
        assert_eq!(order(1), [1, 2, 0]);
        assert_eq!(order(2), [2, 0, 1]);
        assert_eq!(order(3), [0, 1, 2]);
        assert_eq!(rotation(0, 5).count(), 0);
        assert_eq!(rotation(1, 5).collect::<Vec<_>>(), [0]);
    }
}
