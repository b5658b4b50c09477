//! The process's one health checker (`health.active`): a task on the
//! control thread that, for
//! each upstream of the current plan that has active checks, probes all
//! its hosts every `interval` and reports to the upstream's balancer,
//! which every worker reads. Following the current plan, it picks up a
//! reloaded configuration on its next round.

use std::{collections::HashMap, sync::Arc, time::Duration};

use tokio::{sync::watch, task::JoinSet, time::Instant};

use crate::{ids::HostId, plan::Plans, upstream::health};

/// How often the checker looks for upstreams whose round is due.
const TICK: Duration = Duration::from_millis(50);

/// Runs on the control thread until `shutdown`; idle (a look every
/// 50 ms) while no upstream has active checks.
pub(super) async fn run(plans: Arc<Plans>, mut shutdown: watch::Receiver<bool>) {
    {
        // By upstream name: when its next round starts.
        let mut due: HashMap<String, Instant> = HashMap::new();
        let mut rounds = JoinSet::new();
        loop {
            let plan = plans.load();
            let now = Instant::now();
            for (u, upstream) in plan.upstreams.iter().enumerate() {
                let Some(active) = &upstream.active_health else {
                    continue;
                };
                let next = due.entry(upstream.name.clone()).or_insert(now);
                if *next > now {
                    continue;
                }
                *next = now + active.interval;
                for h in 0..upstream.hosts.len() {
                    let plan = Arc::clone(&plan);
                    rounds.spawn(async move {
                        let upstream = &plan.upstreams[u];
                        let Some(active) = &upstream.active_health else {
                            return;
                        };
                        let host = HostId::new(h);
                        let verdict = health::probe(upstream, host, active).await;
                        health::report(upstream, host, active, verdict, plan.clock());
                    });
                }
            }
            drop(plan);
            tokio::select! {
                _ = shutdown.changed() => return,
                () = tokio::time::sleep(TICK) => {}
            }
            while rounds.try_join_next().is_some() {}
        }
    }
}
