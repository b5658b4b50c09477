//! The pacer's logic on a stub clock: instants are a base plus offsets.

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
    let spin = Duration::from_micros(50);
    // 1.3 ms ahead: sleep until exactly 50 µs before, not to a ms tick.
    assert_eq!(
        plan(base, at(base, 1_300_000), spin),
        Step::Sleep(at(base, 1_250_000))
    );
    assert_eq!(
        plan(base, at(base, 1_000_001), spin),
        Step::Sleep(at(base, 950_001))
    );
    // Within the last stretch: spin, however short.
    assert_eq!(plan(base, at(base, 50_000), spin), Step::Spin);
    assert_eq!(plan(base, at(base, 1), spin), Step::Spin);
}

#[test]
fn the_spin_margin_follows_how_late_the_timer_wakes() {
    // Deadlines 1 ms apart (1,000 req/s): the spin may take up to 200 µs.
    let mut spin = Spin::new(Duration::from_millis(1));
    let us = Duration::from_micros;
    // A VM whose idle vCPU takes 120 µs to wake: the margin rises to it.
    for _ in 0..10 {
        spin.woke(us(120));
    }
    assert!((us(125)..us(135)).contains(&spin.margin()), "{spin:?}");
    // One late wake-up in a hundred is not enough to keep it there...
    for round in 0..20 {
        spin.woke(if round % 10 == 0 { us(150) } else { us(20) });
    }
    for _ in 0..400 {
        spin.woke(us(20));
    }
    // ...it comes back down to what the timer does now, never below the floor.
    assert!(spin.margin() <= us(31), "{spin:?}");
    for _ in 0..1000 {
        spin.woke(Duration::ZERO);
    }
    assert_eq!(spin.margin(), Spin::FLOOR);
    spin.woke(Duration::from_secs(1));
    assert!(spin.margin() <= Spin::CEILING);
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

#[test]
fn the_spin_takes_at_most_a_third_of_the_time_between_deadlines() {
    let us = Duration::from_micros;
    // 5,000 req/s: deadlines 200 µs apart, slow wake-ups or not.
    let mut spin = Spin::new(us(200));
    for _ in 0..10 {
        spin.woke(us(150));
    }
    assert_eq!(spin.margin(), us(200) / 3);
    // 20,000 req/s and above: the floor, where the pacer spins anyway.
    assert_eq!(Spin::new(us(50)).margin(), Spin::FLOOR);
}

#[test]
fn under_stages_the_spin_cap_follows_the_spacing_of_deadlines() {
    let us = Duration::from_micros;
    // Starting at 10 ms between deadlines (100 req/s): the cap is the ceiling.
    let mut spin = Spin::learning(Duration::from_millis(10));
    for _ in 0..10 {
        spin.woke(us(150));
    }
    assert!(spin.margin() > us(150), "{spin:?}");
    // The rate rises to 10,000/s: 100 µs apart, a third of it at most.
    for _ in 0..200 {
        spin.spaced(us(100));
    }
    assert!(spin.margin() <= us(34), "{spin:?}");
    // A constant rate keeps its cap whatever the gaps.
    let mut fixed = Spin::new(Duration::from_millis(10));
    for _ in 0..10 {
        fixed.woke(us(150));
    }
    for _ in 0..200 {
        fixed.spaced(us(100));
    }
    assert!(fixed.margin() > us(150), "{fixed:?}");
}
