//! Normalisation runs on every request, so a request that is already in
//! normal form must cost one scan and no allocation (issue 15). This test
//! binary counts every allocation (its own global allocator) and checks
//! that admitting such requests makes none, over both target forms the
//! fast path covers; the requests that do need a rewrite are counted too,
//! which shows the counter sees what normalisation allocates.
//!
//! The counter sees every thread's allocations, so this binary has no test
//! harness (`harness = false` in Cargo.toml): libtest's main thread, still
//! doing its bookkeeping after it has spawned the test's thread, was
//! counted as 4 allocations once on a loaded machine. `main` runs the
//! check on the only thread there is.

#![allow(clippy::unwrap_used)]

use std::{alloc::System, hint::black_box};

use http::Method;
use proxy::{
    config::PathSettings,
    wire::normalize::{self, Normal, Raw},
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// A request head's target and Host as normalisation reads them.
fn raw<'a>(target: &'a str, host: &'a str) -> Raw<'a> {
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query.as_bytes())),
        None => (target, None),
    };
    Raw {
        method: &Method::GET,
        target: target.as_bytes(),
        path,
        query,
        host: Some(host),
        secure: false,
    }
}

/// Allocations made while admitting each request `rounds` times.
fn allocations(requests: &[(&str, &str)], paths: &PathSettings, rounds: usize) -> usize {
    let region = Region::new(GLOBAL);
    for _ in 0..rounds {
        for &(target, host) in requests {
            let normal = normalize::request(&raw(target, host), paths).unwrap();
            assert!(matches!(normal, Normal::Request(_)));
            black_box(normal);
        }
    }
    region.change().allocations
}

fn main() {
    an_already_normal_request_allocates_nothing();
    println!("normalize_alloc: an already normal request allocates nothing ... ok");
}

fn an_already_normal_request_allocates_nothing() {
    let paths = PathSettings::default();
    let normal = [
        ("/v1/pets", "api.example"),
        ("/v1/pets?limit=10&offset=20", "api.example:8080"),
        ("/", "127.0.0.1"),
        ("/static/app-1.2.3.min.js", "10.0.0.1:8443"),
        ("/files/caf%C3%A9%20menu.pdf", "cdn.example"),
        ("/~user/x:y@z!$&'()*+,=", "h"),
    ];
    // Warm-up: anything made once per thread (none today) is not per request.
    let _ = allocations(&normal, &paths, 1);
    assert_eq!(allocations(&normal, &paths, 1000), 0);

    // A normal path with `;` parameters is not copied, but what routes
    // match (the path without them) is made: one allocation.
    assert_eq!(allocations(&[("/a;jsessionid=1/b", "h")], &paths, 100), 100);
    // So is the normal form of an IPv6 literal (the fast path takes names
    // and IPv4 addresses only).
    assert_eq!(allocations(&[("/", "[::1]:8443")], &paths, 100), 100);

    // What is not normal is rewritten, and that allocates: the counter sees it.
    let rewritten = [
        ("/v1//pets", "h"),
        ("/%76%31/pets", "h"),
        ("/v1/pets/./x/../", "h"),
        ("/v1/pets", "API.example."),
    ];
    for request in rewritten {
        assert!(allocations(&[request], &paths, 1) > 0, "{request:?}");
    }
}
