//! A route's new path (a rewrite for the upstream, or a redirect's):
//! pure functions over the normalised request (a redirect's `Location`
//! is written by `wire::location`).
//!
//! They start from the path normalisation admitted, and what they put in
//! was checked to be in normal form when the file was read (no dot
//! segments, no `//`, no control characters, no encoded slash): the
//! result is in normal form too, so a rewrite cannot take a request back
//! past the guard its route stands for, and no header gets a CR or LF.

use crate::config::PathRewriteSettings;

/// The path with the route's `rewrite` (or a redirect's `path`) applied:
/// `prefix_segments` is how many segments the route's prefix has (`/` has
/// none, `/v1/pets` two).
pub(crate) fn new_path(path: &str, rule: &PathRewriteSettings, prefix_segments: usize) -> String {
    match rule {
        PathRewriteSettings::Full(full) => full.clone(),
        PathRewriteSettings::Prefix(replacement) => {
            // `/` under the prefix `/` is all prefix.
            let rest = match (prefix_segments, path) {
                (0, "/") => "",
                _ => &path[cut(path, prefix_segments)..],
            };
            replace_prefix(rest, replacement)
        }
    }
}

/// Where the first `segments` segments of `path` end.
fn cut(path: &str, segments: usize) -> usize {
    if segments == 0 {
        return 0;
    }
    path.bytes()
        .enumerate()
        .filter(|&(_, b)| b == b'/')
        .nth(segments)
        .map_or(path.len(), |(at, _)| at)
}

/// `replacement` in place of a prefix whose remainder is `rest` (empty,
/// or starting with `/`): the Gateway API's table (`/foo/bar` under
/// `/foo` with `/xyz` or `/xyz/` is `/xyz/bar`; with `` or `/` it is `/bar`).
fn replace_prefix(rest: &str, replacement: &str) -> String {
    let trimmed = replacement.trim_end_matches('/');
    match (trimmed.is_empty(), rest.is_empty()) {
        (true, true) => "/".into(),
        (true, false) => rest.into(),
        (false, true) => replacement.into(),
        (false, false) => format!("{trimmed}{rest}"),
    }
}

/// How many segments a route's prefix (as written) has.
pub(crate) fn segments(prefix: &str) -> usize {
    prefix
        .trim_end_matches('/')
        .bytes()
        .filter(|&b| b == b'/')
        .count()
}

/// The port a request named in its Host (`host:8080`), if any.
pub(crate) fn host_port(host: &str) -> Option<u16> {
    let (_, port) = host.rsplit_once(':')?;
    // `[::1]` has colons but no port after its bracket.
    if port.ends_with(']') {
        return None;
    }
    port.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use PathRewriteSettings::{Full, Prefix};

    /// The Gateway API's own table (HTTPPathModifier.ReplacePrefixMatch).
    #[test]
    fn prefixes_are_replaced_as_the_gateway_api_says() {
        for (path, prefix, replacement, expected) in [
            ("/foo/bar", "/foo", "/xyz", "/xyz/bar"),
            ("/foo/bar", "/foo", "/xyz/", "/xyz/bar"),
            ("/foo/bar", "/foo/", "/xyz", "/xyz/bar"),
            ("/foo/bar", "/foo/", "/xyz/", "/xyz/bar"),
            ("/foo", "/foo", "/xyz", "/xyz"),
            ("/foo/", "/foo", "/xyz", "/xyz/"),
            ("/foo/bar", "/foo", "", "/bar"),
            ("/foo/", "/foo", "", "/"),
            ("/foo", "/foo", "", "/"),
            ("/foo/", "/foo", "/", "/"),
            ("/foo", "/foo", "/", "/"),
            ("/prefix/one/two", "/prefix/one", "/one", "/one/two"),
            ("/strip-prefix/three", "/strip-prefix", "/", "/three"),
            ("/anything", "/", "/base", "/base/anything"),
            ("/", "/", "/base", "/base"),
        ] {
            let rule = Prefix(replacement.into());
            assert_eq!(
                new_path(path, &rule, segments(prefix)),
                expected,
                "{path} under {prefix} with {replacement:?}"
            );
        }
        assert_eq!(new_path("/full/one/two", &Full("/one".into()), 2), "/one");
    }

    #[test]
    fn a_prefix_is_cut_by_segments_whatever_their_spelling() {
        // The prefix matched `/api/v1` case-insensitively, or without
        // `;` parameters: the same two segments go, as sent.
        let rule = Prefix("/v2".into());
        assert_eq!(new_path("/API/V1/x", &rule, 2), "/v2/x");
        assert_eq!(new_path("/api;a=1/v1/x;b", &rule, 2), "/v2/x;b");
    }

    #[test]
    fn the_port_a_host_names() {
        assert_eq!(host_port("example.org:8080"), Some(8080));
        assert_eq!(host_port("example.org"), None);
        assert_eq!(host_port("[::1]"), None);
        assert_eq!(host_port("[::1]:81"), Some(81));
    }
}
