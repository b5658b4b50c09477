//! The normaliser's tables (its properties are in `properties.rs`).

#![allow(clippy::unwrap_used)]

use std::borrow::Cow;

use http::Method;

use super::{path, *};
use crate::config::{Case, DoubleEncoding, EscapedSlash, Semicolon};

fn defaults() -> PathSettings {
    PathSettings::default()
}

/// `Ok((path sent upstream, path routes match))` or the refusal's label.
type PathOutcome = Result<(String, String), &'static str>;

/// `Ok(Some((name, authority)))` or the refusal's label.
type HostOutcome = Result<Option<(String, String)>, &'static str>;

fn normal(raw: &str, paths: &PathSettings) -> PathOutcome {
    path::normalize(raw, paths)
        .map(|n| (n.path.to_string(), n.for_matching().to_string()))
        .map_err(Refusal::label)
}

fn both(path: &str) -> PathOutcome {
    Ok((path.into(), path.into()))
}

#[test]
fn default_path_table() {
    let paths = defaults();
    let table: &[(&str, PathOutcome)] = &[
        ("/admin", both("/admin")),
        ("/", both("/")),
        ("/a/b/", both("/a/b/")),
        ("//admin", both("/admin")),
        ("/./admin", both("/admin")),
        ("/x/../admin", both("/admin")),
        ("/%61dmin", both("/admin")),
        ("/%7euser/%41", both("/~user/A")),
        ("/x/%2e%2e/admin", both("/admin")),
        ("/x/.%2E/admin", both("/admin")),
        ("/a/b/..", both("/a/")),
        ("/a/.", both("/a/")),
        ("/a//b///c", both("/a/b/c")),
        ("/files/a%20b", both("/files/a%20b")),
        ("/files/a%2cb", both("/files/a%2Cb")),
        ("/caf%c3%a9", both("/caf%C3%A9")),
        ("/café", both("/caf%C3%A9")),
        ("/a{b}|c", both("/a%7Bb%7D%7Cc")),
        ("/admin;x=1", Ok(("/admin;x=1".into(), "/admin".into()))),
        ("/x/..;/admin", both("/admin")),
        ("/a;p/b;q/", Ok(("/a;p/b;q/".into(), "/a/b/".into()))),
        ("/;x/admin", Ok(("/;x/admin".into(), "/admin".into()))),
        ("/%2e%2e/admin", Err("above_root")),
        ("/..", Err("above_root")),
        ("/a/../../b", Err("above_root")),
        ("/x/..%2fadmin", Err("escaped_slash")),
        ("/a%5Cb", Err("escaped_slash")),
        ("/%5cadmin", Err("escaped_slash")),
        ("/a\\b", Err("backslash")),
        ("/admin#x", Err("fragment")),
        ("/a%00", Err("control")),
        ("/a%1f", Err("control")),
        ("/a%7F", Err("control")),
        ("/a\tb", Err("control")),
        ("/a%", Err("bad_escape")),
        ("/a%4", Err("bad_escape")),
        ("/a%zz", Err("bad_escape")),
        ("", both("/")),
        ("admin", Err("target_form")),
        // Letters that case-insensitive backends fold to ASCII ones.
        ("/adm%c4%b1n", Ok(("/adm%C4%B1n".into(), "/admin".into()))),
        ("/ADM%C4%B0N", Ok(("/ADM%C4%B0N".into(), "/ADMiN".into()))),
        ("/%E2%84%AAey", Ok(("/%E2%84%AAey".into(), "/key".into()))),
        (
            "/%C5%BFecret;x",
            Ok(("/%C5%BFecret;x".into(), "/secret".into())),
        ),
        // Escapes must decode to UTF-8: no overlong forms, no stray bytes.
        ("/x/%C0%AE%C0%AE/admin", Err("not_utf8")),
        ("/%C0%AFadmin", Err("not_utf8")),
        ("/admin%C0%80", Err("not_utf8")),
        ("/%E0%80%AE", Err("not_utf8")),
        ("/%ED%A0%80", Err("not_utf8")),
        ("/%F4%90%80%80", Err("not_utf8")),
        ("/a%C3", Err("not_utf8")),
        ("/a%A9", Err("not_utf8")),
        ("/a%C3x%A9", Err("not_utf8")),
        ("/a%C3/%A9", Err("not_utf8")),
        ("/a%C3é", Err("not_utf8")),
        ("/a%FF", Err("not_utf8")),
        // `%3B` is `;` to a backend that decodes first.
        ("/x/..%3B/admin", both("/admin")),
        ("/x/..%3bfoo/admin", both("/admin")),
        ("/admin%3Bx", Ok(("/admin%3Bx".into(), "/admin".into()))),
        // `%25` is `%`: one decoding, as RFC 3986 has it.
        ("/%2561dmin", both("/%2561dmin")),
    ];
    for (raw, expected) in table {
        assert_eq!(&normal(raw, &paths), expected, "{raw:?}");
    }
}

#[test]
fn settings_change_the_table() {
    let keep_slashes = PathSettings {
        merge_slashes: false,
        ..defaults()
    };
    assert_eq!(normal("//admin", &keep_slashes), both("//admin"));
    assert_eq!(normal("/a//../b", &keep_slashes), both("/a/b"));
    let decode = PathSettings {
        escaped_slash: EscapedSlash::Decode,
        ..defaults()
    };
    assert_eq!(normal("/x/..%2fadmin", &decode), both("/admin"));
    assert_eq!(normal("/%5cadmin", &decode), both("/admin"));
    let keep = PathSettings {
        escaped_slash: EscapedSlash::Keep,
        ..defaults()
    };
    assert_eq!(normal("/x/..%2fadmin", &keep), both("/x/..%2Fadmin"));
    let literal = PathSettings {
        semicolon: Semicolon::Keep,
        ..defaults()
    };
    assert_eq!(normal("/admin;x=1", &literal), both("/admin;x=1"));
    assert_eq!(normal("/x/..;/admin", &literal), both("/x/..;/admin"));
    let strict = PathSettings {
        semicolon: Semicolon::Reject,
        ..defaults()
    };
    assert_eq!(normal("/admin;x=1", &strict), Err("semicolon"));
    // Was kept before `%3B` counted as `;` (the decode-first bypass).
    assert_eq!(normal("/admin%3Bx", &strict), Err("semicolon"));
    assert_eq!(normal("/admin%3bx", &strict), Err("semicolon"));
    assert_eq!(normal("/x/..%3B/admin", &literal), both("/x/..%3B/admin"));
    let once = PathSettings {
        double_encoding: DoubleEncoding::Reject,
        ..defaults()
    };
    assert_eq!(normal("/%2561dmin", &once), Err("double_encoding"));
    assert_eq!(normal("/%252e%252e/admin", &once), Err("double_encoding"));
    assert_eq!(normal("/100%25", &once), both("/100%25"));
    assert_eq!(normal("/100%25off", &once), both("/100%25off"));
    let sensitive = PathSettings {
        case: Case::Sensitive,
        ..defaults()
    };
    assert_eq!(normal("/adm%C4%B1n", &sensitive), both("/adm%C4%B1n"));
}

#[test]
fn a_normal_path_is_borrowed() {
    for raw in [
        "/",
        "/v1/pets",
        "/a%20b/c%C3%A9",
        "/x;y=1/z",
        "/a-b_c~d.e",
        "/adm%C4%B1n",
        "/x%3By/z",
        "/%F0%9F%98%80",
    ] {
        let normal = path::normalize(raw, &defaults()).unwrap();
        assert!(matches!(normal.path, Cow::Borrowed(_)), "{raw}");
    }
}

fn host(raw: &str, default_port: u16) -> HostOutcome {
    host::normalize(raw, default_port)
        .map(|h| h.map(|h| (h.name.into_owned(), h.authority.into_owned())))
        .map_err(Refusal::label)
}

fn named(name: &str, authority: &str) -> HostOutcome {
    Ok(Some((name.into(), authority.into())))
}

#[test]
fn host_table() {
    let table: &[(&str, u16, HostOutcome)] = &[
        ("admin.example", 80, named("admin.example", "admin.example")),
        ("Admin.EXAMPLE", 80, named("admin.example", "admin.example")),
        (
            "admin.example.",
            80,
            named("admin.example", "admin.example"),
        ),
        (
            "admin.example:80",
            80,
            named("admin.example", "admin.example"),
        ),
        (
            "admin.example:443",
            443,
            named("admin.example", "admin.example"),
        ),
        (
            "admin.example:8080",
            80,
            named("admin.example", "admin.example:8080"),
        ),
        (
            "admin.example.:0080",
            443,
            named("admin.example", "admin.example:80"),
        ),
        (
            "admin.example:",
            80,
            named("admin.example", "admin.example"),
        ),
        (
            "bücher.example",
            80,
            named("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ),
        (
            "XN--BCHER-KVA.example",
            80,
            named("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ),
        ("[::1]:8080", 80, named("[::1]", "[::1]:8080")),
        ("[0:0::1]", 80, named("[::1]", "[::1]")),
        ("127.0.0.1:80", 80, named("127.0.0.1", "127.0.0.1")),
        ("", 80, Ok(None)),
        ("admin.example..", 80, Err("host")),
        (".admin", 80, Err("host")),
        ("a..b", 80, Err("host")),
        ("user@admin.example", 80, Err("host")),
        ("admin.example:99999", 80, Err("host")),
        ("admin.example:8o", 80, Err("host")),
        ("a:1:2", 80, Err("host")),
        ("[::1", 80, Err("host")),
        ("[fe80::1%25eth0]", 80, Err("host")),
        ("a b", 80, Err("host")),
        (":80", 80, Err("host")),
        // Found by fuzzing: UTS 46 maps `˜` to a space (and a combining
        // tilde), which made `xn--a b-tdc`, a Host with a space in it.
        ("a\u{2dc}b", 80, Err("host")),
        ("a\u{3002}\u{3002}b", 80, Err("host")),
        (
            "b\u{fc}cher\u{3002}example",
            80,
            named("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ),
    ];
    for (raw, port, expected) in table {
        assert_eq!(&host(raw, *port), expected, "{raw:?}");
    }
    let normal = host::normalize("api.example:8443", 443).unwrap().unwrap();
    assert!(matches!(normal.authority, Cow::Borrowed(_)));
}

fn raw<'a>(method: &'a Method, target: &'a str, host: &'a str) -> Raw<'a> {
    let origin = match target.strip_prefix("http://") {
        Some(rest) => &rest[rest.find('/').unwrap_or(rest.len())..],
        None => target,
    };
    let (path, query) = match origin.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (origin, None),
    };
    Raw {
        method,
        target: target.as_bytes(),
        path,
        query: query.map(str::as_bytes),
        host: Some(host),
        secure: false,
    }
}

#[test]
fn targets_forms_and_rewrites() {
    let paths = defaults();
    let get = Method::GET;
    let options = Method::OPTIONS;
    assert_eq!(
        request(&raw(&options, "*", "h"), &paths),
        Ok(Normal::Asterisk)
    );
    assert_eq!(
        request(&raw(&get, "*", "h"), &paths),
        Err(Refusal::TargetForm)
    );
    assert_eq!(
        request(&raw(&get, "/a?b#c", "h"), &paths),
        Err(Refusal::Fragment)
    );
    let Ok(Normal::Request(absolute)) = request(
        &raw(&get, "http://Admin.Example:80/a//b?q", "other"),
        &paths,
    ) else {
        panic!("absolute-form is admitted");
    };
    assert!(absolute.absolute);
    assert_eq!(
        absolute.into_rewrites(Forward::Original),
        Rewrites {
            path: None,
            host: Some("admin.example".into())
        }
    );
    let Ok(Normal::Request(origin)) = request(&raw(&get, "/a//b", "H.example."), &paths) else {
        panic!("origin-form is admitted");
    };
    assert_eq!(origin.host.as_ref().unwrap().name, "h.example");
    assert_eq!(
        origin.into_rewrites(Forward::Normalized),
        Rewrites {
            path: Some("/a/b".into()),
            host: Some("h.example".into())
        }
    );
    let Ok(Normal::Request(plain)) = request(&raw(&get, "/a", "h"), &paths) else {
        panic!("a normal request is admitted");
    };
    assert_eq!(
        plain.into_rewrites(Forward::Normalized),
        Rewrites::default()
    );
}

#[test]
fn only_listed_upgrades_pass() {
    let websocket = ["websocket".to_string()];
    let offer = |values: &[&str]| {
        let offer = upgrade::offer(values.iter().map(|v| v.as_bytes()), &websocket);
        (String::from_utf8(offer.kept).unwrap(), offer.removed)
    };
    assert_eq!(offer(&["websocket"]), ("websocket".into(), 0));
    assert_eq!(offer(&["WebSocket/13"]), ("WebSocket/13".into(), 0));
    assert_eq!(offer(&["h2c"]), (String::new(), 1));
    assert_eq!(offer(&["h2c, websocket"]), ("websocket".into(), 1));
    assert_eq!(offer(&["foo", " websocket ,"]), ("websocket".into(), 1));
    let h2c_listed = ["h2c".to_string()];
    assert_eq!(upgrade::offer([&b"h2c"[..]], &h2c_listed).removed, 1);
    assert!(upgrade::switched_to_offered(b"websocket", b"websocket"));
    assert!(upgrade::switched_to_offered(
        b"WebSocket",
        b"foo, websocket/13"
    ));
    assert!(!upgrade::switched_to_offered(b"h2c", b"websocket"));
    assert!(!upgrade::switched_to_offered(b"", b"websocket"));
    assert!(!upgrade::switched_to_offered(b"websocket", b""));
}
