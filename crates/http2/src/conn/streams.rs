//! The streams of one connection (RFC 9113 5.1): their states as far as
//! the codec keeps them, and their flow-control windows. A stream lives
//! here from its first HEADERS to the moment both directions are closed;
//! the connection remembers only the highest IDs it has seen, so a frame
//! for a stream that is gone is told apart from one for a stream never
//! opened.

use std::collections::HashMap;

/// What the codec keeps of one stream.
#[derive(Debug, Clone)]
pub(crate) struct Stream {
    /// The peer sent END_STREAM (or reset the stream).
    pub recv_closed: bool,
    /// This side sent END_STREAM (or reset the stream).
    pub send_closed: bool,
    /// A final head was received: what follows is body, then trailers.
    pub head_received: bool,
    /// A final head was sent.
    pub head_sent: bool,
    /// Bytes this side may still send (the peer's window for it); may go
    /// below 0 when the peer lowers SETTINGS_INITIAL_WINDOW_SIZE.
    pub send_window: i64,
    /// Bytes the peer may still send before a WINDOW_UPDATE.
    pub recv_window: i64,
    /// Bytes received and released by the application, not yet granted
    /// back by a WINDOW_UPDATE.
    pub recv_released: u32,
    /// The declared body length, and the bytes received so far.
    pub content_length: Option<u64>,
    pub received: u64,
    /// The stream was refused or reset by this side for a fault of the
    /// peer's: it still counts against the concurrency limit until the
    /// application says its work has ended (MadeYouReset).
    pub locally_reset: bool,
    /// A head past the limit was answered 431: the body is dropped.
    pub discard: bool,
    /// Interim (1xx) heads received before the final one.
    pub interim_heads: u8,
}

impl Stream {
    pub(crate) fn new(send_window: u32, recv_window: u32) -> Self {
        Self {
            recv_closed: false,
            send_closed: false,
            head_received: false,
            head_sent: false,
            send_window: i64::from(send_window),
            recv_window: i64::from(recv_window),
            recv_released: 0,
            content_length: None,
            received: 0,
            locally_reset: false,
            discard: false,
            interim_heads: 0,
        }
    }

    /// Both directions are over.
    pub(crate) fn closed(&self) -> bool {
        self.recv_closed && self.send_closed
    }
}

/// A hasher for stream IDs, which are small distinct integers already.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u32(&mut self, n: u32) {
        // Spread the odd IDs over the table's buckets.
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The live streams.
#[derive(Debug, Default)]
pub(crate) struct Streams {
    map: HashMap<u32, Stream, std::hash::BuildHasherDefault<IdHasher>>,
    /// Live streams the peer opened (they count against the limit this
    /// side advertised), and those this side opened.
    pub remote_open: usize,
    pub local_open: usize,
}

impl Streams {
    pub(crate) fn get(&mut self, id: u32) -> Option<&mut Stream> {
        self.map.get_mut(&id)
    }

    pub(crate) fn contains(&self, id: u32) -> bool {
        self.map.contains_key(&id)
    }

    pub(crate) fn insert(&mut self, id: u32, stream: Stream, remote: bool) {
        self.map.insert(id, stream);
        match remote {
            true => self.remote_open += 1,
            false => self.local_open += 1,
        }
    }

    /// Forgets `id` if both of its directions are over (and no reset of
    /// ours waits for the application).
    pub(crate) fn reap(&mut self, id: u32, remote: bool) {
        if self
            .map
            .get(&id)
            .is_some_and(|s| s.closed() && !s.locally_reset)
        {
            self.forget(id, remote);
        }
    }

    pub(crate) fn forget(&mut self, id: u32, remote: bool) {
        if self.map.remove(&id).is_some() {
            match remote {
                true => self.remote_open -= 1,
                false => self.local_open -= 1,
            }
        }
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&u32, &mut Stream)> {
        self.map.iter_mut()
    }
}
