//! Cookie lookup (crates/proxy/src/upstream/balance/affinity.rs: the
//! `balance: hash` cookie key and sticky sessions) and the joining of an
//! HTTP/2 client's cookie crumbs (RFC 9113 8.2.3, wire/head). The input is
//! a cookie name, a NUL, then Cookie field values, one a line.
//!
//! - A value found is the value of the first `name=value` pair (split at
//!   `;`, trimmed) across the fields in order, and holds no `;`.
//! - The same cookies as crumbs over HTTP/2 (each field split at `; `,
//!   one crumb a field) give the same lookup.
//! - Sent upstream over HTTP/1.1 from HTTP/2, the crumbs are one `cookie`
//!   field: the HTTP/1.1 fields joined by `; `.

use std::net::{IpAddr, Ipv4Addr};

use http::{HeaderMap, HeaderValue, Method};
use http1::{parse_head_into, Field, Limits};
use proxy::{
    fuzzing::cookie,
    wire::fuzzing::{upstream_h1, Client, Head},
};

/// The first value of cookie `name`, read as RFC 6265 5.4 writes them.
fn first_pair<'a>(fields: &[&'a [u8]], name: &[u8]) -> Option<&'a [u8]> {
    fields
        .iter()
        .flat_map(|field| field.split(|&b| b == b';'))
        .find_map(|pair| {
            let pair = pair.trim_ascii();
            (pair.starts_with(name) && pair.get(name.len()) == Some(&b'='))
                .then(|| &pair[name.len() + 1..])
        })
}

fn split_crumbs(field: &[u8]) -> Vec<&[u8]> {
    let mut crumbs = Vec::new();
    let mut rest = field;
    while let Some(at) = rest.windows(2).position(|w| w == b"; ") {
        crumbs.push(&rest[..at]);
        rest = &rest[at + 2..];
    }
    crumbs.push(rest);
    crumbs
}

pub fn check(data: &[u8]) {
    let Some(at) = data.iter().position(|&b| b == 0) else {
        return;
    };
    let Ok(name) = std::str::from_utf8(&data[..at]) else {
        return;
    };
    let values: Vec<&[u8]> = data[at + 1..].split(|&b| b == b'\n').collect();
    if values.iter().any(|v| HeaderValue::from_bytes(v).is_err()) {
        return;
    }

    // Over HTTP/1.1: `cookie: v` lines, read as ranges.
    let mut buf = Vec::new();
    let mut ranges = Vec::new();
    for value in &values {
        buf.extend_from_slice(b"cookie: ");
        let start = buf.len();
        buf.extend_from_slice(value);
        ranges.push((start - 8..start - 2, start..buf.len()));
        buf.extend_from_slice(b"\r\n");
    }
    let found = cookie(Head::H1(&buf, &ranges), name);
    let expected = first_pair(&values, name.as_bytes());
    assert_eq!(found, expected, "{name:?} in {values:?}");
    if let Some(found) = found {
        assert!(!found.contains(&b';'));
    }

    // Over HTTP/2: crumbs, one a field.
    let mut map = HeaderMap::new();
    for crumb in values.iter().flat_map(|v| split_crumbs(v)) {
        let Ok(crumb) = HeaderValue::from_bytes(crumb) else {
            return;
        };
        map.append("cookie", crumb);
    }
    assert_eq!(cookie(Head::H2(&map), name), found, "crumbs {map:?}");

    let client = Client {
        method: &Method::GET,
        path: b"/",
        query: None,
        host: Some(b"api.test"),
        fields: Head::H2(&map),
        peer: IpAddr::V4(Ipv4Addr::LOCALHOST),
        secure: false,
        trust_forwarded: false,
        normal_path: None,
        normal_host: None,
        length: None,
    };
    let written = upstream_h1(&client);
    let mut fields: Vec<Field> = Vec::new();
    let limits = Limits {
        max_head: 64 * 1024,
        max_body: 0,
    };
    let parsed = parse_head_into(&written, &limits, &mut fields);
    let Ok(Some(_)) = parsed else {
        panic!("{parsed:?}\n{}", String::from_utf8_lossy(&written));
    };
    let cookies: Vec<&[u8]> = fields
        .iter()
        .filter(|(n, _)| written[n.clone()].eq_ignore_ascii_case(b"cookie"))
        .map(|(_, v)| &written[v.clone()])
        .collect();
    let joined = values.join(&b"; "[..]);
    // The parser trims the joined field's ends, as any HTTP/1.1 peer does.
    assert_eq!(
        cookies,
        [joined.trim_ascii()],
        "\n{}",
        String::from_utf8_lossy(&written)
    );
}
