//! Per-host circuit breaking (`max_connections`, `max_pending`): a host
//! serves at most `max_connections` requests at once (each in-flight
//! HTTP/1.1 request holds one connection; for HTTP/2 it bounds streams);
//! up to `max_pending` more wait for a slot, and past that a request is
//! answered 503 at once instead of queueing without bound.

use std::{
    sync::atomic::{AtomicU32, Ordering::Relaxed},
    time::Duration,
};

use tokio::sync::Semaphore;

use crate::ids::HostId;

#[derive(Debug)]
pub(crate) struct HostLimits {
    /// By host: its free slots.
    slots: Box<[Semaphore]>,
    waiting: Box<[AtomicU32]>,
    max_pending: u32,
}

/// The host is at `max_connections` and `max_pending` requests already wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Full;

impl HostLimits {
    pub(super) fn new(hosts: usize, max_connections: u32, max_pending: u32) -> Self {
        let permits = usize::try_from(max_connections).unwrap_or(usize::MAX);
        Self {
            slots: (0..hosts).map(|_| Semaphore::new(permits)).collect(),
            waiting: (0..hosts).map(|_| AtomicU32::new(0)).collect(),
            max_pending,
        }
    }

    /// Takes a slot on `host`, waiting up to `wait` when there is room in
    /// its queue; [`HostLimits::release`] gives it back.
    pub(crate) async fn acquire(&self, host: HostId, wait: Duration) -> Result<(), Full> {
        let slots = &self.slots[host.index()];
        if let Ok(permit) = slots.try_acquire() {
            permit.forget();
            return Ok(());
        }
        let waiting = &self.waiting[host.index()];
        if waiting
            .fetch_update(Relaxed, Relaxed, |n| {
                (n < self.max_pending).then_some(n + 1)
            })
            .is_err()
        {
            return Err(Full);
        }
        let acquired = tokio::time::timeout(wait, slots.acquire()).await;
        waiting.fetch_sub(1, Relaxed);
        match acquired {
            Ok(Ok(permit)) => {
                permit.forget();
                Ok(())
            }
            _ => Err(Full),
        }
    }

    pub(crate) fn release(&self, host: HostId) {
        self.slots[host.index()].add_permits(1);
    }

    /// Requests waiting for `host` (for `/upstreams`).
    pub(crate) fn waiting(&self, host: HostId) -> u32 {
        self.waiting[host.index()].load(Relaxed)
    }
}
