//! What one worker's connections share: the current plan, the upstream
//! connection pools and the worker's metrics shard.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::{Parked, ParkingLot};
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
    /// Where its idle plaintext HTTP/1.1 client connections wait.
    pub parking: Arc<ParkingLot>,
    /// Parked connections whose clients sent again, to be served here.
    pub unparked: mpsc::UnboundedSender<Parked>,
}

impl Worker {
    pub(crate) fn metrics(&self) -> &Shard {
        self.metrics.shard(self.index)
    }

    /// Serves `parked` in a task of this worker again (closed if the
    /// worker is gone).
    pub(crate) fn unpark(&self, parked: Parked) {
        let _ = self.unparked.send(parked);
    }
}
