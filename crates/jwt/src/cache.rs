//! A bounded, sharded cache of verified tokens.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::verified::Verified;

const SHARDS: usize = 16;

/// Remembers tokens that passed verification so a client reusing its token
/// costs a hash and a lookup instead of a signature check.
///
/// Entries are keyed by a fast seeded 64-bit hash of the token, and the whole
/// token is stored and compared on every hit, so a different token can never
/// be answered from another's entry. An entry is served only while the key
/// set that verified it is current and `now < exp` (and within the cache's
/// maximum TTL); nothing is ever cached past `exp`. Each of the 16 shards is
/// a `Mutex<HashMap>` holding at most `capacity / 16` entries; a full shard
/// first drops its expired entries, then an arbitrary one.
pub struct VerifiedCache {
    shards: Box<[Mutex<Shard>]>,
    hasher: ahash::RandomState,
    per_shard: usize,
    max_ttl: u64,
}

struct Shard {
    map: HashMap<u64, Entry, BuildHasherDefault<PassThrough>>,
    /// The last second a full purge found nothing to drop, so a full shard
    /// is scanned at most once per second.
    purged_at: u64,
}

struct Entry {
    token: Box<str>,
    key_set: u64,
    valid_until: u64,
    verified: Arc<Verified>,
}

/// The map keys are already hashes; hashing them again would be waste.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl VerifiedCache {
    /// A cache of about `capacity` tokens (rounded up to a multiple of 16),
    /// each served for at most `max_ttl_secs` after it was verified.
    pub fn new(capacity: usize, max_ttl_secs: u64) -> VerifiedCache {
        let per_shard = capacity.div_ceil(SHARDS).max(1);
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    map: HashMap::default(),
                    purged_at: 0,
                })
            })
            .collect();
        VerifiedCache {
            shards,
            hasher: ahash::RandomState::new(),
            per_shard,
            max_ttl: max_ttl_secs,
        }
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        // Bits 32.. pick the shard; the map uses the low bits and the top 7.
        let index = (hash >> 32) as usize % SHARDS;
        // A panic while holding the lock cannot leave an entry half-written
        // (every mutation is a single insert or remove), so poison is ignored.
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached verification of exactly `token`, if it was made with key
    /// set `key_set` and is still valid at `now`.
    pub(crate) fn get(&self, token: &str, key_set: u64, now: u64) -> Option<Arc<Verified>> {
        let hash = self.hasher.hash_one(token);
        let mut shard = self.shard(hash);
        let entry = shard.map.get(&hash)?;
        if &*entry.token != token {
            return None;
        }
        if entry.key_set == key_set && now < entry.valid_until {
            return Some(Arc::clone(&entry.verified));
        }
        shard.map.remove(&hash);
        None
    }

    /// Remembers a verification made with key set `key_set` at `now`, until
    /// `exp` (exclusive) or the maximum TTL, whichever is first.
    pub(crate) fn insert(
        &self,
        token: &str,
        key_set: u64,
        verified: Arc<Verified>,
        exp: Option<u64>,
        now: u64,
    ) {
        let ttl_end = now.saturating_add(self.max_ttl);
        let valid_until = exp.map_or(ttl_end, |exp| exp.min(ttl_end));
        if valid_until <= now {
            return;
        }
        let hash = self.hasher.hash_one(token);
        let mut shard = self.shard(hash);
        if shard.map.len() >= self.per_shard && !shard.map.contains_key(&hash) {
            if shard.purged_at != now {
                shard.map.retain(|_, entry| now < entry.valid_until);
                if shard.map.len() >= self.per_shard {
                    shard.purged_at = now;
                }
            }
            if shard.map.len() >= self.per_shard {
                if let Some(&victim) = shard.map.keys().next() {
                    shard.map.remove(&victim);
                }
            }
        }
        shard.map.insert(
            hash,
            Entry {
                token: token.into(),
                key_set,
                valid_until,
                verified,
            },
        );
    }

    /// The number of cached tokens (including expired ones not yet dropped).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).map.len())
            .sum()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most tokens the cache holds.
    pub fn capacity(&self) -> usize {
        self.per_shard * SHARDS
    }

    /// Forgets everything (e.g. after revoking a token out of band).
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            shard
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .map
                .clear();
        }
    }
}

impl fmt::Debug for VerifiedCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifiedCache")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("max_ttl", &self.max_ttl)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Algorithm;

    fn verified() -> Arc<Verified> {
        Arc::new(Verified {
            claims: serde_json::Map::new(),
            expires_at: None,
            not_before: None,
            algorithm: Algorithm::HS256,
            key_id: None,
        })
    }

    #[test]
    fn a_colliding_hash_never_serves_another_token() {
        let cache = VerifiedCache::new(16, 300);
        let hash_b = cache.hasher.hash_one("token-b");
        // Simulate a 64-bit collision: token A's entry filed under B's hash.
        let entry = Entry {
            token: "token-a".into(),
            key_set: 1,
            valid_until: 100,
            verified: verified(),
        };
        cache.shard(hash_b).map.insert(hash_b, entry);
        assert!(cache.get("token-b", 1, 0).is_none());
    }

    #[test]
    fn entries_are_tied_to_their_key_set_and_expiry() {
        let cache = VerifiedCache::new(16, 300);
        cache.insert("token", 1, verified(), Some(100), 0);
        assert!(cache.get("token", 1, 99).is_some());
        assert!(
            cache.get("token", 2, 99).is_none(),
            "served for another key set"
        );
        cache.insert("token", 1, verified(), Some(100), 0);
        assert!(cache.get("token", 1, 100).is_none(), "served at exp");
        cache.insert("late", 1, verified(), Some(100), 100);
        assert!(cache.is_empty(), "cached at or after exp");
    }

    #[test]
    fn full_shards_evict() {
        let cache = VerifiedCache::new(1, 300);
        for i in 0..1000 {
            cache.insert(&format!("token-{i}"), 1, verified(), None, 0);
        }
        assert!(cache.len() <= SHARDS);
        assert_eq!(cache.capacity(), SHARDS);
    }
}
