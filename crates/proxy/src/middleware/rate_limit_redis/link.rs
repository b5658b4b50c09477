//! The Redis connections of one limiter: a multiplexed connection per
//! worker (its driver on that worker's runtime), found by the worker's
//! index with no lock: a request loads its worker's slot (an `ArcSwap`)
//! and clones the connection's handle.
//!
//! A connection is made by one attempt at a time, in a task of its own,
//! so that it goes on after the request that started it has run out of
//! `redis.timeout`; the requests that arrive meanwhile wait for the same
//! attempt. An attempt is never retried behind the limiter's back (the
//! `redis` crate's `ConnectionManager` retried for about 7 s before it
//! reported a wrong password, and then kept that error without trying
//! again): its failure is reported at once, with its cause, and the
//! limiter's probes (one request per `PROBE_EVERY` while Redis is down)
//! start the next. A connection that breaks is forgotten, and the next
//! request makes a new one.

use std::{
    pin::pin,
    sync::{
        atomic::{AtomicU64, Ordering::Relaxed},
        Arc,
    },
};

use arc_swap::ArcSwap;
use redis::{aio::MultiplexedConnection, AsyncConnectionConfig, RedisError};
use tokio::{sync::Notify, time::Instant};

/// One worker's connection.
enum Link {
    /// None yet, or the last attempt failed, or the connection broke.
    Absent,
    /// An attempt under way; woken when it ends.
    Connecting(Arc<Notify>),
    /// `generation` tells this connection from the ones after it.
    Ready {
        connection: MultiplexedConnection,
        generation: u64,
    },
}

/// A connection to use, or why there is none.
pub(super) enum Got {
    Ready {
        connection: MultiplexedConnection,
        generation: u64,
    },
    /// The attempt this request waited for failed (and reported it).
    Failed,
    /// No connection within the request's budget.
    TimedOut,
}

/// The connections of one limiter, one slot per worker.
pub(super) struct Links {
    client: redis::Client,
    config: AsyncConnectionConfig,
    slots: Box<[ArcSwap<Link>]>,
    generations: AtomicU64,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Links")
            .field("workers", &self.slots.len())
            .finish_non_exhaustive()
    }
}

impl Links {
    pub(super) fn new(
        client: redis::Client,
        config: AsyncConnectionConfig,
        workers: usize,
    ) -> Self {
        Self {
            client,
            config,
            slots: (0..workers.max(1))
                .map(|_| ArcSwap::from_pointee(Link::Absent))
                .collect(),
            generations: AtomicU64::new(0),
        }
    }

    fn slot(&self, worker: usize) -> &ArcSwap<Link> {
        &self.slots[worker % self.slots.len()]
    }

    /// The worker's connection if it has one: the path of every request
    /// once connected (a load and a clone, no lock, no await).
    #[inline]
    pub(super) fn ready(&self, worker: usize) -> Option<Got> {
        match &**self.slot(worker).load() {
            Link::Ready {
                connection,
                generation,
            } => Some(Got::Ready {
                connection: connection.clone(),
                generation: *generation,
            }),
            Link::Absent | Link::Connecting(_) => None,
        }
    }

    /// The worker's connection, made (or waited for) until `deadline`; a
    /// failed attempt is given to `failed` once, by the attempt's task.
    pub(super) async fn get(
        self: &Arc<Self>,
        worker: usize,
        deadline: Instant,
        failed: impl FnOnce(&RedisError) + Send + 'static,
    ) -> Got {
        let slot = self.slot(worker);
        let mut failed = Some(failed);
        let notify = loop {
            let current = slot.load_full();
            match &*current {
                Link::Ready { .. } => return self.ready(worker).unwrap_or(Got::Failed),
                Link::Connecting(notify) => break Arc::clone(notify),
                Link::Absent => {
                    let notify = Arc::new(Notify::new());
                    let mine = Arc::new(Link::Connecting(Arc::clone(&notify)));
                    let previous = slot.compare_and_swap(&current, mine);
                    if Arc::ptr_eq(&previous, &current) {
                        if let Some(failed) = failed.take() {
                            self.attempt(worker, Arc::clone(&notify), failed);
                        }
                        break notify;
                    }
                    // Another request changed the slot first: look again.
                }
            }
        };
        let mut ended = pin!(notify.notified());
        ended.as_mut().enable();
        // The attempt may have ended between the load and `enable`.
        if let Link::Connecting(now) = &**slot.load() {
            if Arc::ptr_eq(now, &notify) && tokio::time::timeout_at(deadline, ended).await.is_err()
            {
                return Got::TimedOut;
            }
        }
        self.ready(worker).unwrap_or(Got::Failed)
    }

    /// Makes the worker's connection in a task of its own (on this
    /// worker's runtime, where the connection's driver then runs).
    fn attempt(
        self: &Arc<Self>,
        worker: usize,
        notify: Arc<Notify>,
        failed: impl FnOnce(&RedisError) + Send + 'static,
    ) {
        let links = Arc::clone(self);
        tokio::spawn(async move {
            let made = links
                .client
                .get_multiplexed_async_connection_with_config(&links.config)
                .await;
            let slot = links.slot(worker);
            match made {
                Ok(connection) => {
                    let generation = links.generations.fetch_add(1, Relaxed);
                    slot.store(Arc::new(Link::Ready {
                        connection,
                        generation,
                    }));
                }
                Err(err) => {
                    slot.store(Arc::new(Link::Absent));
                    failed(&err);
                }
            }
            notify.notify_waiters();
        });
    }

    /// The connection `generation` broke: the next request makes a new
    /// one (unless one is already there).
    pub(super) fn forget(&self, worker: usize, generation: u64) {
        let slot = self.slot(worker);
        let current = slot.load_full();
        if let Link::Ready { generation: g, .. } = &*current {
            if *g == generation {
                slot.compare_and_swap(&current, Arc::new(Link::Absent));
            }
        }
    }
}
