//! HTTP/2 head conversion (crates/proxy/src/wire/http2.rs): any HTTP/1.1
//! request or response head the proxy's parser accepts, converted for the
//! other side.
//!
//! Requests (first byte even): the HTTP/1.1 head written upstream parses
//! again with the proxy's own parser; the HTTP/2 request carries exactly
//! the same fields (no connection-specific one, `Host` as `:authority`,
//! `te: trailers` added) and the same target; and the same request
//! arriving over HTTP/2 (its fields as the map an HTTP/2 client sends)
//! gives the same upstream HTTP/1.1 head as over HTTP/1.1, field for
//! field ("one set of rules for every protocol").
//!
//! Responses (first byte odd): the HTTP/2 response has no
//! connection-specific field and the same fields as the HTTP/1.1 head
//! written for an HTTP/1.1 client (which parses again, with the same
//! status); converting the HTTP/2 head once more changes nothing, by
//! either path (`client_response` and the no-copy `client_response_from`).

use std::{
    collections::BTreeMap,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use http1::{parse_head_into, parse_response_head, Field, Limits};
use proxy::wire::fuzzing::{
    client_h1, client_h2, client_h2_from, upstream_h1, upstream_h2, Client, Edits, Head,
};

const LIMITS: Limits = Limits {
    max_head: 16 * 1024,
    max_body: 64 * 1024,
};

/// Fields HTTP/2 forbids (RFC 9113 8.2.2), and `host`, which it carries
/// as `:authority`.
fn connection_specific(name: &str) -> bool {
    [
        "connection",
        "upgrade",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "host",
    ]
    .contains(&name)
}

/// Fields by lower-case name, each name's values in order, cookies as one
/// `; `-joined value (HTTP/2 joins them, HTTP/1.1 may send several).
type ByName = BTreeMap<String, Vec<Vec<u8>>>;

fn by_name<'a>(fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> ByName {
    let mut out = ByName::new();
    for (name, value) in fields {
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        out.entry(name).or_default().push(value.to_vec());
    }
    if let Some(cookies) = out.get_mut("cookie") {
        // Trimmed: an empty last crumb leaves `; ` at the end of the
        // joined field, which a parser reads without its trailing space.
        *cookies = vec![cookies.join(&b"; "[..]).trim_ascii().to_vec()];
    }
    out
}

fn h1_fields<'a>(buf: &'a [u8], fields: &'a [Field]) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
    fields
        .iter()
        .map(move |(n, v)| (&buf[n.clone()], &buf[v.clone()]))
}

fn map_fields(map: &HeaderMap) -> impl Iterator<Item = (&[u8], &[u8])> {
    map.iter()
        .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
}

pub fn check(data: &[u8]) {
    let Some((&selector, head)) = data.split_first() else {
        return;
    };
    if selector & 1 == 0 {
        request(selector, head);
    } else {
        response(selector, head);
    }
}

/// The request a parsed HTTP/1.1 head describes, as a session passes it
/// to the head writers; `selector`'s bits choose the peer and trust.
pub(crate) fn client<'a>(
    selector: u8,
    buf: &'a [u8],
    head: &'a http1::Head,
    fields: &'a [Field],
) -> Client<'a> {
    let peer = if selector & 2 == 0 {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9))
    } else {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    };
    let length = match head.framing {
        http1::Framing::Length(n) => Some(n as u64),
        http1::Framing::Empty | http1::Framing::Chunked => None,
    };
    Client {
        method: &head.method,
        path: &buf[head.path.clone()],
        query: head.query.clone().map(|q| &buf[q]),
        host: head.host.clone().map(|h| &buf[h]),
        fields: Head::H1(buf, fields),
        peer,
        secure: selector & 4 != 0,
        trust_forwarded: selector & 8 != 0,
        normal_path: None,
        normal_host: None,
        length,
    }
}

fn request(selector: u8, buf: &[u8]) {
    let mut fields: Vec<Field> = Vec::new();
    let Ok(Some(head)) = parse_head_into(buf, &LIMITS, &mut fields) else {
        return;
    };
    if fields.len() + 4 > crate::traceparent::MAX_FIELDS {
        // The fields the proxy adds would take the head past the
        // parser's field limit: an upstream like it answers 431.
        return;
    }
    if head.host.is_none() {
        // HTTP/1.0 without Host: the HTTP/1.1 head written upstream has
        // no Host either (an HTTP/1.1 server answers 400), where the
        // HTTP/2 one falls back to the upstream's authority. Found by this
        // target; reported, not fixed here (it needs the upstream's
        // authority in `request_head`).
        return;
    }
    if buf[head.target.clone()].contains(&b'#') {
        // Normalisation refuses a fragment before any head is written
        // (wire/normalize: `Refusal::Fragment`).
        return;
    }
    let client = client(selector, buf, &head, &fields);

    // Over HTTP/1.1: what the proxy writes, its own parser reads.
    let written = upstream_h1(&client);
    let mut again: Vec<Field> = Vec::new();
    let reparsed = parse_head_into(&written, &LIMITS, &mut again);
    let Ok(Some(reparsed)) = reparsed else {
        panic!(
            "the upstream head does not parse: {reparsed:?}\n{}",
            String::from_utf8_lossy(&written)
        );
    };
    assert_eq!(reparsed.len, written.len());
    let h1_upstream = by_name(h1_fields(&written, &again));

    // Over HTTP/2: the same fields and target.
    if let Some(h2) = upstream_h2(&client, "http", "backend.test:80") {
        let headers = h2.headers();
        for name in headers.keys() {
            assert!(
                !connection_specific(name.as_str()),
                "{name} sent over HTTP/2"
            );
        }
        assert_eq!(
            headers.get_all("te").iter().collect::<Vec<_>>(),
            ["trailers"]
        );
        let target = &written[reparsed.target.clone()];
        let sent = h2.uri().path_and_query().map(|p| p.as_str());
        assert_eq!(sent.map(str::as_bytes), Some(target), "{:?}", h2.uri());
        let host = h1_upstream.get("host").map(|hosts| hosts[0].as_slice());
        let authority = h2.uri().authority().map(|a| a.as_str().as_bytes());
        assert_eq!(authority, Some(host.unwrap_or(b"backend.test:80")));
        let mut expected = h1_upstream.clone();
        expected.retain(|name, _| !connection_specific(name) && name != "te");
        let mut got = by_name(map_fields(headers));
        got.remove("te");
        assert_eq!(got, expected, "\n{}", String::from_utf8_lossy(&written));
    }

    // The same request from an HTTP/2 client: the fields it may send,
    // its Host as `:authority`.
    let has_connection =
        h1_fields(buf, &fields).any(|(n, _)| n.eq_ignore_ascii_case(b"connection"));
    if has_connection {
        // Its tokens name more fields to drop over HTTP/1.1, which an
        // HTTP/2 client cannot send at all.
        return;
    }
    let mut map = HeaderMap::new();
    for (name, value) in h1_fields(buf, &fields) {
        let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        else {
            return;
        };
        if !connection_specific(name.as_str()) && name != "te" {
            map.append(name, value);
        }
    }
    let from_h2 = Client {
        fields: Head::H2(&map),
        ..client
    };
    let written_h2 = upstream_h1(&from_h2);
    let mut fields_h2: Vec<Field> = Vec::new();
    let Ok(Some(_)) = parse_head_into(&written_h2, &LIMITS, &mut fields_h2) else {
        panic!(
            "the upstream head from HTTP/2 does not parse: {}",
            String::from_utf8_lossy(&written_h2)
        );
    };
    assert_eq!(
        by_name(h1_fields(&written_h2, &fields_h2)),
        h1_upstream,
        "\nfrom HTTP/1.1:\n{}\nfrom HTTP/2:\n{}",
        String::from_utf8_lossy(&written),
        String::from_utf8_lossy(&written_h2)
    );
}

fn edits(selector: u8) -> Option<Edits> {
    (selector & 2 != 0).then(|| Edits {
        remove: vec![HeaderName::from_static("x-removed")],
        set: vec![(
            HeaderName::from_static("x-set"),
            HeaderValue::from_static("proxy"),
        )],
        add: vec![(
            HeaderName::from_static("set-cookie"),
            HeaderValue::from_static("lb=1; Path=/"),
        )],
    })
}

fn response(selector: u8, buf: &[u8]) {
    let mut fields: Vec<Field> = Vec::new();
    let Ok(Some(head)) = parse_response_head(buf, LIMITS.max_head, false, &mut fields) else {
        return;
    };
    if fields.len() + 4 > crate::traceparent::MAX_FIELDS {
        // With the edits' fields and the framing the head passes the
        // parser's field limit: a client like it refuses it.
        return;
    }
    let status = head.status;
    let edits = edits(selector);
    let keep_length = selector & 4 != 0;
    let upstream = Head::H1(buf, &fields);

    let h2 = client_h2(status, upstream, keep_length, edits.as_ref());
    assert_eq!(h2.status(), status);
    let headers = h2.headers();
    for name in headers.keys() {
        assert!(
            !connection_specific(name.as_str()),
            "{name} sent over HTTP/2"
        );
    }
    if !keep_length {
        assert!(headers.get("content-length").is_none());
    }
    if let Some(edits) = &edits {
        assert!(headers.get("x-removed").is_none());
        assert_eq!(
            headers.get_all("x-set").iter().collect::<Vec<_>>(),
            ["proxy"]
        );
        assert!(edits
            .add
            .iter()
            .all(|(n, v)| headers.get_all(n).iter().any(|got| got == v)));
    }

    // Once converted, converting again changes nothing, by either path.
    let map = headers.clone();
    let twice = client_h2(status, Head::H2(&map), true, None);
    assert_eq!(twice.headers(), headers);
    let taken = client_h2_from(status, map);
    assert_eq!(taken.headers(), headers);

    // For an HTTP/1.1 client: framed by the proxy when the length is not
    // kept, the same fields otherwise.
    let bodiless = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let length = if keep_length || bodiless {
        None
    } else {
        Some(0)
    };
    let written = client_h1(status, upstream, length, edits.as_ref());
    let mut again: Vec<Field> = Vec::new();
    let reparsed = parse_response_head(&written, LIMITS.max_head, false, &mut again);
    let Ok(Some(reparsed)) = reparsed else {
        panic!(
            "the client's head does not parse: {reparsed:?}\n{}",
            String::from_utf8_lossy(&written)
        );
    };
    assert_eq!(reparsed.status, status);
    let mut h1 = by_name(h1_fields(&written, &again));
    h1.retain(|name, _| !connection_specific(name));
    let mut h2_fields = by_name(map_fields(headers));
    if !keep_length {
        // The proxy's own framing (or, without a body, the upstream's
        // length passed on) over HTTP/1.1; none over HTTP/2.
        h1.remove("content-length");
        h2_fields.remove("content-length");
    }
    assert_eq!(h2_fields, h1, "\n{}", String::from_utf8_lossy(&written));
}
