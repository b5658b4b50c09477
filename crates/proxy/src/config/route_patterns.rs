//! Regular expressions of routes (`match: regex` paths, `regex` header
//! and query conditions), compiled when the file is read.
//!
//! The `regex` crate's engines run in time linear in the input (no
//! backtracking, no look-around or back-references: a pattern that
//! needs them does not compile), and each compiled pattern is bounded in
//! size, so no request can make routing slow and no pattern can make the
//! proxy large. A pattern matches a whole value: it is anchored at both
//! ends.

use anyhow::Context as _;
use regex::{Regex, RegexBuilder};

use super::typed::Setting;

/// The compiled size one pattern may take (its NFA); the lazy DFA's
/// cache per pattern is bounded to the same.
const MAX_PATTERN_BYTES: usize = 256 * 1024;
/// The longest pattern text accepted.
const MAX_PATTERN_LEN: usize = 1024;

/// A compiled pattern and its text as written.
#[derive(Debug, Clone)]
pub struct Pattern {
    pub text: String,
    pub regex: Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Pattern {}

impl Pattern {
    /// Whether the whole of `value` matches.
    #[inline]
    pub fn matches(&self, value: &str) -> bool {
        self.regex.is_match(value)
    }
}

impl Setting for Pattern {
    fn parse(text: &str) -> anyhow::Result<Self> {
        if text.len() > MAX_PATTERN_LEN {
            anyhow::bail!("a pattern may be {MAX_PATTERN_LEN} characters long at most");
        }
        let regex = RegexBuilder::new(&format!("^(?:{text})$"))
            .size_limit(MAX_PATTERN_BYTES)
            .dfa_size_limit(MAX_PATTERN_BYTES)
            .build()
            .with_context(|| {
                format!(
                    "`{}` is not a regular expression this proxy runs (linear time: no look-around or back-references, {} KiB compiled at most)",
                    text.escape_debug(),
                    MAX_PATTERN_BYTES / 1024
                )
            })?;
        Ok(Self {
            text: text.to_string(),
            regex,
        })
    }

    fn text(&self) -> String {
        self.text.clone()
    }
}

/// The longest literal start every path `pattern` matches begins with,
/// cut back to its last `/` (a segment boundary): where the route table
/// files a regex route, so that only requests below that start try it.
/// Conservative: any construct it does not read as a plain character
/// ends the literal (`""`, tried by every request, when the pattern
/// starts with one or has an alternation at its top).
pub fn literal_start(pattern: &str) -> &str {
    let bytes = pattern.as_bytes();
    // An alternation outside any group makes no prefix certain.
    let mut depth = 0i32;
    let mut escaped = false;
    let mut class = false;
    for &b in bytes {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'[' if !class => class = true,
            b']' if class => class = false,
            b'(' if !class => depth += 1,
            b')' if !class => depth -= 1,
            b'|' if !class && depth == 0 => return "",
            _ => {}
        }
    }
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"/-_~%!,;:=@'&".contains(&b);
    let mut end = 0;
    while end < bytes.len() && plain(bytes[end]) {
        end += 1;
    }
    // A quantifier after the last plain character makes it optional.
    if end < bytes.len() && matches!(bytes[end], b'?' | b'*' | b'{') {
        end = end.saturating_sub(1);
    }
    match pattern[..end].rfind('/') {
        Some(slash) => &pattern[..slash],
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_values_in_linear_time() {
        let p = Pattern::parse("/v[0-9]+/items").unwrap();
        assert!(p.matches("/v12/items"));
        assert!(!p.matches("/v12/items/x") && !p.matches("/x/v1/items"));
        // What would backtrack elsewhere is refused or linear here.
        assert!(Pattern::parse("(a+)+$").is_ok());
        let evil = Pattern::parse("(a|a)*b").unwrap();
        let input = "a".repeat(100_000);
        let started = std::time::Instant::now();
        assert!(!evil.matches(&input));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        for bad in ["(?=x)", "(a)\\1", "[", &"a".repeat(2000)] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
        // A pattern whose automaton is too large is refused at load.
        assert!(Pattern::parse("\\w{2000}").is_err());
    }

    #[test]
    fn a_regex_is_filed_under_its_literal_start() {
        for (pattern, start) in [
            ("/api/v[0-9]+/users", "/api"),
            ("/api/v1/users/[0-9]+", "/api/v1/users"),
            ("/api/", "/api"),
            ("/static/.*", "/static"),
            ("/a/bc?/d", "/a"),
            ("/a/b+", "/a"),
            ("/a/b|/c/d", ""),
            ("(/a)/b", ""),
            ("(?i)/admin/x", ""),
            ("/[a-z]+/x", ""),
            ("/a/(b|c)/d", "/a"),
            ("/a\\/b/c", ""),
        ] {
            assert_eq!(literal_start(pattern), start, "{pattern}");
        }
    }
}
