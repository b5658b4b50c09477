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
    log,
    measured::Measured,
    pacer::{Pace, Pacer, Schedule},
    shard::Shard,
    stats,
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

impl ThreadPlan {
    /// The users model's pacing of connection `index` (of the whole
    /// test): its first request at `start + ramp * index / connections`,
    /// its think times drawn from a generator seeded with its index (runs
    /// are repeatable, each shard's users draw their own). `None` for the
    /// plain closed and open models.
    fn pace(&self, index: usize) -> Option<Pace> {
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
    windows: Option<mpsc::Sender<(u64, stats::Figures)>>,
) -> anyhow::Result<ThreadResult> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build a load runtime")?;
    let local = tokio::task::LocalSet::new();
    // Clients create their timers up front, which needs the runtime's context.
    let _context = runtime.enter();
    let stats = Rc::new(RefCell::new(stats::Stats::new(
        plan.record_from,
        plan.rate.is_some(),
        windows.clone(),
    )));
    // The open model sends on time to the microsecond: one pacer per
    // thread, whose task ends with the `LocalSet`. Its spacing is this
    // thread's share of this process's share of the rate.
    let spacing = |rate| {
        let share = plan.connections as f64 / plan.all_connections as f64;
        Duration::from_secs_f64(plan.threads as f64 / (rate * share))
    };
    let pacer = plan.rate.map(|rate| Pacer::new(spacing(rate))).transpose();
    let (pacer, drive) = pacer.context("cannot create the pacer's timer")?.unzip();
    let clients: Vec<Client> = (plan.thread..plan.connections)
        .step_by(plan.threads)
        .map(|local| {
            let index = plan.shard.global(local);
            let schedule = plan.rate.map(|rate| Schedule {
                // Connections of all shards take turns so that the total is evenly spaced.
                next: plan.start + Duration::from_secs_f64(index as f64 / rate),
                interval: Duration::from_secs_f64(plan.all_connections as f64 / rate),
            });
            Client::new(
                Arc::clone(&shared),
                Rc::clone(&stats),
                Arc::clone(&progress),
                index,
                schedule,
                plan.pace(index),
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
    if let (Some(rate), None) = (plan.rate, shared.total) {
        let interval = plan.all_connections as f64 / rate;
        for client in &clients {
            let lag = client.lag(stopped_at);
            max_lag = max_lag.max(lag);
            // The request at the head of the timetable is itself due.
            if !lag.is_zero() {
                unsent += (lag.as_secs_f64() / interval) as u64 + 1;
            }
        }
    }
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
    let all = merged.unwrap_or_else(|| stats::Stats::new(Instant::now(), false, None));
    let status = all
        .status
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(code, &n)| (code as u16, n))
        .collect();
    Measured {
        figures: all.total,
        status,
        per_second: all.per_second,
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
