//! The plan in use, swapped whole: a reload (issue 18) compiles a new plan
//! and stores it; requests already running keep the plan they started
//! with, new ones take the new one.
//!
//! Reading it must cost a request next to nothing on a machine where every
//! core serves requests: cloning one shared `Arc` per request would bounce
//! its counter's cache line between the cores. So each worker keeps its
//! own `Arc` of the current plan (a counter only that worker writes) and
//! looks at a generation number, written only by a reload, to know when
//! to take the new one.

use std::{
    ops::Deref,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use arc_swap::ArcSwap;

use super::Plan;

/// The current plan of the whole process.
#[derive(Debug)]
pub(crate) struct Plans {
    current: ArcSwap<Plan>,
    /// Bumped after every store.
    generation: AtomicU64,
}

impl Plans {
    pub(crate) fn new(plan: Arc<Plan>) -> Self {
        Self {
            current: ArcSwap::new(plan),
            generation: AtomicU64::new(0),
        }
    }

    /// Makes `plan` the one new requests take; returns its generation.
    pub(crate) fn store(&self, plan: Arc<Plan>) -> u64 {
        self.current.store(plan);
        self.generation.fetch_add(1, Ordering::Release) + 1
    }

    pub(crate) fn load(&self) -> Arc<Plan> {
        self.current.load_full()
    }

    /// How many plans were stored since the first.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// A worker's own handle on the current plan.
#[derive(Debug)]
pub(crate) struct WorkerPlan {
    plans: Arc<Plans>,
    mine: ArcSwap<Snapshot>,
    seen: AtomicU64,
}

/// One plan as a worker holds it, with the generation it was current in;
/// derefs to the plan.
#[derive(Debug)]
pub(crate) struct Snapshot {
    plan: Arc<Plan>,
    generation: u64,
}

impl Deref for Snapshot {
    type Target = Plan;

    fn deref(&self) -> &Plan {
        &self.plan
    }
}

impl WorkerPlan {
    pub(crate) fn new(plans: Arc<Plans>) -> Self {
        let seen = plans.generation();
        let mine = ArcSwap::from_pointee(Snapshot {
            plan: plans.load(),
            generation: seen,
        });
        Self {
            plans,
            mine,
            seen: AtomicU64::new(seen),
        }
    }

    /// The plan for a request that starts now, held until it ends.
    pub(crate) fn current(&self) -> Arc<Snapshot> {
        let generation = self.plans.generation();
        if generation != self.seen.load(Ordering::Relaxed) {
            self.mine.store(Arc::new(Snapshot {
                plan: self.plans.load(),
                generation,
            }));
            self.seen.store(generation, Ordering::Relaxed);
        }
        self.mine.load_full()
    }

    /// Replaces `held` with the current plan if a newer one was stored
    /// since it was taken: one atomic load when nothing changed.
    pub(crate) fn refresh(&self, held: &mut Arc<Snapshot>) {
        if self.plans.generation() != held.generation {
            *held = self.current();
        }
    }

    /// The current plan in an `Arc` of the caller's own, for a connection
    /// whose requests each hold a count of it while they run (HTTP/2
    /// streams, each a task): that count is touched by this connection's
    /// streams only, not by every connection of the worker (nor by every
    /// thread, under `runtime: multi_thread`). One allocation per
    /// connection and per reload it sees.
    pub(crate) fn current_own(&self) -> Arc<Snapshot> {
        let shared = self.current();
        Arc::new(Snapshot {
            plan: Arc::clone(&shared.plan),
            generation: shared.generation,
        })
    }

    /// [`WorkerPlan::refresh`] for a plan taken with [`WorkerPlan::current_own`].
    pub(crate) fn refresh_own(&self, held: &mut Arc<Snapshot>) {
        if self.plans.generation() != held.generation {
            *held = self.current_own();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn plan(idle: &str) -> Arc<Plan> {
        let text = format!(
            "listeners: [{{ address: 127.0.0.1:1 }}]\nlimits: {{ idle_timeout: {idle} }}\nupstreams:\n  a: {{ hosts: [\"http://127.0.0.1:2\"] }}\nroutes: [{{ path: /, upstream: a }}]\n"
        );
        let config = crate::config::parse(&text, Path::new("t.yaml"), |_| None).unwrap();
        Arc::new(Plan::compile(&config, 1).unwrap())
    }

    #[test]
    fn a_held_plan_stays_until_refreshed_and_new_requests_take_the_new_one() {
        let plans = Arc::new(Plans::new(plan("5s")));
        let worker = WorkerPlan::new(Arc::clone(&plans));
        let mut held = worker.current();
        worker.refresh(&mut held);
        assert_eq!(held.idle_timeout.as_secs(), 5);
        plans.store(plan("7s"));
        // A request in flight keeps its plan.
        let in_flight = Arc::clone(&held);
        worker.refresh(&mut held);
        assert_eq!(in_flight.idle_timeout.as_secs(), 5);
        assert_eq!(held.idle_timeout.as_secs(), 7);
        assert_eq!(worker.current().idle_timeout.as_secs(), 7);
    }

    #[test]
    fn an_own_plan_is_refreshed_only_after_a_reload() {
        let plans = Arc::new(Plans::new(plan("5s")));
        let worker = WorkerPlan::new(Arc::clone(&plans));
        let mut held = worker.current_own();
        let before = Arc::as_ptr(&held);
        worker.refresh_own(&mut held);
        assert_eq!(Arc::as_ptr(&held), before, "nothing changed: the same Arc");
        assert!(
            !Arc::ptr_eq(&held, &worker.current()),
            "not the worker's Arc"
        );
        plans.store(plan("7s"));
        let in_flight = Arc::clone(&held);
        worker.refresh_own(&mut held);
        assert_eq!(in_flight.idle_timeout.as_secs(), 5);
        assert_eq!(held.idle_timeout.as_secs(), 7);
    }
}
