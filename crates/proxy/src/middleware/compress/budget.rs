//! The memory a `compress` handler's compressors may hold at once, all
//! connections together (HAProxy's `maxzlibmem`, for three codings). A
//! response takes a reservation of what its compressor will hold before
//! the compressor is made; when the budget has no room, the response goes
//! uncompressed and is counted. A reservation is what one compressor of
//! those settings was measured to hold at its largest ([`cost`]); while a
//! Brotli or Zstandard compressor runs, its reservation follows what it
//! really holds if that ever grows past it.

use std::sync::{
    atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed},
    Arc,
};

use super::encoder::{Encoder, Levels};
use crate::config::Encoding;

/// Bytes each response's own buffers may add beside its compressor: the
/// output of one flush before it is sent (a read's worth of input).
pub(crate) const OUTPUT_ALLOWANCE: usize = 64 * 1024;

/// One handler's budget.
#[derive(Debug)]
pub(crate) struct Budget {
    cap: usize,
    used: AtomicUsize,
    /// Responses that went uncompressed for want of room.
    pub(crate) refused: AtomicU64,
    /// Reservations that had to grow past what was measured.
    pub(crate) grown: AtomicU64,
}

impl Budget {
    pub(crate) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap,
            used: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
            grown: AtomicU64::new(0),
        })
    }

    /// `bytes` of the budget, if there is room for them.
    pub(crate) fn reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        let taken = self.used.fetch_update(Relaxed, Relaxed, |used| {
            used.checked_add(bytes).filter(|&total| total <= self.cap)
        });
        if taken.is_err() {
            self.refused.fetch_add(1, Relaxed);
            return None;
        }
        Some(Reservation {
            budget: Arc::clone(self),
            bytes,
        })
    }

    /// The bytes reserved now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Relaxed)
    }

    pub(crate) fn cap(&self) -> usize {
        self.cap
    }
}

/// Part of a budget, given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Reservation {
    /// Grows the reservation to `bytes` when a compressor holds more than
    /// it was measured to (taken even past the cap: the memory is in use;
    /// the next responses see it).
    pub(crate) fn follow(&mut self, bytes: usize) {
        if bytes > self.bytes {
            self.budget.used.fetch_add(bytes - self.bytes, Relaxed);
            self.budget.grown.fetch_add(1, Relaxed);
            self.bytes = bytes;
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Relaxed);
    }
}

/// What one compressor of `encoding` with `levels` holds at its largest,
/// plus [`OUTPUT_ALLOWANCE`]. gzip's is zlib-rs's one allocation (its
/// layout: deflate.rs `DeflateAllocOffsets`), known from the settings;
/// Brotli's and Zstandard's are measured, once per handler, by running
/// one compressor over a sample longer than its window (their sizes
/// depend on the level in ways no formula here would follow).
pub(crate) fn cost(encoding: Encoding, levels: &Levels) -> usize {
    let measured = match encoding {
        Encoding::Gzip => gzip_bytes(levels.gzip.window_bits, levels.gzip.memory_level),
        Encoding::Br | Encoding::Zstd => measure(encoding, levels),
    };
    measured + OUTPUT_ALLOWANCE
}

/// zlib-rs's deflate state for a window of 2^`window_bits` and
/// `memory_level`: the window twice, the chain (`u16` a position), the
/// hash heads (65,536 `u16`, whatever the level), the pending buffer (4
/// bytes a symbol) and the symbol buffer (3), 2^(`memory_level` + 6)
/// symbols, each part aligned to 64 bytes; and the state itself, at most
/// 4 KiB (the margin a test measures against).
pub(crate) fn gzip_bytes(window_bits: u8, memory_level: u8) -> usize {
    let window = 1usize << window_bits;
    let symbols = 1usize << (memory_level + 6);
    2 * window + 2 * window + 65_536 * 2 + 4 * symbols + 3 * symbols + 6 * 64 + 4096
}

/// The most a Brotli or Zstandard compressor held over a sample (flushed
/// each 16 KiB, as a streamed response is): twice its window for Brotli,
/// whose ring buffer grows as input comes; one byte for Zstandard, which
/// sizes everything for its window at the first call.
fn measure(encoding: Encoding, levels: &Levels) -> usize {
    let sample_len = match encoding {
        Encoding::Br => 2 * (1usize << levels.br.window_bits) + 16 * 1024,
        _ => 1,
    };
    let Ok(mut encoder) = Encoder::new(encoding, levels, None) else {
        return 0;
    };
    let sample = sample(sample_len);
    let mut out = Vec::new();
    let mut most = encoder.memory();
    for chunk in sample.chunks(16 * 1024) {
        out.clear();
        if encoder.flush(chunk, &mut out).is_err() {
            break;
        }
        most = most.max(encoder.memory());
    }
    if let Encoder::Br(state) = &encoder {
        most = most.max(state.m8.peak);
    }
    most
}

/// Text that compresses as JSON does: repeated keys, varying values.
pub(crate) fn sample(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut i = 0u64;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let tag = ["cat", "dog", "bird"][(x % 3) as usize];
        let line = format!(
            "{{\"id\":{i},\"name\":\"pet{}\",\"tag\":\"{tag}\",\"weight\":{}}},",
            x % 1000,
            x % 100_000
        );
        out.extend_from_slice(line.as_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}
