//! The route table's lookup: precedence between routes, hosts (exact and
//! wildcard), methods (405 or 404), header, query and regex conditions.

use std::path::Path;

use http::{HeaderMap, HeaderValue, Method};

use super::*;
use crate::wire::fields::Fields;

/// The table, and each route's upstream name by id.
fn table(routes: &str) -> (RouteTable, Vec<String>) {
    table_with("", routes)
}

fn table_with(settings: &str, routes: &str) -> (RouteTable, Vec<String>) {
    let text = format!(
        "listeners: [{{ address: 127.0.0.1:1 }}]\n{settings}upstreams:\n  a: {{ hosts: [\"http://h:1\"] }}\n  b: {{ hosts: [\"http://h:2\"] }}\n  c: {{ hosts: [\"http://h:3\"] }}\nroutes:\n{routes}"
    );
    let config = crate::config::parse(&text, Path::new("t.yaml"), |_| None).unwrap();
    let upstreams = config
        .routes
        .iter()
        .map(|r| r.upstream.as_ref().map_or("-".into(), |u| u.value.clone()))
        .collect();
    (
        RouteTable::new(&config.routes, config.paths.case),
        upstreams,
    )
}

/// A request: method, host, path with query, headers.
struct Ask<'a> {
    method: Method,
    host: Option<&'a str>,
    target: &'a str,
    headers: &'a [(&'static str, &'static str)],
}

fn get(target: &str) -> Ask<'_> {
    Ask {
        method: Method::GET,
        host: None,
        target,
        headers: &[],
    }
}

fn find((table, upstreams): &(RouteTable, Vec<String>), ask: Ask<'_>) -> String {
    let mut headers = HeaderMap::new();
    for (name, value) in ask.headers {
        headers.append(*name, HeaderValue::from_static(value));
    }
    let (path, query) = match ask.target.split_once('?') {
        Some((path, query)) => (path, Some(query.as_bytes())),
        None => (ask.target, None),
    };
    let facts = Facts {
        host: ask.host,
        method: &ask.method,
        path,
        query,
        fields: Fields::Map(&headers),
    };
    match table.find(0, &facts) {
        RouteMatch::Found(route) => upstreams[route.id.index()].clone(),
        RouteMatch::MethodNotAllowed { allow } => format!("405 {allow}"),
        RouteMatch::NotFound => "404".into(),
    }
}

fn at(t: &(RouteTable, Vec<String>), host: Option<&str>, method: Method, path: &str) -> String {
    find(
        t,
        Ask {
            method,
            host,
            target: path,
            headers: &[],
        },
    )
}

#[test]
fn most_specific_route_wins() {
    let t = table(
        "  - { path: /, upstream: a }\n  - { path: /v1/pets, upstream: b }\n  - { path: /v1/pets, match: exact, upstream: c }\n",
    );
    assert_eq!(find(&t, get("/v1/pets")), "c");
    assert_eq!(find(&t, get("/v1/pets/1")), "b");
    assert_eq!(find(&t, get("/v1/petstore")), "a");
    assert_eq!(find(&t, get("/other")), "a");
}

#[test]
fn host_routes_come_first() {
    let t =
        table("  - { path: /, upstream: a }\n  - { path: /, host: API.example, upstream: b }\n");
    assert_eq!(at(&t, Some("api.example"), Method::GET, "/x"), "b");
    assert_eq!(at(&t, Some("other"), Method::GET, "/x"), "a");
    assert_eq!(at(&t, None, Method::GET, "/x"), "a");
}

#[test]
fn methods_fall_through_then_405() {
    let t = table(
        "  - { path: /v1/pets, methods: [GET, HEAD], upstream: a }\n  - { path: /v1/pets, methods: [POST], upstream: b }\n  - { path: /admin, match: exact, methods: [GET], upstream: c }\n",
    );
    assert_eq!(at(&t, None, Method::POST, "/v1/pets"), "b");
    assert_eq!(
        at(&t, None, Method::DELETE, "/v1/pets"),
        "405 GET, HEAD, POST"
    );
    assert_eq!(at(&t, None, Method::GET, "/nothing"), "404");
    assert_eq!(at(&t, None, Method::GET, "/admin/x"), "404");
}

#[test]
fn letter_case_counts_only_when_asked() {
    let t = table("  - { path: /admin, upstream: a }\n  - { path: /, upstream: b }\n");
    assert_eq!(find(&t, get("/ADMIN")), "a");
    assert_eq!(find(&t, get("/Admin/x")), "a");
    assert_eq!(find(&t, get("/administrator")), "b");
    // Route paths are folded as request paths are for matching
    // (`/STRA%C3%9FE` is matched as `/STRAsse`).
    let t = table("  - { path: /stra%C3%9Fe, upstream: a }\n  - { path: /, upstream: b }\n");
    assert_eq!(find(&t, get("/STRAsse")), "a");
    assert_eq!(find(&t, get("/strasse/1")), "a");
    assert_eq!(find(&t, get("/stra%C3%9Fe")), "b");
    let t = table_with(
        "paths: { case: sensitive }\n",
        "  - { path: /admin, upstream: a }\n  - { path: /, upstream: b }\n",
    );
    assert_eq!(find(&t, get("/ADMIN")), "b");
    assert_eq!(find(&t, get("/admin")), "a");
}

#[test]
fn a_prefix_ending_in_a_slash_matches_below_it() {
    let t = table(
        "  - { path: /static/, upstream: a }\n  - { path: /static, match: exact, upstream: b }\n",
    );
    assert_eq!(find(&t, get("/static/app.js")), "a");
    assert_eq!(find(&t, get("/static/")), "a");
    assert_eq!(find(&t, get("/static")), "b");
}

#[test]
fn wildcard_hosts_match_names_below_and_lose_to_exact_ones() {
    let t = table(
        "  - { path: /, hosts: ['*.example.com'], upstream: a }\n  - { path: /, host: foo.example.com, upstream: b }\n  - { path: /, hosts: ['*.bar.example.com'], upstream: c }\n",
    );
    let host = |h| at(&t, Some(h), Method::GET, "/");
    assert_eq!(host("foo.example.com"), "b");
    assert_eq!(host("x.foo.example.com"), "a");
    assert_eq!(host("x.bar.example.com"), "c", "the longer wildcard");
    assert_eq!(host("example.com"), "404", "a wildcard needs a label");
    assert_eq!(host("other.org"), "404");
}

#[test]
fn a_more_specific_host_falls_through_when_its_paths_do_not_match() {
    let t =
        table("  - { path: /api, host: a.example, upstream: a }\n  - { path: /, upstream: b }\n");
    assert_eq!(at(&t, Some("a.example"), Method::GET, "/api/x"), "a");
    assert_eq!(at(&t, Some("a.example"), Method::GET, "/web"), "b");
}

#[test]
fn headers_and_query_parameters_narrow_a_route_and_count_in_precedence() {
    let t = table(
        "  - { path: /, upstream: a }\n  - { path: /, headers: [{ name: version, value: two }], upstream: b }\n  - { path: /, headers: [{ name: version, value: two }, { name: color, regex: 'o.*' }], upstream: c }\n  - { path: /q, query: [{ name: animal, value: whale }], upstream: b }\n  - { path: /q, query: [{ name: animal, value: whale }, { name: x, present: true }], upstream: c }\n  - { path: /h, headers: [{ name: x-debug, present: false }], upstream: b }\n",
    );
    let ask = |target, headers| Ask {
        method: Method::GET,
        host: None,
        target,
        headers,
    };
    assert_eq!(find(&t, ask("/", &[])), "a");
    assert_eq!(find(&t, ask("/", &[("version", "two")])), "b");
    assert_eq!(
        find(&t, ask("/", &[("version", "two"), ("color", "orange")])),
        "c"
    );
    assert_eq!(
        find(&t, ask("/", &[("version", "two"), ("color", "blue")])),
        "b"
    );
    assert_eq!(find(&t, ask("/q?animal=whale", &[])), "b");
    assert_eq!(find(&t, ask("/q?animal=whale&x", &[])), "c");
    assert_eq!(find(&t, ask("/q?animal=dolphin", &[])), "a");
    assert_eq!(find(&t, ask("/h", &[])), "b");
    assert_eq!(find(&t, ask("/h", &[("x-debug", "1")])), "a");
}

#[test]
fn a_route_with_methods_wins_over_one_without_at_the_same_path() {
    let t = table(
        "  - { path: /p, upstream: a }\n  - { path: /p, methods: [PATCH], upstream: b }\n  - { path: /p, headers: [{ name: v, value: '1' }], upstream: c }\n",
    );
    assert_eq!(at(&t, None, Method::PATCH, "/p"), "b");
    assert_eq!(at(&t, None, Method::GET, "/p"), "a");
    let ask = Ask {
        method: Method::PATCH,
        host: None,
        target: "/p",
        headers: &[("v", "1")],
    };
    assert_eq!(find(&t, ask), "b", "the method before the header count");
}

#[test]
fn exact_before_regex_before_prefix_and_longer_patterns_first() {
    let t = table(
        "  - { path: /api, upstream: a }\n  - { path: '/api/v[0-9]+/items', match: regex, upstream: b }\n  - { path: '/api/v[0-9]+/.*', match: regex, upstream: c }\n  - { path: /api/v1/items, match: exact, upstream: a }\n  - { path: '/(static|assets)/.*', match: regex, upstream: b }\n",
    );
    assert_eq!(find(&t, get("/api/v1/items")), "a", "exact");
    assert_eq!(find(&t, get("/api/v2/items")), "b", "the longer regex");
    assert_eq!(find(&t, get("/api/v2/other")), "c");
    assert_eq!(find(&t, get("/api/vx/items")), "a", "the prefix");
    assert_eq!(
        find(&t, get("/assets/app.js")),
        "b",
        "a regex without a literal start"
    );
    assert_eq!(
        find(&t, get("/static")),
        "404",
        "a regex matches the whole path"
    );
}

#[test]
fn scopes_are_separate_tables() {
    let text = "listeners: [{ address: 127.0.0.1:1 }]\nupstreams:\n  a: { hosts: [\"http://h:1\"] }\nroutes:\n  - { path: /a, upstream: a }\n  - { path: /b, upstream: a }\n";
    let mut config = crate::config::parse(text, Path::new("t.yaml"), |_| None).unwrap();
    config.routes[1].origin.table = 2;
    config.routes[1].origin.no_405 = true;
    let table = RouteTable::new(&config.routes, config.paths.case);
    let headers = HeaderMap::new();
    let facts = |path| Facts {
        host: None,
        method: &Method::GET,
        path,
        query: None,
        fields: Fields::Map(&headers),
    };
    let id = |scope, path| match table.find(scope, &facts(path)) {
        RouteMatch::Found(e) => Some(e.id.index()),
        _ => None,
    };
    assert_eq!((id(0, "/a"), id(0, "/b")), (Some(0), None));
    assert_eq!((id(2, "/a"), id(2, "/b")), (None, Some(1)));
    assert_eq!(id(1, "/a"), None, "an empty scope");
    assert_eq!(id(9, "/a"), None, "a scope the plan does not have");
}
