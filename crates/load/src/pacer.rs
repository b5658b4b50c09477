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
//! and writes go on while it sleeps) until a margin ([`Spin`]) before the
//! earliest one, then yields to the runtime until the deadline has passed
//! (each turn polls the reactor: responses keep being read and timed), and
//! wakes the connections that are due, which send before it sets its next
//! timer. A connection's [`SendTimer`] registers its deadline with the
//! pacer and is ready as soon as the clock has passed it.
//!
//! The users model (think times of a second) keeps Tokio's coarse timer:
//! its latency counts from the actual send. What is due when is
//! `timetable.rs`'s.

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

/// How long before a deadline the pacer stops sleeping and spins: about
/// how late its timer wakes it, learnt as it goes. Waking from a `timerfd`
/// took 20 to 150 µs on the 2-vCPU VMs measured, longer the longer the CPU
/// had been idle (a VM's idle vCPU is descheduled by its host): at 100
/// req/s per thread more than at 5,000. Spinning (yielding to the runtime,
/// which polls its reactor on each turn) through that stretch sends on
/// time; a fixed margin long enough for the slowest wake-ups would spin
/// for nothing at higher rates, one too short leaves requests late. The
/// spin never takes more than a third of the time between two deadlines
/// (`cap`): at 5,000 req/s a margin of 200 µs would cost a core, and the
/// generator's CPU per request is part of what it is judged on.
#[derive(Debug, Clone, Copy)]
struct Spin {
    /// A high quantile (about the 90th percentile) of recent wake-up
    /// delays, in ns: a delay above it raises it by half the excess, one
    /// below lowers it by 1/16 of the gap.
    delay_ns: f64,
    cap: Duration,
    /// With stages the rate moves: the mean time between deadlines is
    /// learnt (in ns) and the cap follows it. `None`: a constant rate.
    spacing_ns: Option<f64>,
}

impl Spin {
    const FLOOR: Duration = Duration::from_micros(20);
    /// A descheduled thread wakes milliseconds late: spinning longer than
    /// this would not help, and would cost a core at 5,000 req/s.
    const CEILING: Duration = Duration::from_micros(200);
    /// Beyond the tracked delay.
    const SLACK: Duration = Duration::from_micros(10);

    /// For deadlines `spacing` apart on average.
    fn new(spacing: Duration) -> Self {
        Self {
            delay_ns: 40_000.0,
            cap: (spacing / 3).clamp(Self::FLOOR, Self::CEILING),
            spacing_ns: None,
        }
    }

    /// For deadlines whose spacing changes (stages): starting at `spacing`.
    fn learning(spacing: Duration) -> Self {
        Self {
            spacing_ns: Some(spacing.as_nanos() as f64),
            ..Self::new(spacing)
        }
    }

    /// Two deadlines in a row were `gap` apart.
    fn spaced(&mut self, gap: Duration) {
        if let Some(spacing) = &mut self.spacing_ns {
            // A moving mean over about 16 deadlines.
            *spacing += (gap.as_nanos() as f64 - *spacing) / 16.0;
            let spacing = Duration::from_nanos(*spacing as u64);
            self.cap = (spacing / 3).clamp(Self::FLOOR, Self::CEILING);
        }
    }

    fn margin(&self) -> Duration {
        (Duration::from_nanos(self.delay_ns as u64) + Self::SLACK).clamp(Self::FLOOR, self.cap)
    }

    /// The timer meant to wake the pacer at some instant woke it `late` after it.
    fn woke(&mut self, late: Duration) {
        let late = late.min(Self::CEILING).as_nanos() as f64;
        if late > self.delay_ns {
            self.delay_ns += (late - self.delay_ns) / 2.0;
        } else {
            self.delay_ns -= (self.delay_ns - late) / 16.0;
        }
    }
}

/// What the pacer does next, at `now`, for the earliest deadline `next`
/// (not yet passed): sleep until `spin` before it, or spin.
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
    /// Waiters were woken since the pacer last looked.
    woken: bool,
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
            self.woken = true;
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
    /// `spacing`: the mean time between two of the thread's deadlines.
    /// `staged`: the rate moves through stages, so the spacing is learnt.
    pub(crate) fn new(
        spacing: Duration,
        staged: bool,
    ) -> io::Result<(Self, impl Future<Output = ()>)> {
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
        let spin = if staged {
            Spin::learning(spacing)
        } else {
            Spin::new(spacing)
        };
        Ok((pacer, drive(waits, alarm, spin)))
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
/// `timerfd` until the spin margin before the next deadline, or spin to it.
async fn drive(waits: Rc<RefCell<Waits>>, alarm: pipe::Receiver, mut spin: Spin) {
    let mut last: Option<Instant> = None;
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
        if last != Some(next) {
            if let Some(gap) = last.and_then(|last| next.checked_duration_since(last)) {
                spin.spaced(gap);
            }
            last = Some(next);
        }
        if std::mem::take(&mut waits.borrow_mut().woken) {
            // The connections just woken send first; the timer is set after.
            tokio::task::yield_now().await;
            continue;
        }
        let now = Instant::now();
        let wake = match plan(now, next, spin.margin()) {
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
        let rang = poll_fn(|cx| {
            if ring(&alarm, cx).is_ready() {
                return Poll::Ready(true);
            }
            let mut waits = waits.borrow_mut();
            if waiting && waits.driver.is_none() {
                return Poll::Ready(false);
            }
            waiting = true;
            waits.driver = Some((cx.waker().clone(), Some(next)));
            Poll::Pending
        })
        .await;
        waits.borrow_mut().driver = None;
        if rang {
            spin.woke(Instant::now().saturating_duration_since(wake));
        }
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
            Ok(_) => {
                // Read again now, while there is time: the `WouldBlock` it
                // gets clears the readiness, which the next wait would
                // otherwise find stale (a wasted read right after a send).
                let _ = alarm.try_read(&mut [0; 8]);
                return Poll::Ready(());
            }
            Err(_) => return Poll::Ready(()),
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
mod tests;
