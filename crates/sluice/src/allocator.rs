//! The allocator, and the workspace's one `unsafe` call.
//!
//! mimalloc instead of glibc's malloc: the proxy allocates per stream and
//! per request (HTTP/2 heads, header maps, tasks), and under callgrind
//! glibc's malloc/free were 13% of an HTTP/2 request's instructions; with
//! mimalloc the whole request costs 11% fewer (docs/PERFORMANCE.md, "HTTP/2
//! clients (issue 16)"). Built with `no_thp`: with transparent huge pages
//! its arenas grew RSS in 2 MiB steps (peak 38 MB instead of 28 MB moving
//! 100 MB each way, tests/it/proxy_cli.rs).

/// The global allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Gives the pages this thread freed more than mimalloc's purge delay
/// (1 s) ago back to the system. The proxy calls it once a second on each
/// worker thread (`proxy::Options::worker_tick`).
///
/// Why: mimalloc purges freed pages only when the thread allocates again
/// after the delay, so a proxy that goes quiet after a burst keeps the
/// burst's memory: 8,000 idle HTTP/1.1 connections after one request each
/// kept 1,834 B each, and 2,000 idle HTTP/2 connections 13.5 KB each (their
/// buffers given back a second after their last stream), against about
/// 0.4 KB and 4 KB once the pages are purged. Purging at once instead
/// (`mi_option_purge_delay` 0, set at start-up) cost 40% more CPU per
/// request under load (h2load, 200,000 requests, 16-17 µs against 23-24
/// µs): pages freed between bursts were purged and faulted back in. A call
/// once a second costs nothing measurable and purges only what stayed free
/// for a second. No safe API does it: the `mimalloc` crate exposes only the
/// allocator itself (docs/PERFORMANCE.md, "HTTP/2 codec (issue 27)").
pub(crate) fn give_back_freed_pages() {
    // SAFETY: `mi_collect` takes no pointer and has no precondition: it
    // walks the calling thread's own heap (retired pages, delayed frees)
    // and purges the arena ranges whose purge delay has passed. `false`:
    // not forced, so pages freed less than a second ago stay for reuse.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_collect(false);
    }
}
