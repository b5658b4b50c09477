//! The balancer's decisions, without sockets: weights, hashing, sticky
//! cookies, passive ejection and its cap, active checks, slow start and
//! the policies that avoid a slow host.

use super::*;
use crate::wire::fields::Fields;
use http::{HeaderMap, HeaderValue, Method};

const SECOND: u64 = 1_000_000_000;
const H0: HostId = HostId::new(0);
const H1: HostId = HostId::new(1);

fn balancer(yaml: &str) -> Balancer {
    let settings: UpstreamSettings = serde_saphyr::from_str(yaml).unwrap();
    let hosts: Vec<(String, u32)> = settings
        .hosts
        .iter()
        .map(|h| (h.value.url.clone(), h.value.weight))
        .collect();
    Balancer::new(&settings, &hosts, 2).unwrap()
}

fn hosts(n: usize) -> String {
    hosts_with(n, "")
}

/// `n` hosts, with `health` keys added to the test's.
fn hosts_with(n: usize, health: &str) -> String {
    let list: Vec<String> = (0..n)
        .map(|i| format!("\"http://10.0.0.{i}:80\""))
        .collect();
    format!(
        "hosts: [{}]\nhealth: {{ failures: 2, backoff: 10s{health} }}\n",
        list.join(", ")
    )
}

fn pick_with(b: &Balancer, map: &HeaderMap, now: u64) -> Option<Pick> {
    let request = Outgoing {
        method: &Method::GET,
        path: b"/",
        query: None,
        host: None,
        fields: Fields::Map(map),
    };
    b.pick(|| (request, "127.0.0.1".parse().unwrap()), now)
}

fn pick(b: &Balancer, now: u64) -> Option<usize> {
    pick_with(b, &HeaderMap::new(), now).map(|p| p.host.index())
}

fn shares(b: &Balancer, n: usize, picks: usize) -> Vec<f64> {
    let mut counts = vec![0usize; n];
    for _ in 0..picks {
        counts[pick(b, 0).unwrap()] += 1;
    }
    counts.iter().map(|&c| c as f64 / picks as f64).collect()
}

#[test]
fn round_robin_over_all_hosts() {
    let b = balancer(&hosts(3));
    let picks: Vec<_> = (0..6).map(|_| pick(&b, 0).unwrap()).collect();
    assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
}

#[test]
fn weights_one_to_three_give_25_75_with_every_policy() {
    for policy in ["round_robin", "random", "least_request", "least_time"] {
        let b = balancer(&format!(
            "balance: {policy}\nhosts: [ {{ url: \"http://a:1\", weight: 1 }}, {{ url: \"http://b:1\", weight: 3 }} ]"
        ));
        let share = shares(&b, 2, 10_000)[0];
        assert!((0.20..=0.30).contains(&share), "{policy}: {share}");
    }
}

#[test]
fn failing_hosts_are_ejected_then_return() {
    let b = balancer(&hosts(2));
    assert!(!b.failure(H1, false, SECOND));
    assert!(b.failure(H1, false, SECOND));
    assert_eq!(b.healthy(2 * SECOND), 1);
    assert!((0..4).all(|_| pick(&b, 2 * SECOND) == Some(0)));
    assert_eq!(b.pick_after(H0, 2 * SECOND), None);
    assert_eq!(b.view(H1, 2 * SECOND).health, HostHealth::Ejected);
    // Back after the backoff.
    assert_eq!(b.healthy(12 * SECOND), 2);
    let picks: Vec<_> = (0..2).map(|_| pick(&b, 12 * SECOND).unwrap()).collect();
    assert!(picks.contains(&1));
}

#[test]
fn ejection_never_takes_the_last_hosts_past_the_cap() {
    // One host: a saturated backend that times out must keep its traffic.
    let b = balancer(&hosts(1));
    for _ in 0..10 {
        assert!(!b.failure(H0, false, 0));
    }
    assert_eq!(pick(&b, SECOND), Some(0));
    // A refused connection is not capped: the host is not there (and
    // without a panic threshold, nothing is left to pick).
    let b = balancer(&hosts_with(1, ", panic_threshold: 0"));
    b.failure(H0, true, 0);
    assert!(b.failure(H0, true, 0));
    assert_eq!(pick(&b, SECOND), None);
    // Four hosts at 50%: two may be out, not three.
    let b = balancer(&hosts(4));
    let ejected = (0..4)
        .filter(|&h| {
            b.failure(HostId::new(h), false, 0);
            b.failure(HostId::new(h), false, 0)
        })
        .count();
    assert_eq!(ejected, 2);
    assert_eq!(b.healthy(1), 2);
}

#[test]
fn a_success_resets_the_count() {
    let b = balancer(&hosts(2));
    assert!(!b.failure(H0, false, 0));
    b.success(H0, Duration::from_millis(1), || 0);
    assert!(!b.failure(H0, false, 0), "the success reset the count");
    assert!(b.failure(H0, false, 0));
}

#[test]
fn active_checks_take_a_host_out_after_fall_and_back_after_rise() {
    let b = balancer(&hosts(2));
    let (rise, fall) = (2, 3);
    assert_eq!(b.checked(H1, false, (rise, fall), 0), None);
    assert_eq!(b.checked(H1, false, (rise, fall), 0), None);
    assert_eq!(b.checked(H1, false, (rise, fall), 0), Some(false));
    assert_eq!(b.view(H1, 0).health, HostHealth::Down);
    assert!((0..10).all(|_| pick(&b, SECOND) == Some(0)));
    // A pass between failures restarts the count.
    assert_eq!(b.checked(H1, true, (rise, fall), SECOND), None);
    assert_eq!(b.checked(H1, false, (rise, fall), SECOND), None);
    assert_eq!(b.checked(H1, true, (rise, fall), SECOND), None);
    assert_eq!(b.checked(H1, true, (rise, fall), 2 * SECOND), Some(true));
    assert_eq!(b.healthy(2 * SECOND), 2);
    // Passive ejection does not end an active check's verdict.
    b.checked(H0, false, (1, 1), 0);
    assert!(!b.failure(H0, false, 0) && !b.failure(H0, false, 0));
    assert_eq!(b.view(H0, 0).health, HostHealth::Down);
}

#[test]
fn slow_start_ramps_a_returning_host_up() {
    let b = balancer(&format!("{}slow_start: 10s\n", hosts(2)));
    b.checked(H1, false, (1, 1), 0);
    b.checked(H1, true, (1, 1), 100 * SECOND);
    let share_at = |seconds: u64| {
        let picks = 4_000;
        let now = 100 * SECOND + seconds * SECOND;
        let h1 = (0..picks).filter(|_| pick(&b, now) == Some(1)).count();
        h1 as f64 / picks as f64
    };
    let (early, middle, done) = (share_at(1), share_at(5), share_at(20));
    // Its turns in the cycle are taken with probability elapsed/slow_start
    // (at least 10%): a half share at 5 s of 10 s.
    assert!(early < 0.1, "1 s in: {early}");
    assert!((0.2..0.3).contains(&middle), "5 s in: {middle}");
    assert!((0.45..0.55).contains(&done), "after: {done}");
    assert_eq!(b.view(H1, 101 * SECOND).health, HostHealth::Ramping);
}

#[test]
fn hash_sends_a_key_to_one_host_and_falls_back_without_it() {
    let b = balancer(&format!(
        "{}balance: hash\nhash: {{ key: \"header:x-user\" }}\n",
        hosts(5)
    ));
    let mut map = HeaderMap::new();
    map.insert("x-user", HeaderValue::from_static("ann"));
    let first = pick_with(&b, &map, 0).unwrap().host;
    assert!((0..50).all(|_| pick_with(&b, &map, 0).unwrap().host == first));
    // Its host ejected: another host, and back when it returns.
    b.failure(first, false, 0);
    b.failure(first, false, 0);
    let moved = pick_with(&b, &map, SECOND).unwrap().host;
    assert_ne!(moved, first);
    assert_eq!(pick_with(&b, &map, 20 * SECOND).unwrap().host, first);
    let spread: std::collections::HashSet<_> = (0..5).map(|_| pick(&b, 20 * SECOND)).collect();
    assert_eq!(spread.len(), 5, "no key: round robin");
}

#[test]
fn bounded_load_moves_keys_off_a_busy_host() {
    let b = balancer(&format!(
        "{}balance: hash\nhash: {{ key: path, bounded_load: 1.25 }}\n",
        hosts(4)
    ));
    assert!(b.tracks_in_flight());
    let first = pick(&b, 0).unwrap();
    for _ in 0..10 {
        b.begin(HostId::new(first));
    }
    assert_ne!(pick(&b, 0).unwrap(), first);
    for _ in 0..10 {
        b.end(HostId::new(first));
    }
    assert_eq!(pick(&b, 0).unwrap(), first);
}

#[test]
fn sticky_cookie_pins_and_forged_or_down_hosts_get_a_fresh_pick() {
    let b = balancer(&format!("{}sticky: {{ cookie: lb, key: k }}\n", hosts(3)));
    let first = pick_with(&b, &HeaderMap::new(), 0).unwrap();
    assert!(first.set_cookie);
    let set = b.sticky_cookie(first.host).unwrap().to_str().unwrap();
    let cookie = set.split(';').next().unwrap().to_string();
    let mut map = HeaderMap::new();
    map.insert("cookie", HeaderValue::from_str(&cookie).unwrap());
    for _ in 0..10 {
        let again = pick_with(&b, &map, 0).unwrap();
        assert_eq!((again.host, again.set_cookie), (first.host, false));
    }
    map.insert(
        "cookie",
        HeaderValue::from_static("lb=00112233445566778899aabbccddeeff"),
    );
    assert!(
        pick_with(&b, &map, 0).unwrap().set_cookie,
        "forged: a fresh pick"
    );
    map.insert("cookie", HeaderValue::from_str(&cookie).unwrap());
    b.checked(first.host, false, (1, 1), 0);
    let fresh = pick_with(&b, &map, 0).unwrap();
    assert_ne!(fresh.host, first.host, "its host is down");
    assert!(fresh.set_cookie);
}

#[test]
fn least_time_and_least_request_avoid_a_slow_host() {
    for policy in ["least_request", "least_time"] {
        let b = balancer(&format!("{}balance: {policy}\n", hosts(5)));
        // Host 0 answers in 40 ms, the others in 0.2 ms; requests stay in
        // flight for as long as their host takes. Simulated in 0.1 ms steps.
        let mut busy: Vec<(u64, HostId)> = Vec::new();
        let mut slow = 0;
        let step = 100_000;
        for tick in 0..20_000u64 {
            let now = SECOND + tick * step;
            busy.retain(|&(done, host)| {
                if done <= now {
                    b.end(host);
                    let rtt = if host == H0 { 40_000_000 } else { 200_000 };
                    b.success(host, Duration::from_nanos(rtt), || now);
                }
                done > now
            });
            // 32 clients: a new request whenever one finished.
            while busy.len() < 32 {
                let host = pick(&b, now).map(HostId::new).unwrap();
                b.begin(host);
                let rtt = if host == H0 { 40_000_000 } else { 200_000 };
                slow += usize::from(host == H0);
                busy.push((now + rtt, host));
            }
        }
        let total = 20_000 * 32 / 2;
        assert!(
            slow * 100 < total,
            "{policy}: {slow} requests to the slow host"
        );
    }
}

#[test]
fn below_the_panic_threshold_every_host_takes_traffic() {
    // One host, refused and ejected: still tried (0% in is below 50%).
    let b = balancer(&hosts(1));
    b.failure(H0, true, 0);
    assert!(b.failure(H0, true, 0));
    assert_eq!(b.view(H0, SECOND).health, HostHealth::Ejected);
    assert!(b.panics(SECOND));
    assert_eq!(pick(&b, SECOND), Some(0));
    assert!(!b.is_in(H0, SECOND), "still out by its health");
    // Tried and refused again: out already, not ejected (or logged) again.
    assert!(!b.failure(H0, true, SECOND) && !b.failure(H0, true, SECOND));
    assert_eq!(b.view(H0, SECOND).ejections, 1);

    // Four hosts: two out is 50%, not below; three out is.
    let b = balancer(&hosts(4));
    let eject = |h: usize| {
        b.failure(HostId::new(h), true, 0);
        b.failure(HostId::new(h), true, 0)
    };
    assert!(eject(1) && eject(2));
    assert!(!b.panics(SECOND));
    let picked: std::collections::HashSet<_> = (0..40).map(|_| pick(&b, SECOND)).collect();
    assert_eq!(picked, [Some(0), Some(3)].into());
    assert_eq!(b.pick_after(H0, SECOND), Some(HostId::new(3)));
    assert!(eject(3));
    assert!(b.panics(SECOND));
    let picked: std::collections::HashSet<_> = (0..40).map(|_| pick(&b, SECOND)).collect();
    assert_eq!(picked.len(), 4, "round robin over all four: {picked:?}");
    assert_eq!(b.pick_after(H0, SECOND), Some(H1));
    // Back after the backoff: no panic, the hosts in as before.
    assert!(!b.panics(20 * SECOND));
}

#[test]
fn every_policy_and_active_checks_obey_the_panic_threshold() {
    for policy in [
        "round_robin",
        "random",
        "least_request",
        "least_time",
        "hash\nhash: { key: path }",
    ] {
        let b = balancer(&format!("{}balance: {policy}\n", hosts(2)));
        b.checked(H0, false, (1, 1), 0);
        assert_eq!(pick(&b, SECOND), Some(1), "{policy}: one of two is in");
        b.checked(H1, false, (1, 1), 0);
        assert!(
            pick(&b, SECOND).is_some(),
            "{policy}: both down, both tried"
        );
        assert_eq!(b.healthy(SECOND), 0);
    }
    let off = balancer(&hosts_with(2, ", panic_threshold: 0"));
    off.checked(H0, false, (1, 1), 0);
    off.checked(H1, false, (1, 1), 0);
    assert_eq!(pick(&off, SECOND), None, "0 turns the threshold off");
}
