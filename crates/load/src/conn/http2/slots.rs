//! The exchanges of one HTTP/2 connection, one per slot, each slot with
//! its own waker.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    task::{Context, Poll, Wake, Waker},
};

use super::Exchange;

/// The exchanges in flight, one per slot, each slot with its own waker
/// that marks it woken: a pass polls only the exchanges woken since their
/// last poll, not all of them (`h2` clones the waker on every poll of a
/// pending stream, which made polling every stream the most expensive
/// part of a pass).
pub(super) struct Slots {
    exchanges: Vec<Option<Exchange>>,
    wakers: Vec<Waker>,
    free: Vec<usize>,
    woken: Arc<Woken>,
}

/// The slots woken since their last poll, and the task to wake with them.
struct Woken {
    bits: Box<[AtomicU64]>,
    task: Mutex<Option<Waker>>,
}

impl Woken {
    fn mark(&self, slot: usize) {
        self.bits[slot / 64].fetch_or(1 << (slot % 64), Ordering::AcqRel);
    }
}

struct SlotWaker {
    woken: Arc<Woken>,
    slot: usize,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.mark(self.slot);
        if let Ok(task) = self.woken.task.lock() {
            if let Some(task) = task.as_ref() {
                task.wake_by_ref();
            }
        }
    }
}

impl Slots {
    pub(super) fn new(count: usize) -> Self {
        let woken = Arc::new(Woken {
            bits: (0..count.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            task: Mutex::new(None),
        });
        Self {
            exchanges: (0..count).map(|_| None).collect(),
            wakers: (0..count)
                .map(|slot| {
                    Waker::from(Arc::new(SlotWaker {
                        woken: Arc::clone(&woken),
                        slot,
                    }))
                })
                .collect(),
            // Taken from the end: slot 0 first.
            free: (0..count).rev().collect(),
            woken,
        }
    }

    /// Exchanges in flight.
    pub(super) fn len(&self) -> usize {
        self.exchanges.len() - self.free.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.free.len() == self.exchanges.len()
    }

    pub(super) fn is_full(&self) -> bool {
        self.free.is_empty()
    }

    /// The task that a slot's wake-up wakes.
    pub(super) fn set_task(&self, waker: &Waker) {
        if let Ok(mut task) = self.woken.task.lock() {
            if !task.as_ref().is_some_and(|task| task.will_wake(waker)) {
                *task = Some(waker.clone());
            }
        }
    }

    /// Puts `exchange` in a free slot (the caller checks [`Slots::is_full`]
    /// first). It counts as woken: its first poll registers its waker.
    pub(super) fn insert(&mut self, exchange: Exchange) {
        if let Some(slot) = self.free.pop() {
            self.exchanges[slot] = Some(exchange);
            self.woken.mark(slot);
        }
    }

    /// Polls the woken exchanges; those that end are handed to `ended` and dropped.
    pub(super) fn poll_woken(&mut self, mut ended: impl FnMut(&Exchange, Result<u16, h2::Error>)) {
        for word in 0..self.woken.bits.len() {
            let mut bits = self.woken.bits[word].swap(0, Ordering::AcqRel);
            while bits != 0 {
                let slot = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let Some(exchange) = &mut self.exchanges[slot] else {
                    continue;
                };
                let mut cx = Context::from_waker(&self.wakers[slot]);
                if let Poll::Ready(result) = exchange.poll(&mut cx) {
                    ended(exchange, result);
                    self.exchanges[slot] = None;
                    self.free.push(slot);
                }
            }
        }
    }

    /// Drops the exchanges for which `keep` is false.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Exchange) -> bool) {
        for (slot, entry) in self.exchanges.iter_mut().enumerate() {
            if entry.as_ref().is_some_and(|exchange| !keep(exchange)) {
                *entry = None;
                self.free.push(slot);
            }
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Exchange> {
        self.exchanges.iter().flatten()
    }
}
