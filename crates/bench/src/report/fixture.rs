//! A realistic run for the tests, kept as the results.json it would have
//! written (fixture.json): all nine groups and the four runtimes groups,
//! every system, the sweeps, cold and warm phases, sluice's balancing
//! policies as systems, idle memory, notes, a row with errors (`haproxy ->
//! petstore`: read 10, http 2), a row without process figures (`haproxy
//! TLS listener`) and runtimes rows whose users timed out.
//!
//! Every load row accounts for its requests (sent, carried in, lost,
//! unanswered at the end: a closed loop's connections, a users row's
//! waiting users), the saturating groups' rows have drain records, and the
//! two Spring MVC rows at 5,000 users, whose 10 s windows are shorter
//! than their latency, are not comparable.
//!
//! Each load row has three rounds at 0.97, 1 and 1.02 times its
//! throughput (its latencies divided by the same factors) and the middle
//! round as its figures, so that the spreads and the rounds that agree
//! with a verdict have rounds that differ to count.

use crate::results::Results;

/// fixture.json, read.
pub(crate) fn fixture() -> Results {
    serde_json::from_str(include_str!("fixture.json")).expect("fixture.json is a results.json")
}
