//! Route patterns and query parameters as the route table reads them
//! (crates/proxy/src/config/route_patterns.rs, plan/routes/matches.rs).
//! The input is a pattern, a NUL, a path, a NUL, a query, a NUL, then a
//! parameter name.
//!
//! - A pattern that compiles files its route under its literal start, a
//!   prefix of the pattern ending before a `/`; every path it matches
//!   begins with that start (else the index would hide the route).
//! - A query parameter found is the first of its name, `%XX` decoded:
//!   a value without `%` is returned as written.

use proxy::fuzzing::{query_param, route_pattern};

pub fn check(data: &[u8]) {
    let mut parts = data.splitn(4, |&b| b == 0);
    let (Some(pattern), Some(path), Some(query), Some(name)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return;
    };
    if let (Ok(pattern), Ok(path)) = (std::str::from_utf8(pattern), std::str::from_utf8(path)) {
        if let Some((matched, start)) = route_pattern(pattern, path) {
            assert!(pattern.starts_with(&start), "{pattern:?}: {start:?}");
            assert!(start.is_empty() || pattern.as_bytes().get(start.len()) == Some(&b'/'));
            if matched {
                assert!(
                    path.starts_with(&start),
                    "{pattern:?} matched {path:?} outside {start:?}"
                );
            }
        }
    }
    let Ok(name) = std::str::from_utf8(name) else {
        return;
    };
    if let Some(value) = query_param(query, name) {
        let raw = query
            .split(|&b| b == b'&')
            .map(|pair| pair.splitn(2, |&b| b == b'=').collect::<Vec<_>>())
            .find(|kv| !kv[0].contains(&b'%') && kv[0] == name.as_bytes());
        if let Some(kv) = raw {
            let written = kv.get(1).copied().unwrap_or_default();
            if !written.contains(&b'%') {
                assert_eq!(value.as_bytes(), written, "{name:?} in {query:?}");
            }
        }
    }
}
