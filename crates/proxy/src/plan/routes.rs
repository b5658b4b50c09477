//! The route table: routes from the configuration, compiled once and
//! ordered so that the first match is the most specific one.
//!
//! Order: routes with a host before routes without; then exact paths before
//! prefixes; then longer paths first; ties keep the file's order. A prefix
//! matches on segment boundaries: `/v1/pets` matches `/v1/pets` and
//! `/v1/pets/1`, not `/v1/petstore` (a prefix ending in `/` matches
//! anything below it).

use http::Method;

use crate::{
    config::{Case, PathMatch, RouteSettings},
    ids::RouteId,
    wire::normalize,
};

/// One compiled route.
#[derive(Debug, Clone)]
pub(crate) struct CompiledRoute {
    pub id: RouteId,
    host: Option<String>,
    path: String,
    exact: bool,
    /// Empty: any method.
    methods: Vec<Method>,
}

/// What a lookup found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RouteMatch<'a> {
    Found(&'a CompiledRoute),
    /// The path matches routes, none of them for this method: 405 with `Allow`.
    MethodNotAllowed {
        allow: String,
    },
    NotFound,
}

impl PartialEq for CompiledRoute {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for CompiledRoute {}

#[derive(Debug, Clone, Default)]
pub(crate) struct RouteTable {
    routes: Vec<CompiledRoute>,
    /// `paths.case: insensitive`: letter case does not count in paths.
    ignore_case: bool,
}

impl RouteTable {
    /// Compiles validated routes (paths start with `/`, methods parse).
    #[cfg(test)]
    pub(crate) fn new(routes: &[RouteSettings], case: Case) -> Self {
        let ids: Vec<RouteId> = (0..routes.len()).map(RouteId::new).collect();
        Self::with_ids(routes, &ids, case)
    }

    /// Compiles validated routes, each found as its id in `ids` (which carry their
    /// metrics slots).
    pub(crate) fn with_ids(routes: &[RouteSettings], ids: &[RouteId], case: Case) -> Self {
        let mut compiled: Vec<CompiledRoute> = routes
            .iter()
            .zip(ids)
            .map(|(route, &id)| CompiledRoute {
                id,
                // Compared with the request's normalised Host name (A-labels).
                host: route
                    .host
                    .as_ref()
                    .map(|h| match normalize::host::normalize(h, 0) {
                        Ok(Some(normal)) => normal.name.into_owned(),
                        _ => h.to_ascii_lowercase(),
                    }),
                // Matched without case: folded as request paths are
                // (`/adm%C4%B1n` meets a route for `/admin`).
                path: match case {
                    Case::Insensitive => normalize::unicode::fold_case(&route.path.value)
                        .unwrap_or_else(|| route.path.value.clone()),
                    Case::Sensitive => route.path.value.clone(),
                },
                exact: route.match_kind == PathMatch::Exact,
                methods: route
                    .methods
                    .iter()
                    .filter_map(|m| Method::from_bytes(m.value.as_bytes()).ok())
                    .collect(),
            })
            .collect();
        // Stable sort: equally specific routes keep the file's order.
        compiled.sort_by_key(|r| (r.host.is_none(), !r.exact, std::cmp::Reverse(r.path.len())));
        Self {
            routes: compiled,
            ignore_case: case == Case::Insensitive,
        }
    }

    /// `host`: the normalised Host name (no port); `path`: the normalised
    /// path for matching (`normalize`), without the query.
    pub(crate) fn find(&self, host: Option<&str>, method: &Method, path: &str) -> RouteMatch<'_> {
        let mut allowed: Vec<&Method> = Vec::new();
        for route in &self.routes {
            if !route.matches_host(host) || !route.matches_path(path, self.ignore_case) {
                continue;
            }
            if route.methods.is_empty() || route.methods.contains(method) {
                return RouteMatch::Found(route);
            }
            for m in &route.methods {
                if !allowed.contains(&m) {
                    allowed.push(m);
                }
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

impl CompiledRoute {
    fn matches_host(&self, host: Option<&str>) -> bool {
        match (&self.host, host) {
            (None, _) => true,
            (Some(wanted), Some(host)) => wanted.eq_ignore_ascii_case(host),
            (Some(_), None) => false,
        }
    }

    fn matches_path(&self, path: &str, ignore_case: bool) -> bool {
        let (path, prefix) = (path.as_bytes(), self.path.as_bytes());
        let same = |a: &[u8], b: &[u8]| {
            if ignore_case {
                a.eq_ignore_ascii_case(b)
            } else {
                a == b
            }
        };
        if self.exact {
            return same(path, prefix);
        }
        if path.len() < prefix.len() || !same(&path[..prefix.len()], prefix) {
            return false;
        }
        let rest = &path[prefix.len()..];
        rest.is_empty() || prefix.ends_with(b"/") || rest.starts_with(b"/")
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The table, and each route's upstream name by id.
    fn table(routes: &str) -> (RouteTable, Vec<String>) {
        let text = format!(
            "listeners: [{{ address: 127.0.0.1:1 }}]\nupstreams:\n  a: {{ hosts: [\"http://h:1\"] }}\n  b: {{ hosts: [\"http://h:2\"] }}\n  c: {{ hosts: [\"http://h:3\"] }}\nroutes:\n{routes}"
        );
        let config = crate::config::parse(&text, Path::new("t.yaml"), |_| None).unwrap();
        let upstreams = config
            .routes
            .iter()
            .map(|r| r.upstream.value.clone())
            .collect();
        (
            RouteTable::new(&config.routes, config.paths.case),
            upstreams,
        )
    }

    fn upstream(
        (table, upstreams): &(RouteTable, Vec<String>),
        host: Option<&str>,
        method: Method,
        path: &str,
    ) -> String {
        match table.find(host, &method, path) {
            RouteMatch::Found(route) => upstreams[route.id.index()].clone(),
            RouteMatch::MethodNotAllowed { allow } => format!("405 {allow}"),
            RouteMatch::NotFound => "404".into(),
        }
    }

    #[test]
    fn most_specific_route_wins() {
        let t = table(
            "  - { path: /, upstream: a }\n  - { path: /v1/pets, upstream: b }\n  - { path: /v1/pets, match: exact, upstream: c }\n",
        );
        assert_eq!(upstream(&t, None, Method::GET, "/v1/pets"), "c");
        assert_eq!(upstream(&t, None, Method::GET, "/v1/pets/1"), "b");
        assert_eq!(upstream(&t, None, Method::GET, "/v1/petstore"), "a");
        assert_eq!(upstream(&t, None, Method::GET, "/other"), "a");
    }

    #[test]
    fn host_routes_come_first() {
        let t = table(
            "  - { path: /, upstream: a }\n  - { path: /, host: API.example, upstream: b }\n",
        );
        assert_eq!(upstream(&t, Some("api.example"), Method::GET, "/x"), "b");
        assert_eq!(upstream(&t, Some("other"), Method::GET, "/x"), "a");
        assert_eq!(upstream(&t, None, Method::GET, "/x"), "a");
    }

    #[test]
    fn methods_fall_through_then_405() {
        let t = table(
            "  - { path: /v1/pets, methods: [GET, HEAD], upstream: a }\n  - { path: /v1/pets, methods: [POST], upstream: b }\n  - { path: /admin, match: exact, methods: [GET], upstream: c }\n",
        );
        assert_eq!(upstream(&t, None, Method::POST, "/v1/pets"), "b");
        assert_eq!(
            upstream(&t, None, Method::DELETE, "/v1/pets"),
            "405 GET, HEAD, POST"
        );
        assert_eq!(upstream(&t, None, Method::GET, "/nothing"), "404");
        assert_eq!(upstream(&t, None, Method::GET, "/admin/x"), "404");
    }

    #[test]
    fn letter_case_counts_only_when_asked() {
        let t = table("  - { path: /admin, upstream: a }\n  - { path: /, upstream: b }\n");
        assert_eq!(upstream(&t, None, Method::GET, "/ADMIN"), "a");
        assert_eq!(upstream(&t, None, Method::GET, "/Admin/x"), "a");
        assert_eq!(upstream(&t, None, Method::GET, "/administrator"), "b");
        // Route paths are folded as request paths are for matching
        // (`/STRA%C3%9FE` is matched as `/STRAsse`).
        let t = table("  - { path: /stra%C3%9Fe, upstream: a }\n  - { path: /, upstream: b }\n");
        assert_eq!(upstream(&t, None, Method::GET, "/STRAsse"), "a");
        assert_eq!(upstream(&t, None, Method::GET, "/strasse/1"), "a");
        assert_eq!(upstream(&t, None, Method::GET, "/stra%C3%9Fe"), "b");
        let text = "listeners: [{ address: 127.0.0.1:1 }]\nupstreams:\n  a: { hosts: [\"http://h:1\"] }\n  b: { hosts: [\"http://h:2\"] }\npaths: { case: sensitive }\nroutes:\n  - { path: /admin, upstream: a }\n  - { path: /, upstream: b }\n";
        let config = crate::config::parse(text, Path::new("t.yaml"), |_| None).unwrap();
        let t = (
            RouteTable::new(&config.routes, config.paths.case),
            vec!["a".to_string(), "b".to_string()],
        );
        assert_eq!(upstream(&t, None, Method::GET, "/ADMIN"), "b");
        assert_eq!(upstream(&t, None, Method::GET, "/admin"), "a");
    }

    #[test]
    fn a_prefix_ending_in_a_slash_matches_below_it() {
        let t = table("  - { path: /static/, upstream: a }\n");
        assert_eq!(upstream(&t, None, Method::GET, "/static/app.js"), "a");
        assert_eq!(upstream(&t, None, Method::GET, "/static"), "404");
    }
}
