//! When requests leave: the open model's timetable, sent on time to the
//! microsecond, and the users model's ramp and think times.
//!
//! Tokio's timers have a 1 ms resolution (its wheel ticks in milliseconds
//! and its reactor sleeps in `epoll_wait`'s milliseconds), so a request
//! paced with `sleep_until` leaves up to a millisecond after it was due,
//! and the open model counts that as the target's latency. Each load
//! thread of an open-model run therefore has one [`Pacer`]: a task that
//! keeps every connection's next deadline in a heap, sleeps on a `timerfd`
//! (nanosecond resolution, registered with the thread's reactor, so reads
//! and writes go on while it sleeps) until [`SPIN`] before the earliest
//! one, then yields to the runtime until the deadline has passed (each
//! turn polls the reactor: responses keep being read and timed), and wakes
//! the connections that are due. A connection's [`SendTimer`] registers its
//! deadline with the pacer and is ready as soon as the clock has passed it.
//!
//! The users model (think times of a second) keeps Tokio's coarse timer:
//! its latency counts from the actual send.

use std::{
    cell::RefCell,
    cmp::Reverse,
    collections::BinaryHeap,
    future::{poll_fn, Future},
    io,
    pin::Pin,
    rc::Rc,
    task::{Context, Poll, Waker},
    time::Duration,
};

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use tokio::{
    net::unix::pipe,
    time::{sleep_until, Instant, Sleep},
};

use crate::config::ThinkTime;

/// How long before a deadline the pacer stops sleeping and spins. Waking
/// from a `timerfd` takes 20-60 µs on the 2-vCPU VMs measured (the CPU was
/// idle); spinning (yielding to the runtime, which polls its reactor each
/// turn) for the last stretch turns that into a few µs. At 1,000 req/s it
/// costs 5% of a core; above 20,000 req/s per thread the pacer spins all
/// the time.
pub(crate) const SPIN: Duration = Duration::from_micros(50);

/// The open model's timetable for one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    pub next: Instant,
    pub interval: Duration,
}

/// The users model's pacing of one connection (one user).
#[derive(Debug, Clone)]
pub(crate) struct Pace {
    /// No request is sent before this: the user's start on the ramp, then
    /// the end of its current think time.
    pub(crate) until: Instant,
    think: Option<ThinkTime>,
    rng: fastrand::Rng,
}

impl Pace {
    pub(crate) fn new(start: Instant, think: Option<ThinkTime>, seed: u64) -> Self {
        Self {
            until: start,
            think,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// A request ended at `now`: think before the next one.
    pub(crate) fn rest(&mut self, now: Instant) {
        if let Some(think) = self.think {
            let span = think.max.saturating_sub(think.min).as_nanos() as u64;
            self.until = now + think.min + Duration::from_nanos(self.rng.u64(0..=span));
        }
    }
}

/// What the pacer does next, at `now`, for the earliest deadline `next`
/// (not yet passed): sleep until `SPIN` before it, or spin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Sleep(Instant),
    Spin,
}

fn plan(now: Instant, next: Instant, spin: Duration) -> Step {
    match next.checked_sub(spin) {
        Some(wake) if wake > now => Step::Sleep(wake),
        _ => Step::Spin,
    }
}

/// The deadlines waited for on one thread.
#[derive(Debug, Default)]
struct Waits {
    /// `(deadline, waiter)`, earliest first. An entry whose waiter has
    /// since moved or dropped its deadline is stale and skipped.
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
    waiters: Vec<Waiter>,
    /// The pacer's task while it waits, and the deadline it sleeps
    /// towards (`None`: it has nothing to wait for).
    driver: Option<(Waker, Option<Instant>)>,
}

#[derive(Debug, Default)]
struct Waiter {
    deadline: Option<Instant>,
    waker: Option<Waker>,
}

impl Waits {
    fn add(&mut self) -> usize {
        self.waiters.push(Waiter::default());
        self.waiters.len() - 1
    }

    /// Waiter `id` waits for `deadline`; the pacer is woken if it sleeps
    /// towards a later one.
    fn register(&mut self, id: usize, deadline: Instant, waker: &Waker) {
        let waiter = &mut self.waiters[id];
        if waiter.deadline != Some(deadline) {
            waiter.deadline = Some(deadline);
            self.heap.push(Reverse((deadline, id)));
        }
        match &mut waiter.waker {
            Some(known) if known.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        if let Some((_, until)) = &self.driver {
            if until.is_none_or(|until| deadline < until) {
                if let Some((driver, _)) = self.driver.take() {
                    driver.wake();
                }
            }
        }
    }

    fn cancel(&mut self, id: usize) {
        let waiter = &mut self.waiters[id];
        waiter.deadline = None;
        waiter.waker = None;
    }

    /// Wakes every waiter due at `now`; returns the earliest deadline
    /// still waited for.
    fn fire(&mut self, now: Instant) -> Option<Instant> {
        while let Some(&Reverse((deadline, id))) = self.heap.peek() {
            let live = self.waiters[id].deadline == Some(deadline);
            if live && deadline > now {
                return Some(deadline);
            }
            self.heap.pop();
            if live {
                self.cancel_and_wake(id);
            }
        }
        None
    }

    fn cancel_and_wake(&mut self, id: usize) {
        let waiter = &mut self.waiters[id];
        waiter.deadline = None;
        if let Some(waker) = waiter.waker.take() {
            waker.wake();
        }
    }
}

/// One load thread's pacer; cloned into each of its connections.
#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    waits: Rc<RefCell<Waits>>,
}

impl Pacer {
    /// A pacer and the task that drives it (to spawn on the thread's
    /// `LocalSet`; it never ends). Needs the runtime's context: the timer
    /// registers with its reactor.
    pub(crate) fn new() -> io::Result<(Self, impl Future<Output = ()>)> {
        let timer = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // Tokio's safe way to watch a descriptor it is given to own: the
        // pipe reader only polls it for reading and reads it, which is all
        // a timerfd needs (each read takes its 8-byte expiry count).
        let alarm = pipe::Receiver::from_owned_fd_unchecked(timer)?;
        let waits = Rc::new(RefCell::new(Waits::default()));
        let pacer = Self {
            waits: Rc::clone(&waits),
        };
        Ok((pacer, drive(waits, alarm)))
    }

    /// A precise timer for one connection.
    pub(crate) fn timer(&self, deadline: Instant) -> SendTimer {
        let id = self.waits.borrow_mut().add();
        SendTimer(Timer::Precise {
            waits: Rc::clone(&self.waits),
            id,
            deadline,
        })
    }
}

/// The pacer's task: wake the waiters that are due, then sleep on the
/// `timerfd` until `SPIN` before the next deadline, or spin to it.
async fn drive(waits: Rc<RefCell<Waits>>, alarm: pipe::Receiver) {
    loop {
        let next = poll_fn(|cx| {
            let mut waits = waits.borrow_mut();
            match waits.fire(Instant::now()) {
                Some(next) => Poll::Ready(next),
                None => {
                    waits.driver = Some((cx.waker().clone(), None));
                    Poll::Pending
                }
            }
        })
        .await;
        let now = Instant::now();
        let wake = match plan(now, next, SPIN) {
            Step::Spin => {
                tokio::task::yield_now().await;
                continue;
            }
            Step::Sleep(wake) => wake,
        };
        let armed = Timespec::try_from(wake - now).map(|value| {
            let timer = Itimerspec {
                it_interval: Timespec::default(),
                it_value: value,
            };
            timerfd_settime(&alarm, TimerfdTimerFlags::empty(), &timer)
        });
        if !matches!(armed, Ok(Ok(_))) {
            // Spin instead: late is better than never.
            tokio::task::yield_now().await;
            continue;
        }
        // Until the alarm rings, or an earlier deadline is registered.
        let mut waiting = false;
        poll_fn(|cx| {
            if ring(&alarm, cx).is_ready() {
                return Poll::Ready(());
            }
            let mut waits = waits.borrow_mut();
            if waiting && waits.driver.is_none() {
                return Poll::Ready(());
            }
            waiting = true;
            waits.driver = Some((cx.waker().clone(), Some(next)));
            Poll::Pending
        })
        .await;
        waits.borrow_mut().driver = None;
    }
}

/// Ready once the alarm has rung (its expiry count is read, which
/// clears it), or the timer cannot be read (the pacer spins then).
fn ring(alarm: &pipe::Receiver, cx: &mut Context<'_>) -> Poll<()> {
    loop {
        if alarm.poll_read_ready(cx).is_pending() {
            return Poll::Pending;
        }
        match alarm.try_read(&mut [0; 8]) {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            _ => return Poll::Ready(()),
        }
    }
}

/// When a connection may send its next request: ready once the clock has
/// passed its deadline. Precise (a [`Pacer`]'s) in the open model, Tokio's
/// millisecond timer otherwise.
#[derive(Debug)]
pub(crate) struct SendTimer(Timer);

#[derive(Debug)]
enum Timer {
    Coarse(Pin<Box<Sleep>>),
    Precise {
        waits: Rc<RefCell<Waits>>,
        id: usize,
        deadline: Instant,
    },
}

impl SendTimer {
    pub(crate) fn coarse(deadline: Instant) -> Self {
        Self(Timer::Coarse(Box::pin(sleep_until(deadline))))
    }

    pub(crate) fn deadline(&self) -> Instant {
        match &self.0 {
            Timer::Coarse(sleep) => sleep.deadline(),
            Timer::Precise { deadline, .. } => *deadline,
        }
    }

    pub(crate) fn reset(&mut self, to: Instant) {
        match &mut self.0 {
            Timer::Coarse(sleep) => sleep.as_mut().reset(to),
            Timer::Precise { deadline, .. } => *deadline = to,
        }
    }
}

impl Future for SendTimer {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.get_mut().0 {
            Timer::Coarse(sleep) => sleep.as_mut().poll(cx),
            Timer::Precise {
                waits,
                id,
                deadline,
            } => {
                let mut waits = waits.borrow_mut();
                if Instant::now() >= *deadline {
                    waits.cancel(*id);
                    Poll::Ready(())
                } else {
                    waits.register(*id, *deadline, cx.waker());
                    Poll::Pending
                }
            }
        }
    }
}

impl Drop for SendTimer {
    fn drop(&mut self) {
        if let Timer::Precise { waits, id, .. } = &self.0 {
            if let Ok(mut waits) = waits.try_borrow_mut() {
                waits.cancel(*id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            atomic::{AtomicUsize, Ordering},
            Arc,
        },
        task::Wake,
    };

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (Arc::clone(&count), Waker::from(count))
    }

    /// A stub clock: every instant is `base` plus an offset in ns.
    fn at(base: Instant, ns: u64) -> Instant {
        base + Duration::from_nanos(ns)
    }

    #[test]
    fn the_pacer_sleeps_to_the_microsecond_then_spins() {
        let base = Instant::now();
        // 1.3 ms ahead: sleep until exactly SPIN before, not to a ms tick.
        assert_eq!(
            plan(base, at(base, 1_300_000), SPIN),
            Step::Sleep(at(base, 1_300_000) - SPIN)
        );
        assert_eq!(
            plan(base, at(base, 1_000_001), Duration::from_micros(50)),
            Step::Sleep(at(base, 950_001))
        );
        // Within the last stretch: spin, however short.
        assert_eq!(plan(base, at(base, 50_000), SPIN), Step::Spin);
        assert_eq!(plan(base, at(base, 1), SPIN), Step::Spin);
    }

    #[test]
    fn waiters_fire_at_their_deadline_to_the_nanosecond() {
        let base = Instant::now();
        let mut waits = Waits::default();
        let (first, first_waker) = counter();
        let (second, second_waker) = counter();
        let a = waits.add();
        let b = waits.add();
        waits.register(a, at(base, 1_000_001), &first_waker);
        waits.register(b, at(base, 1_000_002), &second_waker);
        // 1 ns before: nobody is due, and the earliest deadline is exact.
        assert_eq!(waits.fire(at(base, 1_000_000)), Some(at(base, 1_000_001)));
        assert_eq!(first.0.load(Ordering::Relaxed), 0);
        assert_eq!(waits.fire(at(base, 1_000_001)), Some(at(base, 1_000_002)));
        assert_eq!(first.0.load(Ordering::Relaxed), 1);
        assert_eq!(second.0.load(Ordering::Relaxed), 0);
        assert_eq!(waits.fire(at(base, 1_000_002)), None);
        assert_eq!(second.0.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn moved_and_cancelled_deadlines_do_not_fire() {
        let base = Instant::now();
        let mut waits = Waits::default();
        let (count, waker) = counter();
        let a = waits.add();
        let b = waits.add();
        waits.register(a, at(base, 1_000), &waker);
        waits.register(a, at(base, 5_000), &waker);
        waits.register(b, at(base, 2_000), &waker);
        waits.cancel(b);
        // The stale entries at 1 and 2 µs are skipped.
        assert_eq!(waits.fire(at(base, 3_000)), Some(at(base, 5_000)));
        assert_eq!(count.0.load(Ordering::Relaxed), 0);
        assert_eq!(waits.fire(at(base, 5_000)), None);
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn an_earlier_deadline_wakes_the_sleeping_pacer() {
        let base = Instant::now();
        let mut waits = Waits::default();
        let (driver, driver_waker) = counter();
        let (_, waker) = counter();
        let a = waits.add();
        waits.driver = Some((driver_waker.clone(), Some(at(base, 10_000))));
        // Later than what the pacer sleeps towards: left asleep.
        waits.register(a, at(base, 20_000), &waker);
        assert_eq!(driver.0.load(Ordering::Relaxed), 0);
        waits.register(a, at(base, 5_000), &waker);
        assert_eq!(driver.0.load(Ordering::Relaxed), 1);
        assert!(waits.driver.is_none());
        // A pacer with nothing to wait for is woken by any deadline.
        waits.driver = Some((driver_waker, None));
        waits.register(a, at(base, 30_000), &waker);
        assert_eq!(driver.0.load(Ordering::Relaxed), 2);
    }
}
