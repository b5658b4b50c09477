//! One load thread: its own current-thread runtime, its share of the
//! connections, and its figures handed back at the end (and each second
//! to the log's writer).

use std::{
    cell::RefCell,
    rc::Rc,
    sync::{atomic::AtomicU64, mpsc, Arc},
    time::Duration,
};

use anyhow::Context;
use tokio::time::Instant;

use crate::{
    config,
    conn::{Client, Shared},
    figures::Figures,
    log,
    measured::{Measured, StageTally},
    pacer::Pacer,
    shard::Shard,
    stages::Curve,
    stats,
    timetable::{Pace, Schedule},
};

#[derive(Debug, Clone, Copy)]
pub(crate) struct ThreadPlan {
    pub(crate) thread: usize,
    pub(crate) threads: usize,
    pub(crate) shard: Shard,
    /// This process's connections.
    pub(crate) connections: usize,
    /// The whole test's (all shards').
    pub(crate) all_connections: usize,
    pub(crate) rate: Option<f64>,
    pub(crate) think: Option<config::ThinkTime>,
    pub(crate) ramp: Duration,
    pub(crate) start: Instant,
    pub(crate) record_from: Instant,
}

/// What every thread of a run shares beside [`Shared`]: the stages and
/// the shape of the figures.
#[derive(Debug, Clone)]
pub(crate) struct ThreadShare {
    /// With stages: the rate (open model) or the users over time.
    pub(crate) curve: Option<Arc<Curve>>,
    /// With stages: when each ends.
    pub(crate) stage_ends: Option<Arc<[Instant]>>,
    /// Empty figures of the run's model and checks.
    pub(crate) shape: Arc<Figures>,
}

impl ThreadPlan {
    /// The users model's pacing of connection `index` (of the whole
    /// test): its first request at `start + ramp * index / connections`,
    /// its think times drawn from a generator seeded with its index (runs
    /// are repeatable, each shard's users draw their own). `None` for the
    /// plain closed and open models.
    fn pace(&self, index: usize, curve: Option<&Arc<Curve>>) -> Option<Pace> {
        if let (Some(curve), None) = (curve, self.rate) {
            return Some(Pace::staged(
                self.start,
                self.think,
                index as u64,
                Arc::clone(curve),
            ));
        }
        if self.think.is_none() && self.ramp.is_zero() {
            return None;
        }
        let offset = self.ramp.as_nanos() * index as u128 / self.all_connections as u128;
        Some(Pace::new(
            self.start + Duration::from_nanos(offset as u64),
            self.think,
            index as u64,
        ))
    }
}

/// What one thread brings back.
pub(crate) struct ThreadResult {
    stats: stats::Stats,
    max_lag: Duration,
    unsent: u64,
}

pub(crate) fn run_thread(
    shared: Arc<Shared>,
    progress: Arc<AtomicU64>,
    plan: ThreadPlan,
    share: ThreadShare,
    windows: Option<mpsc::Sender<(u64, Figures)>>,
) -> anyhow::Result<ThreadResult> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build a load runtime")?;
    let local = tokio::task::LocalSet::new();
    // Clients create their timers up front, which needs the runtime's context.
    let _context = runtime.enter();
    let stages = share.stage_ends.clone().map(stats::StageCounts::new);
    let stats = Rc::new(RefCell::new(stats::Stats::new(
        plan.record_from,
        &share.shape,
        windows.clone(),
        stages,
    )));
    // The open model sends on time to the microsecond: one pacer per
    // thread, whose task ends with the `LocalSet`. Its spacing is this
    // thread's share of this process's share of the rate.
    let spacing = |rate| {
        let share = plan.connections as f64 / plan.all_connections as f64;
        Duration::from_secs_f64(plan.threads as f64 / (rate * share))
    };
    let staged = share.curve.is_some();
    let pacer = plan
        .rate
        .map(|rate| Pacer::new(spacing(rate), staged))
        .transpose();
    let (pacer, drive) = pacer.context("cannot create the pacer's timer")?.unzip();
    let clients: Vec<Client> = (plan.thread..plan.connections)
        .step_by(plan.threads)
        .map(|local| {
            let index = plan.shard.global(local);
            // Connections of all shards take turns so that the total is evenly spaced.
            let schedule = plan.rate.map(|rate| match &share.curve {
                Some(curve) => Schedule::staged(
                    plan.start,
                    Arc::clone(curve),
                    index as u64,
                    plan.all_connections as u64,
                ),
                None => Schedule::fixed(
                    plan.start + Duration::from_secs_f64(index as f64 / rate),
                    Duration::from_secs_f64(plan.all_connections as f64 / rate),
                ),
            });
            Client::new(
                Arc::clone(&shared),
                Rc::clone(&stats),
                Arc::clone(&progress),
                index,
                schedule,
                plan.pace(index, share.curve.as_ref()),
                pacer.as_ref(),
            )
        })
        .collect();
    let clients = local.block_on(&runtime, async {
        if let Some(drive) = drive {
            tokio::task::spawn_local(drive);
        }
        if windows.is_some() {
            tokio::task::spawn_local(hand_over_windows(Rc::clone(&stats), plan.record_from));
        }
        let tasks: Vec<_> = clients
            .into_iter()
            .map(|mut client| {
                tokio::task::spawn_local(async move {
                    client.run().await;
                    client
                })
            })
            .collect();
        let mut finished = Vec::with_capacity(tasks.len());
        for task in tasks {
            finished.push(task.await.context("a load connection panicked")?);
        }
        anyhow::Ok(finished)
    })?;
    // Behind as of the stop, the end of the measured time: a request that
    // fell due while this thread was noticing the stop was never owed.
    let stopped_at = shared
        .stopped_at
        .get()
        .copied()
        .unwrap_or_else(Instant::now);
    let mut max_lag = Duration::ZERO;
    let mut unsent = 0;
    // A `-n` run ends when its budget is spent: nothing is "behind" then.
    if let (Some(_), None) = (plan.rate, shared.total) {
        for client in &clients {
            max_lag = max_lag.max(client.lag(stopped_at));
            unsent += client.unsent(stopped_at);
        }
    }
    stats
        .borrow_mut()
        .per_connection
        .extend(clients.iter().map(Client::answered));
    drop(clients);
    // The last, partial interval; the task handing over the others ends
    // with the `LocalSet`.
    drop(local);
    stats.borrow_mut().end_window();
    let stats = Rc::try_unwrap(stats)
        .map_err(|_| anyhow::anyhow!("statistics still shared after the run"))?
        .into_inner();
    Ok(ThreadResult {
        stats,
        max_lag,
        unsent,
    })
}

/// Adds up the threads' figures.
pub(crate) fn measure(
    results: Vec<ThreadResult>,
    shape: &Figures,
    elapsed: Duration,
    interrupted: bool,
) -> Measured {
    let whole_seconds = elapsed.as_secs() as usize;
    let mut thread_samples = Vec::new();
    let mut max_lag = Duration::ZERO;
    let mut unsent = 0;
    let mut accounting = crate::Accounting::default();
    for result in &results {
        accounting.add(&result.stats.accounting.settle());
        // Seconds without a response count as zero, not as missing.
        thread_samples.extend(
            (0..whole_seconds)
                .map(|second| result.stats.per_second.get(second).copied().unwrap_or(0)),
        );
        max_lag = max_lag.max(result.max_lag);
        unsent += result.unsent;
    }
    let mut merged: Option<stats::Stats> = None;
    for result in results {
        match &mut merged {
            None => merged = Some(result.stats),
            Some(all) => all.merge(&result.stats),
        }
    }
    let all = merged.unwrap_or_else(|| stats::Stats::new(Instant::now(), shape, None, None));
    Measured {
        status: all.total.statuses().collect(),
        figures: all.total,
        stages: all.stages.map(|s| StageTally {
            responses: s.responses,
            sent: s.sent,
        }),
        per_second: all.per_second,
        per_connection: all.per_connection,
        thread_samples,
        max_lag,
        unsent,
        accounting: Some(accounting),
        elapsed,
        interrupted,
        intervals: Vec::new(),
    }
}

/// Hands this thread's intervals to the log's writer as they pass, even
/// when it records nothing (a user thinking, a stalled server).
async fn hand_over_windows(stats: Rc<RefCell<stats::Stats>>, record_from: Instant) {
    let mut next = record_from + log::INTERVAL;
    loop {
        tokio::time::sleep_until(next).await;
        stats.borrow_mut().window_at(Instant::now());
        next += log::INTERVAL;
    }
}
