//! The route tables: routes from the configuration, compiled once, and
//! the lookup that finds the one a request takes, with the Gateway API's
//! precedence (docs/CONFIG.md, "Route precedence"):
//!
//! 1. the most specific host: an exact name, then wildcards from the
//!    longest suffix, then routes for any host;
//! 2. an exact path, then a regex (the longer pattern first), then
//!    prefixes from the longest (on segment boundaries: `/v1/pets`
//!    matches `/v1/pets` and `/v1/pets/1`, not `/v1/petstore`; a native
//!    prefix ending in `/` matches only below it);
//! 3. a route with methods before one without;
//! 4. more header conditions first, then more query conditions;
//! 5. the file's order (a Gateway API source orders its rules by the
//!    HTTPRoutes' creation, names and rule order).
//!
//! A request falls through to less specific routes while none matches.
//! Each configuration has one table per route scope: `routes` (0) and
//! each Gateway API address.

mod index;
pub(crate) mod matches;
pub(crate) mod rewrite;

use std::borrow::Cow;
use std::cmp::Reverse;

use http::Method;

use crate::{
    config::{literal_start, Case, PathMatch, Pattern, RouteSettings, Setting},
    ids::RouteId,
    wire::normalize,
};
use index::{keys, prefix_key, Filed, HostIndex, PathIndex};
pub(crate) use matches::{Conditions, Facts, FieldMatch, Verdict};

/// One compiled route, as the lookup tests it.
#[derive(Debug)]
pub(crate) struct Entry {
    pub id: RouteId,
    path: PathTest,
    conditions: Conditions,
    /// A request that takes no route for its method alone is told 405.
    answers_405: bool,
    /// Its place among the routes filed with it.
    rank: Rank,
}

#[derive(Debug)]
enum PathTest {
    /// Filed under the path itself: equal to the key.
    Exact,
    /// A prefix: `below` when written with a trailing `/` (the key alone does not match).
    Prefix {
        below: bool,
    },
    Regex(Pattern),
}

/// What a lookup found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RouteMatch<'a> {
    Found(&'a Entry),
    /// Routes match but for the method: 405 with `Allow`.
    MethodNotAllowed {
        allow: String,
    },
    NotFound,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for Entry {}

/// One scope's routes.
#[derive(Debug, Default)]
struct Table {
    entries: Vec<Entry>,
    hosts: HostIndex,
}

/// Every scope's table.
#[derive(Debug, Default)]
pub(crate) struct RouteTable {
    tables: Vec<Table>,
    /// `paths.case: insensitive`: ASCII letter case does not count in
    /// exact and prefix paths (keys are lower case).
    ignore_case: bool,
}

impl RouteTable {
    /// Compiles validated routes (paths start with `/` or are patterns
    /// that compile, methods parse).
    #[cfg(test)]
    pub(crate) fn new(routes: &[RouteSettings], case: Case) -> Self {
        let ids: Vec<RouteId> = (0..routes.len()).map(RouteId::new).collect();
        Self::with_ids(routes, &ids, case)
    }

    /// Compiles validated routes, each found as its id in `ids` (which
    /// carry their metrics slots).
    pub(crate) fn with_ids(routes: &[RouteSettings], ids: &[RouteId], case: Case) -> Self {
        let ignore_case = case == Case::Insensitive;
        let scopes = routes.iter().map(|r| r.origin.table + 1).max().unwrap_or(1);
        let mut tables: Vec<Table> = (0..scopes).map(|_| Table::default()).collect();
        for (order, (route, &id)) in routes.iter().zip(ids).enumerate() {
            let table = &mut tables[route.origin.table];
            let at = u32::try_from(table.entries.len()).unwrap_or(u32::MAX);
            // Validated: a pattern that does not compile never gets here.
            let Some((test, filed, key)) = path_test(route, ignore_case) else {
                continue;
            };
            for group in host_groups(&mut table.hosts, route) {
                group.file(&key, filed, at);
            }
            table.entries.push(Entry {
                id,
                path: test,
                conditions: conditions(route),
                answers_405: !route.origin.no_405,
                rank: rank(route, order),
            });
        }
        for table in &mut tables {
            let entries = &table.entries;
            for group in table.hosts.all_mut() {
                group.sort(|e| entries[e as usize].rank);
            }
        }
        Self {
            tables,
            ignore_case,
        }
    }

    /// The route `facts` takes in table `scope` (its path normalised for
    /// matching, its host normalised).
    pub(crate) fn find(&self, scope: usize, facts: &Facts<'_>) -> RouteMatch<'_> {
        let Some(table) = self.tables.get(scope) else {
            return RouteMatch::NotFound;
        };
        let key: Cow<'_, str> =
            match self.ignore_case && facts.path.bytes().any(|b| b.is_ascii_uppercase()) {
                true => Cow::Owned(facts.path.to_ascii_lowercase()),
                false => Cow::Borrowed(facts.path),
            };
        let mut allowed: Vec<&Method> = Vec::new();
        for group in table.hosts.groups(facts.host) {
            if group.is_empty() {
                continue;
            }
            if let Some(entry) = table.in_group(group, &key, facts, &mut allowed) {
                return RouteMatch::Found(entry);
            }
        }
        if allowed.is_empty() {
            return RouteMatch::NotFound;
        }
        let allow: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
        RouteMatch::MethodNotAllowed {
            allow: allow.join(", "),
        }
    }
}

impl Table {
    /// The first entry of `group` that `facts` matches, in precedence order.
    fn in_group<'t>(
        &'t self,
        group: &PathIndex,
        key: &str,
        facts: &Facts<'_>,
        allowed: &mut Vec<&'t Method>,
    ) -> Option<&'t Entry> {
        let passes = |at: u32, allowed: &mut Vec<&'t Method>| {
            let entry = &self.entries[at as usize];
            match entry.conditions.check(facts, entry.answers_405) {
                Verdict::Match => true,
                Verdict::OtherMethod => {
                    for m in &entry.conditions.methods {
                        if !allowed.contains(&m) {
                            allowed.push(m);
                        }
                    }
                    false
                }
                Verdict::NoMatch => false,
            }
        };
        if let Some(bucket) = group.get(key) {
            if let Some(&at) = bucket.exact.iter().find(|&&at| passes(at, allowed)) {
                return Some(&self.entries[at as usize]);
            }
        }
        if group.has_regex() {
            // The best regex over every bucket of the path (they are
            // ranked within each bucket only).
            let mut best: Option<&Entry> = None;
            for bucket in keys(key).filter_map(|k| group.get(k)) {
                for &at in &bucket.regex {
                    let entry = &self.entries[at as usize];
                    if best.is_some_and(|b| b.rank < entry.rank) {
                        // Ranked within the bucket: the rest come later too.
                        break;
                    }
                    let PathTest::Regex(pattern) = &entry.path else {
                        continue;
                    };
                    if pattern.matches(facts.path) && passes(at, allowed) {
                        best = Some(entry);
                        break;
                    }
                }
            }
            if best.is_some() {
                return best;
            }
        }
        for (k, bucket) in keys(key).filter_map(|k| Some((k, group.get(k)?))) {
            let found = bucket.prefix.iter().find(|&&at| {
                let below = matches!(
                    self.entries[at as usize].path,
                    PathTest::Prefix { below: true }
                );
                (!below || key.len() > k.len()) && passes(at, allowed)
            });
            if let Some(&at) = found {
                return Some(&self.entries[at as usize]);
            }
        }
        None
    }
}

/// What breaks ties between routes of the same host group and path key.
type Rank = (Reverse<usize>, bool, Reverse<usize>, Reverse<usize>, usize);

/// Longer written paths (and patterns) first; then routes with methods,
/// more headers, more query parameters; then the file's order.
fn rank(route: &RouteSettings, order: usize) -> Rank {
    (
        Reverse(route.path.value.len()),
        route.methods.is_empty(),
        Reverse(route.headers.len()),
        Reverse(route.query.len()),
        order,
    )
}

/// How the route's path is tested, where it is filed, and under which key.
fn path_test(route: &RouteSettings, ignore_case: bool) -> Option<(PathTest, Filed, String)> {
    let path = &route.path.value;
    let folded = |path: &str| match ignore_case {
        true => normalize::unicode::fold_case(path)
            .unwrap_or_else(|| path.to_string())
            .to_ascii_lowercase(),
        false => path.to_string(),
    };
    Some(match route.match_kind {
        PathMatch::Exact => (PathTest::Exact, Filed::Exact, folded(path)),
        PathMatch::Prefix => (
            PathTest::Prefix {
                below: path.len() > 1 && path.ends_with('/') && !route.origin.no_405,
            },
            Filed::Prefix,
            folded(prefix_key(path)),
        ),
        PathMatch::Regex => {
            let pattern = <Pattern as Setting>::parse(path).ok()?;
            let key = folded(literal_start(path));
            (PathTest::Regex(pattern), Filed::Regex, key)
        }
    })
}

/// The host groups `route` is filed in (creating them).
fn host_groups<'a>(hosts: &'a mut HostIndex, route: &RouteSettings) -> Vec<&'a mut PathIndex> {
    let names: Vec<(bool, String)> = route
        .host_names()
        .map(|name| match name.strip_prefix("*.") {
            Some(suffix) => (true, format!(".{}", normal_host(suffix))),
            None => (false, normal_host(name)),
        })
        .collect();
    if names.is_empty() {
        return vec![&mut hosts.any];
    }
    let mut groups: Vec<&'a mut PathIndex> = Vec::new();
    let (exact, wildcard) = (&mut hosts.exact, &mut hosts.wildcard);
    let mut exact_keys = Vec::new();
    let mut wildcard_keys = Vec::new();
    for (is_wildcard, key) in names {
        let list = if is_wildcard {
            &mut wildcard_keys
        } else {
            &mut exact_keys
        };
        if !list.contains(&key) {
            list.push(key);
        }
    }
    for key in &exact_keys {
        exact.entry(key.as_str().into()).or_default();
    }
    for key in &wildcard_keys {
        wildcard.entry(key.as_str().into()).or_default();
    }
    for (key, group) in exact.iter_mut() {
        if exact_keys.iter().any(|k| **k == **key) {
            groups.push(group);
        }
    }
    for (key, group) in wildcard.iter_mut() {
        if wildcard_keys.iter().any(|k| **k == **key) {
            groups.push(group);
        }
    }
    groups
}

/// A host name as requests' are normalised (lower case, A-labels).
fn normal_host(name: &str) -> String {
    match normalize::host::normalize(name, 0) {
        Ok(Some(normal)) => normal.name.into_owned(),
        _ => name.to_ascii_lowercase(),
    }
}

/// The method, header and query conditions of `route`.
fn conditions(route: &RouteSettings) -> Conditions {
    Conditions {
        methods: route
            .methods
            .iter()
            .filter_map(|m| Method::from_bytes(m.value.as_bytes()).ok())
            .collect(),
        headers: route
            .headers
            .iter()
            .map(|h| FieldMatch::header(&h.value))
            .collect(),
        query: route
            .query
            .iter()
            .map(|q| FieldMatch::query(&q.value))
            .collect(),
    }
}

#[cfg(test)]
mod tests;
