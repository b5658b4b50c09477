//! A realistic run for the tests, kept as the results.json it would have
//! written (fixture.json): all nine groups and the four runtimes groups,
//! every system, the sweeps, cold and warm phases, sluice's balancing
//! policies as systems, idle memory, notes, a row with errors (`haproxy ->
//! petstore`: read 10, http 2), a row without process figures (`haproxy
//! TLS listener`) and runtimes rows whose users timed out.
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
