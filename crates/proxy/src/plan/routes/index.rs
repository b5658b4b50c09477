//! Where the route table looks a request up, so that its cost depends on
//! the request (its host's labels, its path's segments), not on how many
//! routes there are: routes are filed by host (an exact name, a wildcard
//! suffix, or none), then by the path they match, cut at a segment
//! boundary (an exact path, a prefix, or the literal start of a regex).
//! A lookup probes each group the request's host belongs to, most
//! specific first, and in each the path's buckets.

use std::collections::HashMap;

/// Entries (positions in the table's list), in precedence order, that a
/// path key files.
#[derive(Debug, Default)]
pub(super) struct Bucket {
    /// Exact paths equal to the key.
    pub exact: Vec<u32>,
    /// Regex paths whose literal start is the key.
    pub regex: Vec<u32>,
    /// Prefixes equal to the key (without a trailing `/`).
    pub prefix: Vec<u32>,
}

/// The routes of one host group, by path key.
#[derive(Debug, Default)]
pub(super) struct PathIndex {
    buckets: HashMap<Box<str>, Bucket, ahash::RandomState>,
    /// Any regex route in it (the regex pass is skipped otherwise).
    has_regex: bool,
}

/// Where an entry goes in a [`PathIndex`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Filed {
    Exact,
    Regex,
    Prefix,
}

impl PathIndex {
    pub(super) fn file(&mut self, key: &str, kind: Filed, entry: u32) {
        let bucket = self.buckets.entry(key.into()).or_default();
        match kind {
            Filed::Exact => bucket.exact.push(entry),
            Filed::Regex => {
                bucket.regex.push(entry);
                self.has_regex = true;
            }
            Filed::Prefix => bucket.prefix.push(entry),
        }
    }

    /// Sorts each bucket's lists by `rank`.
    pub(super) fn sort<K: Ord>(&mut self, rank: impl Fn(u32) -> K + Copy) {
        for bucket in self.buckets.values_mut() {
            for list in [&mut bucket.exact, &mut bucket.regex, &mut bucket.prefix] {
                list.sort_by_key(|&e| rank(e));
            }
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    pub(super) fn has_regex(&self) -> bool {
        self.has_regex
    }

    pub(super) fn get(&self, key: &str) -> Option<&Bucket> {
        self.buckets.get(key)
    }
}

/// The keys a path's prefix and regex routes may be filed under, longest
/// first: the path itself, then the path cut before each `/` (the last
/// is `""`, where `/` and literal-less regexes are filed).
pub(super) fn keys(path: &str) -> impl Iterator<Item = &str> {
    let whole = (!path.ends_with('/')).then_some(path);
    let cuts = path
        .bytes()
        .enumerate()
        .rev()
        .filter(|&(_, b)| b == b'/')
        .map(|(at, _)| &path[..at]);
    whole.into_iter().chain(cuts)
}

/// The key a prefix is filed under: without its trailing `/` (`/` is `""`).
pub(super) fn prefix_key(prefix: &str) -> &str {
    prefix.strip_suffix('/').unwrap_or(prefix)
}

/// Routes by host: exact names, wildcard suffixes (`.example.com` for
/// `*.example.com`), and those for any host.
#[derive(Debug, Default)]
pub(super) struct HostIndex {
    pub exact: HashMap<Box<str>, PathIndex, ahash::RandomState>,
    pub wildcard: HashMap<Box<str>, PathIndex, ahash::RandomState>,
    pub any: PathIndex,
}

impl HostIndex {
    /// The groups a request for `host` looks in, most specific first: its
    /// exact name, each wildcard suffix of it from the longest, then any.
    pub(super) fn groups<'a>(
        &'a self,
        host: Option<&'a str>,
    ) -> impl Iterator<Item = &'a PathIndex> {
        let host = host.filter(|_| !(self.exact.is_empty() && self.wildcard.is_empty()));
        let exact = host.and_then(|h| self.exact.get(h));
        let wildcards = host
            .filter(|_| !self.wildcard.is_empty())
            .into_iter()
            .flat_map(|h| {
                h.bytes()
                    .enumerate()
                    // A wildcard stands for at least one label: not the
                    // suffix that is the whole name.
                    .filter(|&(at, b)| b == b'.' && at > 0)
                    .map(move |(at, _)| &h[at..])
            })
            .filter_map(|suffix| self.wildcard.get(suffix));
        exact
            .into_iter()
            .chain(wildcards)
            .chain(std::iter::once(&self.any))
    }

    pub(super) fn all_mut(&mut self) -> impl Iterator<Item = &mut PathIndex> {
        self.exact
            .values_mut()
            .chain(self.wildcard.values_mut())
            .chain(std::iter::once(&mut self.any))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_looked_up_under_each_segment_boundary() {
        let all = |p| keys(p).collect::<Vec<_>>();
        assert_eq!(all("/v2/example"), ["/v2/example", "/v2", ""]);
        assert_eq!(all("/v2/"), ["/v2", ""]);
        assert_eq!(all("/"), [""]);
        assert_eq!(all("/a//b"), ["/a//b", "/a/", "/a", ""]);
        assert_eq!(prefix_key("/"), "");
        assert_eq!(prefix_key("/static/"), "/static");
        assert_eq!(prefix_key("/v1"), "/v1");
    }

    #[test]
    fn a_host_looks_in_its_name_then_its_wildcards_longest_first() {
        let mut index = HostIndex::default();
        for (wildcard, key, entry) in [
            (false, "foo.bar.com", 1),
            (true, ".bar.com", 2),
            (true, ".com", 3),
            (true, ".foo.bar.com", 4),
        ] {
            let map = match wildcard {
                true => &mut index.wildcard,
                false => &mut index.exact,
            };
            map.entry(key.into())
                .or_default()
                .file("", Filed::Prefix, entry);
        }
        index.any.file("", Filed::Prefix, 0);
        let order = |host| {
            index
                .groups(host)
                .map(|g| g.get("").unwrap().prefix[0])
                .collect::<Vec<_>>()
        };
        assert_eq!(order(Some("foo.bar.com")), [1, 2, 3, 0]);
        assert_eq!(order(Some("x.foo.bar.com")), [4, 2, 3, 0]);
        assert_eq!(order(Some("bar.com")), [3, 0], "*.bar.com is not bar.com");
        assert_eq!(order(None), [0]);
    }
}
