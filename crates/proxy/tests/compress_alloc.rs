//! The `compress` handler reserves, for each gzip compressor, what
//! zlib-rs allocates for it: computed from the window and memory level
//! (middleware/compress/budget.rs), never measured at run time (zlib-rs
//! takes no allocator of ours). This binary counts every allocation (its
//! own global allocator) while one compressor is made and runs, and
//! checks, for every window and memory level allowed, that the
//! reservation covers it and is no more than 5% above it.
//!
//! No test harness (`harness = false`), as `normalize_alloc.rs`: the
//! counter sees every thread, and libtest's own would be counted.

#![allow(clippy::unwrap_used)]

use std::alloc::System;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    let pattern = b"{\"id\":1,\"name\":\"catten\",\"tag\":\"cat\"}";
    let body: Vec<u8> = (0..256 * 1024usize)
        .map(|i| pattern[i % pattern.len()] ^ (i % 7) as u8)
        .collect();
    let mut checked = 0;
    for window_bits in 9..=15u8 {
        for memory_level in 1..=9u8 {
            let reserved = proxy::measured::gzip_reservation(window_bits, memory_level);
            let region = Region::new(GLOBAL);
            let mut deflate = zlib_rs::Deflate::new_with_config(zlib_rs::DeflateConfig {
                level: 6,
                method: zlib_rs::Method::Deflated,
                window_bits: 16 + i32::from(window_bits),
                mem_level: i32::from(memory_level),
                strategy: zlib_rs::Strategy::Default,
            });
            let mut out = vec![0u8; 512 * 1024];
            let before = region.change();
            for chunk in body.chunks(16 * 1024) {
                deflate
                    .compress(chunk, &mut out, zlib_rs::DeflateFlush::SyncFlush)
                    .unwrap();
            }
            let stats = region.change();
            // What the compressor holds: everything allocated but the output buffer.
            let held = stats.bytes_allocated - stats.bytes_deallocated - out.len();
            assert_eq!(
                stats.bytes_allocated, before.bytes_allocated,
                "zlib-rs allocated while compressing (window {window_bits}, level {memory_level})"
            );
            assert!(
                held <= reserved,
                "window {window_bits}, memory level {memory_level}: holds {held}, reserved {reserved}"
            );
            assert!(
                reserved * 100 <= held * 105,
                "window {window_bits}, memory level {memory_level}: reserved {reserved} for {held}"
            );
            drop(deflate);
            checked += 1;
        }
    }
    println!("compress_alloc: {checked} gzip settings, each reservation covers what zlib-rs holds");
}
