//! A run's intervals (one a second of measuring): the threads hand each
//! second's figures over as it passes, and once every thread has given
//! its part the interval is complete and goes to the log (`--log`), to
//! the live outputs, and into the report's `intervals` (bounded: past
//! [`MAX_INTERVALS`] points, neighbours merge; the log is the exact
//! record).

use std::{collections::BTreeMap, io, time::Duration};

use crate::{
    figures::Figures,
    live::Feed,
    log::{LogSummary, LogWriter, INTERVAL},
    report::IntervalSummary,
};

/// Most points the report's `intervals` keeps: two hours of seconds.
pub const MAX_INTERVALS: usize = 7_200;

/// Where complete intervals go.
pub(crate) struct Collector {
    threads: usize,
    /// Intervals not yet handed over by every thread: (threads so far, sum).
    pending: BTreeMap<u64, (usize, Figures)>,
    log: Option<LogWriter>,
    live: Option<Feed>,
    kept: Kept,
}

impl Collector {
    pub(crate) fn new(threads: usize, log: Option<LogWriter>, live: Option<Feed>) -> Self {
        Self {
            threads,
            pending: BTreeMap::new(),
            log,
            live,
            kept: Kept::default(),
        }
    }

    pub(crate) fn log_path(&self) -> Option<String> {
        self.log
            .as_ref()
            .map(|log| log.path().display().to_string())
    }

    /// One thread's interval `index`; used once every thread gave it.
    pub(crate) fn add(&mut self, index: u64, figures: Figures) -> io::Result<()> {
        self.add_last(index, figures);
        while let Some(entry) = self.pending.first_entry() {
            if entry.get().0 < self.threads {
                break;
            }
            let (index, (_, figures)) = entry.remove_entry();
            self.complete(index, INTERVAL, &figures)?;
        }
        Ok(())
    }

    /// One thread's interval `index`, handed over after the run ended:
    /// kept for [`Collector::finish`], which knows how long the last was.
    pub(crate) fn add_last(&mut self, index: u64, figures: Figures) {
        let entry = self
            .pending
            .entry(index)
            .or_insert_with(|| (0, figures.empty_like()));
        entry.0 += 1;
        entry.1.add(&figures);
    }

    /// Uses what is left (the last, partial interval when it has
    /// anything), then ends the log with `summary`. `elapsed` is the
    /// measured time. Returns the report's intervals.
    pub(crate) fn finish(
        mut self,
        elapsed: Duration,
        summary: Option<&LogSummary>,
    ) -> io::Result<Vec<IntervalSummary>> {
        for (index, (_, figures)) in std::mem::take(&mut self.pending) {
            let start = INTERVAL * index as u32;
            if figures.is_empty() && start + INTERVAL > elapsed {
                continue;
            }
            let duration = elapsed.saturating_sub(start).min(INTERVAL);
            self.complete(index, duration, &figures)?;
        }
        if let (Some(log), Some(summary)) = (self.log.take(), summary) {
            log.finish(summary)?;
        }
        Ok(self.kept.list)
    }

    fn complete(&mut self, index: u64, duration: Duration, figures: &Figures) -> io::Result<()> {
        if let Some(log) = &mut self.log {
            log.write_window(index, duration, figures)?;
        }
        if let Some(live) = &self.live {
            live.interval(index, duration, figures);
        }
        let start = INTERVAL * index as u32;
        self.kept
            .push(IntervalSummary::new(start, duration, figures));
        Ok(())
    }
}

/// The report's intervals, at most [`MAX_INTERVALS`]: when one more would
/// not fit, neighbours merge in pairs and later ones merge into points
/// twice as long.
#[derive(Debug)]
pub(crate) struct Kept {
    pub(crate) list: Vec<IntervalSummary>,
    /// Intervals in each point.
    span: usize,
    /// Intervals in the last point so far.
    filling: usize,
}

impl Default for Kept {
    fn default() -> Self {
        Self {
            list: Vec::new(),
            span: 1,
            filling: 0,
        }
    }
}

impl Kept {
    pub(crate) fn push(&mut self, interval: IntervalSummary) {
        if (1..self.span).contains(&self.filling) {
            if let Some(last) = self.list.last_mut() {
                last.absorb(&interval);
                self.filling += 1;
                return;
            }
        }
        self.list.push(interval);
        self.filling = 1;
        if self.list.len() > MAX_INTERVALS {
            let last = self.list.pop();
            let merged = self
                .list
                .chunks(2)
                .map(|pair| {
                    let mut point = pair[0];
                    if let Some(second) = pair.get(1) {
                        point.absorb(second);
                    }
                    point
                })
                .collect();
            self.list = merged;
            self.span *= 2;
            self.list.extend(last);
        }
    }
}

impl IntervalSummary {
    /// Takes the next interval in: counts add, the percentiles are the
    /// larger of the two (an upper bound; the log keeps the exact ones).
    pub(crate) fn absorb(&mut self, next: &IntervalSummary) {
        self.duration_s += next.duration_s;
        self.requests += next.requests;
        self.errors += next.errors;
        self.bytes_read += next.bytes_read;
        self.non_2xx_3xx += next.non_2xx_3xx;
        self.checks_passed += next.checks_passed;
        self.checks_failed += next.checks_failed;
        self.p50_us = self.p50_us.max(next.p50_us);
        self.p90_us = self.p90_us.max(next.p90_us);
        self.p99_us = self.p99_us.max(next.p99_us);
        self.p99_9_us = self.p99_9_us.max(next.p99_9_us);
        self.max_us = self.max_us.max(next.max_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn second(index: usize) -> IntervalSummary {
        let figures = Figures::new(false, 0);
        let mut point = IntervalSummary::new(INTERVAL * index as u32, INTERVAL, &figures);
        point.requests = 1;
        point.max_us = index as u64;
        point
    }

    #[test]
    fn intervals_stay_bounded_and_keep_every_count() {
        let mut kept = Kept::default();
        let total = MAX_INTERVALS * 3 + 5;
        for index in 0..total {
            kept.push(second(index));
            assert!(kept.list.len() <= MAX_INTERVALS, "{index}");
        }
        let requests: u64 = kept.list.iter().map(|p| p.requests).sum();
        assert_eq!(requests, total as u64);
        let seconds: f64 = kept.list.iter().map(|p| p.duration_s).sum();
        assert_eq!(seconds, total as f64);
        // Points start where the one before ends, and keep their maximum.
        for pair in kept.list.windows(2) {
            assert_eq!(pair[0].start_s + pair[0].duration_s, pair[1].start_s);
            assert!(pair[0].max_us < pair[1].max_us);
        }
        assert_eq!(kept.list.last().map(|p| p.max_us), Some(total as u64 - 1));
    }
}
