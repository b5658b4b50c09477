//! The exchanges of one HTTP/2 or HTTP/3 connection, one per slot, each
//! slot with its own waker, and what a session does with them that does
//! not depend on the protocol: record those that ended, send the refused
//! ones again, reset those that ran out of time.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    task::{Context, Poll, Wake, Waker},
    time::Duration,
};

use tokio::time::Instant;

use super::{Client, Next};
use crate::{
    checks::Captured,
    figures::{ErrorKind, Timing},
};

/// Where the timeout timer waits while no stream is in flight.
const PARKED: Duration = Duration::from_secs(3600);

/// A request in flight on its stream, polled to its end.
pub(super) trait Exchange {
    type Error;
    /// The response's status once it is complete (body and trailers in);
    /// `now` is when the pass that polls it began.
    fn poll(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<Result<u16, Self::Error>>;
    /// The request it carries.
    fn request(&self) -> Next;
    /// When its stream was opened: it times out `--timeout` after.
    fn sent(&self) -> Instant;
    /// When the answer's head arrived, once it has.
    fn first_byte(&self) -> Option<Instant>;
    /// What the checks read of the answer.
    fn captured(&self) -> Option<&Captured>;
    /// Whether the server says it did not process the request, so that
    /// it may be sent again.
    fn refused(err: &Self::Error) -> bool;
    /// How the error counts.
    fn error_kind(err: &Self::Error) -> ErrorKind;
}

impl Client {
    /// Records every exchange that completed or failed, and drops it;
    /// those the server refused unprocessed are queued to be sent again
    /// (once: a second refusal is a read error).
    pub(super) fn poll_exchanges<E: Exchange>(&mut self, exchanges: &mut Slots<E>, now: Instant) {
        let mut completed = 0;
        let mut ended = 0;
        let mut answered = 0;
        let mut stats = self.stats.borrow_mut();
        let retry = &mut self.retry;
        let checks = self.shared.checks.as_ref();
        exchanges.poll_woken(now, |exchange, result| match result {
            Ok(status) => {
                let timing = Timing {
                    intended: exchange.request().intended,
                    sent: exchange.sent(),
                    first_byte: exchange.first_byte().unwrap_or(now),
                    done: now,
                };
                let took = now.saturating_duration_since(exchange.sent());
                let verdicts = checks.map(|c| c.verdicts(status, exchange.captured(), took));
                answered += u64::from(stats.response(status, &timing, verdicts));
                completed += 1;
                ended += 1;
            }
            Err(err) if E::refused(&err) && !exchange.request().again => retry.push_back(Next {
                again: true,
                ..exchange.request()
            }),
            Err(err) => {
                stats.error(E::error_kind(&err), now);
                stats.lost(1, now);
                ended += 1;
            }
        });
        drop(stats);
        self.answered += answered;
        if completed > 0 {
            self.progress.fetch_add(completed, Ordering::Relaxed);
        }
        self.shared.finish(ended);
        if ended > 0 {
            self.rest(now);
        }
    }

    /// Ends (resets) the exchanges that have run out of time, each counted
    /// as a timeout, and sets the timer for the next one to.
    pub(super) fn expire<E: Exchange>(&mut self, exchanges: &mut Slots<E>) {
        let now = Instant::now();
        let timeout = self.shared.timeout;
        let before = exchanges.len();
        // Dropping a stream's handles resets it.
        exchanges.retain(|exchange| exchange.sent() + timeout > now);
        let expired = before - exchanges.len();
        for _ in 0..expired {
            self.record_error(ErrorKind::Timeout);
        }
        self.lose(expired as u64);
        if expired > 0 {
            self.rest(now);
        }
        let next = exchanges
            .iter()
            .map(|exchange| exchange.sent() + timeout)
            .min()
            .unwrap_or(now + PARKED);
        self.timer.as_mut().reset(next);
    }
}

/// The exchanges in flight, one per slot, each slot with its own waker
/// that marks it woken: a pass polls only the exchanges woken since their
/// last poll, not all of them (`h2` clones the waker on every poll of a
/// pending stream, which made polling every stream the most expensive
/// part of a pass).
pub(super) struct Slots<E> {
    exchanges: Vec<Option<E>>,
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

impl<E: Exchange> Slots<E> {
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
    pub(super) fn insert(&mut self, exchange: E) {
        if let Some(slot) = self.free.pop() {
            self.exchanges[slot] = Some(exchange);
            self.woken.mark(slot);
        }
    }

    /// Polls the woken exchanges; those that end are handed to `ended` and dropped.
    pub(super) fn poll_woken(
        &mut self,
        now: Instant,
        mut ended: impl FnMut(&E, Result<u16, E::Error>),
    ) {
        for word in 0..self.woken.bits.len() {
            let mut bits = self.woken.bits[word].swap(0, Ordering::AcqRel);
            while bits != 0 {
                let slot = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let Some(exchange) = &mut self.exchanges[slot] else {
                    continue;
                };
                let mut cx = Context::from_waker(&self.wakers[slot]);
                if let Poll::Ready(result) = exchange.poll(&mut cx, now) {
                    ended(exchange, result);
                    self.exchanges[slot] = None;
                    self.free.push(slot);
                }
            }
        }
    }

    /// Drops the exchanges for which `keep` is false.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&E) -> bool) {
        for (slot, entry) in self.exchanges.iter_mut().enumerate() {
            if entry.as_ref().is_some_and(|exchange| !keep(exchange)) {
                *entry = None;
                self.free.push(slot);
            }
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &E> {
        self.exchanges.iter().flatten()
    }
}
