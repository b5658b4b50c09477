//! The decoder's dynamic table (RFC 7541 2.3.2, 4): entries newest first
//! by index, each counted as its name and value plus 32 bytes, evicted
//! oldest first past the table's size. Their bytes lie back to back in one
//! buffer; eviction moves its start, and the buffer is compacted once the
//! evicted part is larger than the live one, so no entry is an allocation
//! of its own and every entry is one slice.

use std::collections::VecDeque;

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Offset of its bytes from the start of the live part of `bytes`.
    start: usize,
    name: usize,
    value: usize,
}

/// The dynamic table of one HPACK decoder.
#[derive(Debug, Default)]
pub(crate) struct Table {
    bytes: Vec<u8>,
    /// Where the live bytes begin in `bytes`.
    live: usize,
    /// Oldest first.
    entries: VecDeque<Entry>,
    size: usize,
    max: usize,
}

/// The size RFC 7541 4.1 counts for an entry.
pub(crate) fn entry_size(name: usize, value: usize) -> usize {
    name + value + 32
}

impl Table {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            ..Self::default()
        }
    }

    /// The table's size now, in RFC 7541's count.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// A new maximum size (a dynamic table size update): entries that no
    /// longer fit are evicted.
    pub(crate) fn set_max(&mut self, max: usize) {
        self.max = max;
        self.evict_to(max);
    }

    /// Entry `index` (0 = the newest): its name and value.
    pub(crate) fn get(&self, index: usize) -> Option<(&[u8], &[u8])> {
        let at = self.entries.len().checked_sub(index + 1)?;
        let entry = self.entries[at];
        let start = self.live + entry.start;
        let mid = start + entry.name;
        Some((&self.bytes[start..mid], &self.bytes[mid..mid + entry.value]))
    }

    /// Inserts a field (RFC 7541 4.4): older entries are evicted to make
    /// room; a field larger than the whole table empties it and is not kept.
    pub(crate) fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = entry_size(name.len(), value.len());
        if size > self.max {
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max - size);
        let start = self.bytes.len() - self.live;
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(value);
        self.entries.push_back(Entry {
            start,
            name: name.len(),
            value: value.len(),
        });
        self.size += size;
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            let Some(oldest) = self.entries.pop_front() else {
                break;
            };
            self.size -= entry_size(oldest.name, oldest.value);
        }
        // The live bytes begin at the oldest entry left.
        let first = self
            .entries
            .front()
            .map_or(self.bytes.len() - self.live, |e| e.start);
        if first > 0 {
            self.live += first;
            for entry in &mut self.entries {
                entry.start -= first;
            }
        }
        let live_len = self.bytes.len() - self.live;
        if self.live > live_len {
            self.bytes.drain(..self.live);
            self.live = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_first_and_eviction_by_size() {
        // Room for two entries of 2 + 2 + 32 bytes.
        let mut table = Table::new(72);
        table.insert(b"aa", b"11");
        table.insert(b"bb", b"22");
        assert_eq!(table.get(0), Some((&b"bb"[..], &b"22"[..])));
        assert_eq!(table.get(1), Some((&b"aa"[..], &b"11"[..])));
        table.insert(b"cc", b"33");
        assert_eq!(table.entries.len(), 2);
        assert_eq!(table.get(1), Some((&b"bb"[..], &b"22"[..])));
        assert_eq!(table.get(2), None);
        assert_eq!(table.size(), 72);
        // Too large for the table: it empties.
        table.insert(&[b'x'; 41], b"");
        assert_eq!((table.entries.len(), table.size()), (0, 0));
        table.insert(b"dd", b"44");
        table.set_max(0);
        assert_eq!(table.entries.len(), 0);
    }

    #[test]
    fn many_inserts_keep_the_buffer_bounded() {
        let mut table = Table::new(4096);
        for i in 0..10_000u32 {
            let value = i.to_string();
            table.insert(b"x-counter", value.as_bytes());
            assert_eq!(table.get(0).map(|(_, v)| v), Some(value.as_bytes()));
        }
        assert!(table.bytes.len() <= 2 * 4096, "{}", table.bytes.len());
    }
}
