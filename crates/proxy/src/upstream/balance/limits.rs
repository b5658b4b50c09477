//! Per-host limits, HAProxy's server `maxconn` and queue: a host serves
//! at most `max_connections` requests at once (each in-flight HTTP/1.1
//! request holds one connection; for HTTP/2 it bounds streams); up to
//! `max_pending` more wait for a slot, each at most `timeouts.queue`, and
//! past either a request is answered 503 instead of queueing without
//! bound. And at most `max_connecting` connections are being opened to a
//! host at once ([`Opening`]).

use std::{
    sync::atomic::{AtomicU32, Ordering::Relaxed},
    time::Duration,
};

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::ids::HostId;

#[derive(Debug)]
pub(crate) struct HostLimits {
    /// By host: its free slots.
    slots: Box<[Semaphore]>,
    waiting: Box<[AtomicU32]>,
    max_pending: u32,
}

/// Why a request got no slot on a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoSlot {
    /// The host is at `max_connections` and `max_pending` requests already wait.
    Full,
    /// It waited its whole `timeouts.queue`.
    TimedOut,
}

impl HostLimits {
    /// `max_pending`: `None` for a queue bounded only by its timeout.
    pub(super) fn new(hosts: usize, max_connections: u32, max_pending: Option<u32>) -> Self {
        let permits = usize::try_from(max_connections).unwrap_or(usize::MAX);
        Self {
            slots: (0..hosts).map(|_| Semaphore::new(permits)).collect(),
            waiting: (0..hosts).map(|_| AtomicU32::new(0)).collect(),
            max_pending: max_pending.unwrap_or(u32::MAX),
        }
    }

    /// Takes a slot on `host`, waiting up to `wait` when there is room in
    /// its queue; [`HostLimits::release`] gives it back.
    pub(crate) async fn acquire(&self, host: HostId, wait: Duration) -> Result<(), NoSlot> {
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
            return Err(NoSlot::Full);
        }
        let acquired = tokio::time::timeout(wait, slots.acquire()).await;
        waiting.fetch_sub(1, Relaxed);
        match acquired {
            Ok(Ok(permit)) => {
                permit.forget();
                Ok(())
            }
            _ => Err(NoSlot::TimedOut),
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

/// Connections being opened to each host, at most `max_connecting` at
/// once. A burst of requests that each opened its own connection would
/// send a burst of SYNs: past the host's accept queue (Tomcat's holds
/// 100) they are dropped, and each of those connects waits for TCP to
/// send its SYN again a second later, by when `timeouts.connect` is over.
/// Bounded, the rest of the burst waits for a slot here, or for a
/// connection another request gives back (`upstream::queue`).
#[derive(Debug)]
pub(crate) struct Opening {
    slots: Box<[Semaphore]>,
    /// `max_connecting`: each host's slots when none is taken.
    permits: usize,
}

impl Opening {
    pub(super) fn new(hosts: usize, max_connecting: u32) -> Self {
        let permits = usize::try_from(max_connecting.max(1)).unwrap_or(usize::MAX);
        Self {
            slots: (0..hosts).map(|_| Semaphore::new(permits)).collect(),
            permits,
        }
    }

    /// Connections being opened to `host` now (for `/upstreams`).
    pub(crate) fn connecting(&self, host: HostId) -> usize {
        self.permits - self.slots[host.index()].available_permits()
    }

    /// A slot to open a connection to `host` now, if one is free.
    pub(crate) fn try_take(&self, host: HostId) -> Option<SemaphorePermit<'_>> {
        self.slots[host.index()].try_acquire().ok()
    }

    /// The next slot to open a connection to `host` (first come, first served).
    pub(crate) async fn take(&self, host: HostId) -> SemaphorePermit<'_> {
        match self.slots[host.index()].acquire().await {
            Ok(permit) => permit,
            // Never closed: wait for the caller's deadline.
            Err(_) => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: HostId = HostId::new(0);

    #[tokio::test(start_paused = true)]
    async fn a_full_host_queues_up_to_its_timeout() {
        let limits = HostLimits::new(1, 1, None);
        assert_eq!(limits.acquire(H, Duration::ZERO).await, Ok(()));
        // The slot is taken: the next request waits its whole timeout.
        let started = tokio::time::Instant::now();
        let waited = limits.acquire(H, Duration::from_secs(10)).await;
        assert_eq!(waited, Err(NoSlot::TimedOut));
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert_eq!(limits.waiting(H), 0);
        // Given back while a request waits: it gets the slot.
        let waiter = limits.acquire(H, Duration::from_secs(10));
        let release = async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            limits.release(H);
        };
        let (got, ()) = tokio::join!(waiter, release);
        assert_eq!(got, Ok(()));
        assert_eq!(started.elapsed(), Duration::from_secs(13));
    }

    #[tokio::test(start_paused = true)]
    async fn past_max_pending_a_request_is_refused_at_once() {
        let limits = HostLimits::new(1, 1, Some(1));
        assert_eq!(limits.acquire(H, Duration::ZERO).await, Ok(()));
        let queued = limits.acquire(H, Duration::from_secs(10));
        let refused = async {
            tokio::task::yield_now().await;
            assert_eq!(limits.waiting(H), 1);
            let started = tokio::time::Instant::now();
            let refused = limits.acquire(H, Duration::from_secs(10)).await;
            assert_eq!(started.elapsed(), Duration::ZERO);
            refused
        };
        let (queued, refused) = tokio::join!(queued, refused);
        assert_eq!(
            (queued, refused),
            (Err(NoSlot::TimedOut), Err(NoSlot::Full))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn opening_slots_are_first_come_first_served() {
        let opening = Opening::new(1, 2);
        let a = opening.try_take(H).unwrap();
        let _b = opening.try_take(H).unwrap();
        assert!(opening.try_take(H).is_none(), "two at once");
        let next = async {
            let _c = opening.take(H).await;
            tokio::time::Instant::now()
        };
        let opened = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            drop(a);
            tokio::time::Instant::now()
        };
        let start = tokio::time::Instant::now();
        let (took, freed) = tokio::join!(next, opened);
        assert_eq!(took, freed, "the slot goes to the waiter when one opens");
        assert_eq!(took - start, Duration::from_millis(300));
    }
}
