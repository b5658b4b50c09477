//! Rounds: every row of a block is measured once per round, the block's
//! rows in an order rotated by one each round (A B C, then B C A, then
//! C A B), so that no system always runs first on a cold cache or last
//! on a hot machine. A row's figures are the median of its rounds. A row
//! on a JVM first runs whole rounds that are discarded (its warm-up).

use crate::{
    measure::{Measured, RowSpec},
    process::Component,
    results::Row,
    stage::Bench,
    stage::Round,
};

/// One row to measure and the components on its stage, as indices into
/// the group's components: the first is the system under test, the rest
/// must stay alive while it is measured.
#[derive(Debug)]
pub(crate) struct Trial {
    pub(crate) spec: RowSpec,
    pub(crate) stage: Vec<usize>,
}

impl Trial {
    pub(crate) fn new(spec: RowSpec, stage: &[usize]) -> Self {
        Self {
            spec,
            stage: stage.to_vec(),
        }
    }
}

/// The order of `n` rows in round `round`: rotated left by `round`.
pub(crate) fn rotation(n: usize, round: usize) -> impl Iterator<Item = usize> {
    let start = if n == 0 { 0 } else { round % n };
    (start..n).chain(0..start)
}

impl Bench<'_> {
    /// Measures every block's rows for the run's rounds, a block at a
    /// time (its rounds back to back, so that the rows compared with each
    /// other ran close in time), calling `between` after each sample; the
    /// rows come back in the order given.
    pub(crate) fn run_blocks(
        &mut self,
        group: &str,
        components: &mut [Component],
        blocks: Vec<Vec<Trial>>,
        between: &mut dyn FnMut(),
    ) -> anyhow::Result<Vec<Row>> {
        let rounds = self.options.rounds();
        let mut rows = Vec::new();
        for block in blocks {
            let stages: Vec<Vec<usize>> = block.iter().map(|t| t.stage.clone()).collect();
            let mut measured: Vec<Measured> =
                block.into_iter().map(|t| Measured::new(t.spec)).collect();
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
                    let mut stage = pick(components, &stages[i]);
                    self.sample(group, measured[i].spec(), round, &mut stage)?;
                    between();
                }
            }
            for index in 0..rounds {
                let round = Round::measured(index, rounds);
                for i in rotation(measured.len(), index) {
                    let mut stage = pick(components, &stages[i]);
                    let sample = self.sample(group, measured[i].spec(), round, &mut stage)?;
                    measured[i].add(sample);
                    between();
                }
            }
            rows.extend(measured.into_iter().filter_map(Measured::finish));
        }
        Ok(rows)
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
