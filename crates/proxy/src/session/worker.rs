//! What one worker's connections share: the current plan, the upstream
//! connection pools and the worker's metrics shard.

use std::sync::Arc;

use crate::{
    plan::WorkerPlan,
    telemetry::{Metrics, Shard},
    upstream::{h2_pool::H2Pool, pool::Pool},
};

/// What one worker's connections share.
#[derive(Debug)]
pub(crate) struct Worker {
    /// The plan new requests take.
    pub plans: WorkerPlan,
    pub metrics: Arc<Metrics>,
    pub index: usize,
    pub pool: Pool,
    pub h2_pool: H2Pool,
}

impl Worker {
    pub(crate) fn metrics(&self) -> &Shard {
        self.metrics.shard(self.index)
    }
}
