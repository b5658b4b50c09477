//! The normaliser's tables, and properties over generated paths.

#![allow(clippy::unwrap_used)]

use std::borrow::Cow;

use http::Method;
use proptest::prelude::*;

use super::{path, *};
use crate::config::{EscapedSlash, Semicolon};

fn defaults() -> Paths {
    Paths::default()
}

/// `Ok((path sent upstream, path routes match))` or the refusal's label.
type PathOutcome = Result<(String, String), &'static str>;

/// `Ok(Some((name, authority)))` or the refusal's label.
type HostOutcome = Result<Option<(String, String)>, &'static str>;

fn normal(raw: &str, paths: &Paths) -> PathOutcome {
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
    ];
    for (raw, expected) in table {
        assert_eq!(&normal(raw, &paths), expected, "{raw:?}");
    }
}

#[test]
fn settings_change_the_table() {
    let keep_slashes = Paths {
        merge_slashes: false,
        ..defaults()
    };
    assert_eq!(normal("//admin", &keep_slashes), both("//admin"));
    assert_eq!(normal("/a//../b", &keep_slashes), both("/a/b"));
    let decode = Paths {
        escaped_slash: EscapedSlash::Decode,
        ..defaults()
    };
    assert_eq!(normal("/x/..%2fadmin", &decode), both("/admin"));
    assert_eq!(normal("/%5cadmin", &decode), both("/admin"));
    let keep = Paths {
        escaped_slash: EscapedSlash::Keep,
        ..defaults()
    };
    assert_eq!(normal("/x/..%2fadmin", &keep), both("/x/..%2Fadmin"));
    let literal = Paths {
        semicolon: Semicolon::Keep,
        ..defaults()
    };
    assert_eq!(normal("/admin;x=1", &literal), both("/admin;x=1"));
    assert_eq!(normal("/x/..;/admin", &literal), both("/x/..;/admin"));
    let strict = Paths {
        semicolon: Semicolon::Reject,
        ..defaults()
    };
    assert_eq!(normal("/admin;x=1", &strict), Err("semicolon"));
    assert_eq!(normal("/admin%3Bx", &strict), both("/admin%3Bx"));
}

#[test]
fn a_normal_path_is_borrowed() {
    for raw in ["/", "/v1/pets", "/a%20b/c%C3%A9", "/x;y=1/z", "/a-b_c~d.e"] {
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

/// Every way of writing a path these properties try: the pieces that
/// matter to normalisation, in any order.
fn spelling() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "/", "//", "a", "B", ".", "..", "%2e", "%2E", "%2f", "%5C", "%41", "%7e", "%7E", "%20",
        "%c3%a9", "é", ";", ";v=1", "%3B", "%00", "%", "%g", "\\", "#", "{", "~", ":", "@", "%25",
        "x",
    ]);
    prop::collection::vec(piece, 0..12).prop_map(|pieces| format!("/{}", pieces.concat()))
}

fn settings() -> impl Strategy<Value = Paths> {
    (
        any::<bool>(),
        prop::sample::select(vec![
            EscapedSlash::Reject,
            EscapedSlash::Decode,
            EscapedSlash::Keep,
        ]),
        prop::sample::select(vec![
            Semicolon::Keep,
            Semicolon::StripForMatching,
            Semicolon::Reject,
        ]),
    )
        .prop_map(|(merge_slashes, escaped_slash, semicolon)| Paths {
            merge_slashes,
            escaped_slash,
            semicolon,
            ..Paths::default()
        })
}

fn has_encoded_unreserved(path: &str) -> bool {
    path.as_bytes().windows(3).any(|w| {
        w[0] == b'%'
            && std::str::from_utf8(&w[1..])
                .ok()
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .is_some_and(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Normalising twice changes nothing, and the second time takes the
    /// fast path (an already-normal path comes back borrowed).
    #[test]
    fn normalising_is_idempotent(raw in spelling(), paths in settings()) {
        if let Ok(once) = path::normalize(&raw, &paths) {
            let twice = path::normalize(&once.path, &paths).unwrap();
            prop_assert!(matches!(twice.path, Cow::Borrowed(_)), "{raw:?} -> {:?}", once.path);
            prop_assert_eq!(&twice.path, &once.path);
            prop_assert_eq!(twice.for_matching(), once.for_matching());
        }
    }

    /// No dot segment, no encoded unreserved character, no lower-case
    /// escape, no `//` when merging, in what is sent or matched.
    #[test]
    fn the_normal_form_has_no_ambiguity(raw in spelling(), paths in settings()) {
        if let Ok(normal) = path::normalize(&raw, &paths) {
            for path in [&*normal.path, normal.for_matching()] {
                prop_assert!(path.starts_with('/'));
                prop_assert!(!path.contains("/./") && !path.contains("/../"), "{path}");
                prop_assert!(!path.ends_with("/.") && !path.ends_with("/.."), "{path}");
                prop_assert!(!has_encoded_unreserved(path), "{path}");
                prop_assert!(!path.contains('\\') && !path.contains('#'), "{path}");
                if paths.merge_slashes {
                    prop_assert!(!path.contains("//"), "{raw:?} -> {path}");
                }
                let escapes = path.split('%').skip(1);
                prop_assert!(escapes.clone().all(|e| e.len() >= 2 && e[..2].bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))), "{path}");
            }
        }
    }

    /// The fast path says "normal" only for what the slow path leaves as it is.
    #[test]
    fn the_fast_path_agrees_with_the_slow_one(raw in spelling(), paths in settings()) {
        if let path::Scan::Normal { .. } = path::scan(raw.as_bytes(), &paths) {
            prop_assert_eq!(path::rewrite(raw.as_bytes(), &paths).unwrap(), raw);
        }
    }

    /// Host normalisation is idempotent and keeps a normal Host borrowed;
    /// the one-scan fast path agrees with the slow one.
    #[test]
    fn host_normalising_is_idempotent(raw in "[a-zA-Z0-9.é:_~\\[\\]-]{0,20}") {
        if let Some(name) = host::already_normal(raw.as_bytes(), 80) {
            let slow = host::slow(&raw, 80).unwrap().unwrap();
            prop_assert_eq!((&*slow.name, &*slow.authority), (&raw[..name], &*raw));
        }
        if let Ok(Some(once)) = host::normalize(&raw, 80) {
            let twice = host::normalize(&once.authority, 80).unwrap().unwrap();
            prop_assert!(matches!(twice.authority, Cow::Borrowed(_)), "{raw:?}");
            prop_assert_eq!(twice.name, once.name);
        }
    }
}
