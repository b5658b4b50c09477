//! Trailers to fields (crates/proxy/src/wire/trailers.rs): any trailer
//! section after a last chunk, read as the proxy reads an upstream's
//! (the chunked decoder's trailer lines, `split_field`, valid names and
//! values kept), then filtered under the route's header edits. Exactly
//! the fields that are neither controlled, nor named by the edits, nor
//! padded pass, each name's values in order; the count returned is the
//! number removed; filtering again removes nothing; and what passes,
//! written as an HTTP/1.1 trailer section, reads back as the same fields.

use http::{HeaderMap, HeaderName, HeaderValue};
use http1::{
    chunked::{encode_last_chunk, split_field, ChunkedDecoder, Part},
    Limits,
};
use proxy::wire::fuzzing::{controlled_trailer, padded, remove_controlled_trailers, Edits};

const LIMITS: Limits = Limits {
    max_head: 8 * 1024,
    max_body: 64 * 1024,
};

/// The trailer fields of a chunked body, as the proxy collects them; `None`
/// when the body is refused or incomplete.
fn read_trailers(body: &[u8]) -> Option<HeaderMap> {
    let mut trailers = HeaderMap::new();
    let decoded = ChunkedDecoder::default()
        .decode_parts(body, &LIMITS, |part| {
            if let Part::Trailer(line) = part {
                if let Some((name, value)) = split_field(line) {
                    if let (Ok(name), Ok(value)) =
                        (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
                    {
                        trailers.append(name, value);
                    }
                }
            }
        })
        .ok()?;
    decoded.done.then_some(trailers)
}

fn edits(selector: u8) -> Option<Edits> {
    let mut edits = Edits::default();
    if selector & 1 != 0 {
        edits.remove.push(HeaderName::from_static("x-removed"));
    }
    if selector & 2 != 0 {
        edits.set.push((
            HeaderName::from_static("x-user"),
            HeaderValue::from_static("alice"),
        ));
    }
    if selector & 4 != 0 {
        edits.add.push((
            HeaderName::from_static("grpc-status"),
            HeaderValue::from_static("0"),
        ));
    }
    (selector & 8 != 0).then_some(edits)
}

/// Every name the edits drop, set or add.
fn named(edits: Option<&Edits>, name: &HeaderName) -> bool {
    edits.is_some_and(|edits| {
        edits.remove.contains(name) || edits.set.iter().chain(&edits.add).any(|(n, _)| n == name)
    })
}

/// Each name's values in order.
fn listed(map: &HeaderMap) -> Vec<(String, Vec<Vec<u8>>)> {
    map.keys()
        .map(|name| {
            let values = map.get_all(name).iter().map(|v| v.as_bytes().to_vec());
            (name.to_string(), values.collect())
        })
        .collect()
}

pub fn check(data: &[u8]) {
    let Some((&selector, section)) = data.split_first() else {
        return;
    };
    let mut body = b"0\r\n".to_vec();
    body.extend_from_slice(section);
    let Some(mut trailers) = read_trailers(&body) else {
        return;
    };
    let edits = edits(selector);
    let before = trailers.clone();
    let mut expected = HeaderMap::new();
    for name in before.keys() {
        let removed = controlled_trailer(name.as_str().as_bytes()) || named(edits.as_ref(), name);
        for value in before.get_all(name) {
            if !removed && !padded(value.as_bytes()) {
                expected.append(name.clone(), value.clone());
            }
        }
    }
    let removed = remove_controlled_trailers(&mut trailers, edits.as_ref());
    assert_eq!(listed(&trailers), listed(&expected), "from {before:?}");
    assert_eq!(removed, before.len() - trailers.len());
    assert_eq!(remove_controlled_trailers(&mut trailers, edits.as_ref()), 0);

    let mut written = Vec::new();
    encode_last_chunk(
        &mut written,
        trailers
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes())),
    );
    let read = read_trailers(&written).expect("the proxy's trailer section reads back");
    assert_eq!(listed(&read), listed(&trailers));
}
