//! Request normalisation: any target and Host, under any `paths`
//! settings, are admitted or refused, never a panic; what is admitted is
//! normal (normalising it again changes nothing and takes the fast path,
//! returning it borrowed), carries no dot segment or `\`, and its escapes
//! decode to UTF-8.

use std::borrow::Cow;

use http::Method;
use proxy::{
    config::{Case, DoubleEncoding, EscapedSlash, PathSettings, Semicolon},
    wire::normalize::{self, host, path, Normal, Raw},
};

const METHODS: [Method; 3] = [Method::GET, Method::OPTIONS, Method::POST];

fn settings(selector: u8, more: u8) -> PathSettings {
    PathSettings {
        case: [Case::Insensitive, Case::Sensitive][usize::from(more & 1)],
        double_encoding: [DoubleEncoding::Keep, DoubleEncoding::Reject][usize::from(more >> 1 & 1)],
        merge_slashes: selector & 1 == 0,
        escaped_slash: [
            EscapedSlash::Reject,
            EscapedSlash::Decode,
            EscapedSlash::Keep,
        ][usize::from(selector >> 1 & 3) % 3],
        semicolon: [
            Semicolon::StripForMatching,
            Semicolon::Keep,
            Semicolon::Reject,
        ][usize::from(selector >> 3 & 3) % 3],
        ..PathSettings::default()
    }
}

pub fn check(data: &[u8]) {
    let [selector, more, data @ ..] = data else {
        return;
    };
    let selector = *selector;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let paths = settings(selector, *more);
    // Parts separated by NUL: the target, then the Host.
    let (target, host) = text.split_once('\0').unwrap_or((text, "h"));
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    let raw = Raw {
        method: &METHODS[usize::from(selector >> 5) % METHODS.len()],
        target: target.as_bytes(),
        path,
        query: query.map(str::as_bytes),
        host: Some(host),
        secure: selector & 0x80 != 0,
    };
    if let Ok(Normal::Request(normal)) = normalize::request(&raw, &paths) {
        if let Some(host) = &normal.host {
            let again = host::normalize(&host.authority, 80).expect("a normal Host stays valid");
            let _ = again.expect("a normal Host is not empty");
        }
    }
    if let Ok(once) = path::normalize(path, &paths) {
        let twice = path::normalize(&once.path, &paths).expect("a normal path stays admitted");
        assert!(
            matches!(twice.path, Cow::Borrowed(_)),
            "{path:?} -> {:?}",
            once.path
        );
        assert_eq!(twice.for_matching(), once.for_matching());
        for normal in [&*once.path, once.for_matching()] {
            assert!(normal.starts_with('/'));
            assert!(!normal.contains("/./") && !normal.contains("/../") && !normal.contains('\\'));
            assert!(!paths.merge_slashes || !normal.contains("//"), "{normal}");
        }
        assert!(
            std::str::from_utf8(&decoded(&once.path)).is_ok(),
            "{:?}",
            once.path
        );
    }
}

/// A normal path's bytes with its escapes decoded.
fn decoded(path: &str) -> Vec<u8> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}
