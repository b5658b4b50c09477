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
//! with a window long enough ([`crate::window`]). Rows compared with each
//! other share one window: every row of a block, in every round (and in
//! the lb group every row of the group); when it grows, all of them are
//! measured again from the first round ([`in_one_window`]).

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

/// A window: (warm-up, measured time).
pub(crate) type Window = (Duration, Duration);

/// One run the rounds ask for: the row (its block, its index there), the
/// round, and the window it is measured with (`None`: the row's own).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    pub(crate) block: usize,
    pub(crate) row: usize,
    pub(crate) round: Round,
    pub(crate) window: Option<Window>,
}

/// What a run came back with.
#[derive(Debug)]
pub(crate) enum Ran<S> {
    /// Its sample (a warm-up round's is discarded).
    Sample(S),
    /// Its window was shorter than its latency: this longer one replaces
    /// the window of every row that shares it.
    Longer(Window),
}

/// Per block, per row, its samples.
pub(crate) type Samples<S> = Vec<Vec<Vec<S>>>;

/// The rounds of `blocks` (per block, per row, its warm-up rounds), every
/// row of every block sharing one window: per block its warm-up rounds,
/// then `rounds` measured ones, its rows in rotated order; the blocks from
/// the last to the first (a sweep's last point is its heaviest, whose
/// latency sets the window). When a run asks for a longer window,
/// everything measured so far is dropped and every block measured again
/// from its first round with it, so that no two samples ever come from
/// different windows (a row measured before the window grew would
/// otherwise be compared with one measured after). Returns per block,
/// per row, its samples (one per measured round) and the window they
/// share (`None`: each row's own, never lengthened).
pub(crate) fn in_one_window<S>(
    blocks: &[Vec<usize>],
    rounds: usize,
    mut window: Option<Window>,
    mut run: impl FnMut(Run) -> anyhow::Result<Ran<S>>,
) -> anyhow::Result<(Samples<S>, Option<Window>)> {
    'scope: loop {
        let mut samples: Samples<S> = blocks
            .iter()
            .map(|rows| rows.iter().map(|_| Vec::new()).collect())
            .collect();
        for (block, warmup_rounds) in blocks.iter().enumerate().rev() {
            let warmups = warmup_rounds.iter().copied().max().unwrap_or(0);
            let warm = (0..warmups).map(|index| Round {
                index,
                of: warmups,
                warmup: true,
            });
            for round in warm.chain((0..rounds).map(|index| Round::measured(index, rounds))) {
                for row in rotation(warmup_rounds.len(), round.index) {
                    if round.warmup && warmup_rounds[row] <= round.index {
                        continue;
                    }
                    let asked = Run {
                        block,
                        row,
                        round,
                        window,
                    };
                    match run(asked)? {
                        Ran::Sample(sample) if !round.warmup => samples[block][row].push(sample),
                        Ran::Sample(_) => {}
                        Ran::Longer(longer) => {
                            if window.is_some_and(|now| longer.1 <= now.1) {
                                anyhow::bail!(
                                    "a lengthened window must be longer than {:?}",
                                    window
                                );
                            }
                            window = Some(longer);
                            continue 'scope;
                        }
                    }
                }
            }
        }
        return Ok((samples, window));
    }
}

impl Bench<'_> {
    /// Measures every block's rows for the run's rounds, a block at a
    /// time (its rounds back to back, so that the rows compared with each
    /// other ran close in time), calling `between` after each sample; the
    /// rows come back in the order given. Each block has its own window
    /// ([`in_one_window`]): a lengthened one measures the whole block
    /// again.
    pub(crate) fn run_blocks(
        &mut self,
        group: &str,
        components: &mut [Component],
        blocks: Vec<Vec<Trial>>,
        between: &mut dyn FnMut(),
    ) -> anyhow::Result<Vec<Row>> {
        self.begin_blocks(&blocks);
        let mut rows = Vec::new();
        for block in blocks {
            let (block_rows, _) = self.run_scope(group, components, vec![block], None, between)?;
            rows.extend(block_rows);
        }
        Ok(rows)
    }

    /// Measures every block's rows like [`Bench::run_blocks`], but every
    /// row of every block over one window, `window` at first (lengthened
    /// for all of them when one row's latency asks for it, unless
    /// `--duration` fixed it): the rows, in the order given, and the
    /// window they were measured with.
    pub(crate) fn run_blocks_in_one_window(
        &mut self,
        group: &str,
        components: &mut [Component],
        blocks: Vec<Vec<Trial>>,
        window: Window,
        between: &mut dyn FnMut(),
    ) -> anyhow::Result<(Vec<Row>, Window)> {
        self.begin_blocks(&blocks);
        let (rows, used) = self.run_scope(group, components, blocks, Some(window), between)?;
        Ok((rows, used.unwrap_or(window)))
    }

    /// A group's components are its own: a port another group's
    /// component had says nothing about this one's latency. The targets
    /// to drain are probed unloaded before anything runs.
    fn begin_blocks(&mut self, blocks: &[Vec<Trial>]) {
        self.unloaded = Default::default();
        self.previous = None;
        self.unloaded
            .measure(blocks.iter().flatten().filter_map(|t| t.drain.as_ref()));
    }

    /// `blocks` measured in rounds over one window ([`in_one_window`]),
    /// `window` at first (`None`: each row's own).
    fn run_scope(
        &mut self,
        group: &str,
        components: &mut [Component],
        blocks: Vec<Vec<Trial>>,
        window: Option<Window>,
        between: &mut dyn FnMut(),
    ) -> anyhow::Result<(Vec<Row>, Option<Window>)> {
        let shape: Vec<Vec<usize>> = blocks
            .iter()
            .map(|block| block.iter().map(|t| t.spec.warmup_rounds).collect())
            .collect();
        let rounds = self.options.rounds();
        let (samples, window) = in_one_window(&shape, rounds, window, |run| {
            let trial = &blocks[run.block][run.row];
            let sample = self.run_trial(
                group,
                &trial.spec,
                &trial.stage,
                &trial.drain,
                run.window,
                run.round,
                components,
            )?;
            between();
            // A discarded warm-up round teaches nothing: a cold JVM's
            // latency says nothing of the window its warm rounds need.
            if trial.adaptive && !run.round.warmup {
                if let Some(longer) = self.longer(&trial.spec, &sample.1, run.window) {
                    return Ok(Ran::Longer(longer));
                }
            }
            Ok(Ran::Sample(sample))
        })?;
        let rows = blocks
            .into_iter()
            .flatten()
            .zip(samples.into_iter().flatten())
            .filter_map(|(trial, samples)| {
                let mut measured = Measured::new(trial.spec);
                for sample in samples {
                    measured.add(sample);
                }
                measured.finish()
            })
            .collect();
        Ok((rows, window))
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
        window: Option<Window>,
        round: Round,
        components: &mut [Component],
    ) -> anyhow::Result<(LoadShape, Figures)> {
        let drained = drain.as_ref().map(|probe| {
            let before = self
                .previous
                .take()
                .filter(|previous| previous.addr() != probe.addr())
                .map(|previous| self.unloaded.drain(&previous));
            let own = self.unloaded.drain(probe);
            self.previous = Some(probe.clone());
            match before {
                Some(before) if !before.drained || before.waited_s > own.waited_s => Drain {
                    drained: before.drained && own.drained,
                    ..before
                },
                _ => own,
            }
        });
        let spec = windowed(spec, window);
        let mut stage = pick(components, stage);
        let (load, mut figures) = self.sample(group, &spec, round, &mut stage)?;
        figures.drain = drained;
        Ok((load, figures))
    }

    /// The window to measure `spec` and every row sharing its window
    /// with, when the run's `figures` show its window was too short, the
    /// run did not fix the windows (`--duration`) and a longer one is
    /// allowed.
    fn longer(
        &mut self,
        spec: &RowSpec,
        figures: &Figures,
        window: Option<Window>,
    ) -> Option<Window> {
        if self.options.duration.is_some() {
            return None;
        }
        let now = window.unwrap_or((spec.load.warmup, spec.load.duration));
        let think = spec.load.think.map_or(Duration::ZERO, |t| t.max);
        let longer = window::longer(figures, think, now)?;
        self.observer.note(&format!(
            "{}: window shorter than its latency; measuring it again, and every row that shares \
             its window, from the first round with {:.0}s after a {:.0}s warm-up",
            spec.label,
            longer.1.as_secs_f64(),
            longer.0.as_secs_f64()
        ));
        Some(longer)
    }
}

/// `spec` as measured with `window` (`None`: its own): its warm-up and
/// measured time, and its ramp (when it has one) over the warm-up.
pub(crate) fn windowed(spec: &RowSpec, window: Option<Window>) -> RowSpec {
    let mut spec = spec.clone();
    if let Some((warmup, duration)) = window {
        spec.load.warmup = warmup;
        spec.load.duration = duration;
        if !spec.load.ramp.is_zero() {
            spec.load.ramp = warmup;
        }
    }
    spec
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

    const SECOND: Duration = Duration::from_secs(1);

    /// A sample kept: its block, row, round and window.
    type Kept = (usize, usize, usize, Window);

    /// Every sample [`in_one_window`] keeps, as (block, row, round,
    /// window), when `short` says which runs find their window too
    /// short; and how many runs it made.
    fn kept(
        blocks: &[Vec<usize>],
        rounds: usize,
        short: impl Fn(&Run) -> bool,
    ) -> (Vec<Kept>, Option<Window>, usize) {
        let start = (SECOND / 2, 2 * SECOND);
        let mut runs = 0;
        let (samples, window) = in_one_window(blocks, rounds, Some(start), |run| {
            runs += 1;
            let window = run.window.expect("a window");
            if short(&run) {
                return Ok(Ran::Longer((2 * SECOND, window.1 + 2 * SECOND)));
            }
            Ok(Ran::Sample((run.block, run.row, run.round.index, window)))
        })
        .expect("the rounds");
        for (b, rows) in samples.iter().enumerate() {
            for (r, samples) in rows.iter().enumerate() {
                assert_eq!(samples.len(), rounds, "block {b} row {r}: {samples:?}");
            }
        }
        (
            samples.into_iter().flatten().flatten().collect(),
            window,
            runs,
        )
    }

    /// The lb group at 9,936 connections: round robin measured first in
    /// round 0 with 2 s after 0.5 s, then HAProxy's window found too
    /// short. Before, HAProxy and every row after it kept 4 s after 2 s
    /// while round robin's first round stayed 2 s: a verdict across
    /// windows. Now every row of every block, in every round, has the
    /// window the last lengthening chose.
    #[test]
    fn a_longer_window_measures_every_row_sharing_it_again() {
        // 500 connections: three proxies and four policies; 2,000 and
        // 9,936: the three proxies. No warm-up rounds.
        let blocks = [vec![0; 7], vec![0; 3], vec![0; 3]];
        for (rounds, block, row) in [(1, 2, 1), (2, 2, 1), (3, 2, 0), (2, 0, 5), (3, 1, 2)] {
            let (samples, window, _) = kept(&blocks, rounds, |run| {
                run.block == block && run.row == row && run.window.expect("a window").1 < 4 * SECOND
            });
            let window = window.expect("a window");
            assert_eq!(window, (2 * SECOND, 4 * SECOND));
            assert_eq!(samples.len(), 13 * rounds);
            for (b, r, round, used) in samples {
                assert_eq!(used, window, "block {b}, row {r}, round {round}");
            }
        }
        // Two lengthenings, the second in a block already measured.
        let (samples, window, _) = kept(&blocks, 2, |run| {
            let now = run.window.expect("a window").1;
            (run.block == 2 && now < 4 * SECOND)
                || (run.block == 0 && run.row == 3 && now < 6 * SECOND)
        });
        assert_eq!(window, Some((2 * SECOND, 6 * SECOND)));
        assert!(
            samples.iter().all(|s| s.3 == (2 * SECOND, 6 * SECOND)),
            "{samples:?}"
        );
        // Never too short: each row once per round, the window as given.
        let (samples, window, runs) = kept(&blocks, 3, |_| false);
        assert_eq!((runs, window), (39, Some((SECOND / 2, 2 * SECOND))));
        assert_eq!(samples.len(), 39);
    }

    /// The heaviest block (a sweep's last point) is measured first, so
    /// that its lengthening costs no run of the lighter ones; a row's
    /// discarded warm-up rounds run before its block's measured ones and
    /// are not kept.
    #[test]
    fn the_last_block_goes_first_and_warm_up_rounds_are_discarded() {
        let mut order = Vec::new();
        let (samples, _) = in_one_window(&[vec![0, 1], vec![0]], 2, None, |run| {
            order.push((run.block, run.row, run.round.warmup));
            Ok(Ran::Sample(run.round.index))
        })
        .expect("the rounds");
        assert_eq!(
            order,
            [
                (1, 0, false),
                (1, 0, false),
                (0, 1, true),
                (0, 0, false),
                (0, 1, false),
                (0, 1, false),
                (0, 0, false),
            ]
        );
        assert_eq!(samples, [vec![vec![0, 1], vec![0, 1]], vec![vec![0, 1]]]);
    }
}
