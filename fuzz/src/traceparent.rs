//! W3C `traceparent` (crates/proxy/src/wire/traceparent.rs, the tracer's
//! parser in telemetry/trace and the correlation handler's continuation).
//! The input is a candidate value, then (after a NUL) an HTTP/1.1 request
//! head with whatever follows it.
//!
//! - The tracer and the correlation handler accept the same values; an
//!   accepted value written again from its ids gives the same bytes (the
//!   flags byte aside, which the tracer writes as `01`).
//! - The handler's next value is always valid; it keeps a valid parent's
//!   trace id and flags, and starts a new trace otherwise.
//! - Set in the head the proxy writes upstream for a client's head (the
//!   input's, when the proxy's parser accepts it): the head still parses,
//!   its first `traceparent` field has the value (one added when there
//!   was none), every other field and the bytes after the head are
//!   unchanged, and setting it again changes nothing. In an HTTP/2 map
//!   it is the one value.

use http::HeaderMap;
use http1::{parse_head_into, Field, Limits};
use proxy::{
    fuzzing::{is_traceparent, next_traceparent, parse_traceparent, traceparent},
    wire::fuzzing::{set_traceparent_h1, set_traceparent_map, upstream_h1},
};

/// The most fields the proxy's parser takes in a head.
pub(crate) const MAX_FIELDS: usize = 100;

const LIMITS: Limits = Limits {
    max_head: 8 * 1024,
    max_body: 64 * 1024,
};

fn number(bytes: &[u8]) -> u128 {
    bytes
        .iter()
        .take(16)
        .fold(0u128, |acc, &b| acc << 8 | u128::from(b))
}

pub fn check(data: &[u8]) {
    let (value, head) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let parsed = parse_traceparent(value);
    assert_eq!(parsed.is_some(), is_traceparent(value), "{value:?}");
    if let Some((trace, span, sampled)) = parsed {
        let written = traceparent(trace, span);
        assert_eq!(written[..53], value[..53]);
        assert_eq!(written[..] == *value, &value[53..] == b"01");
        let flags = u8::from_str_radix(std::str::from_utf8(&value[53..]).unwrap(), 16).unwrap();
        assert_eq!(sampled, flags & 1 == 1);
    }

    let trace = number(head);
    let span = number(head.get(16..).unwrap_or_default()) as u64;
    let next = next_traceparent(Some(value), trace, span);
    let (next_trace, next_span, _) = parse_traceparent(&next).expect("the next value is valid");
    assert_eq!(next_span, span.max(1));
    match parsed {
        Some((parent_trace, _, _)) => {
            assert_eq!(next_trace, parent_trace);
            assert_eq!(next[53..], value[53..]);
        }
        None => assert_eq!(next_trace, trace.max(1)),
    }

    let mut map = HeaderMap::new();
    map.append("traceparent", "old".parse().unwrap());
    map.append("traceparent", "older".parse().unwrap());
    set_traceparent_map(&mut map, &next);
    let values: Vec<_> = map.get_all("traceparent").iter().collect();
    assert_eq!(values, [&next[..]]);

    set_in_head(head, &next);
}

fn fields_of<'a>(buf: &'a [u8], fields: &'a [Field]) -> Vec<(&'a [u8], &'a [u8])> {
    fields
        .iter()
        .map(|(n, v)| (&buf[n.clone()], &buf[v.clone()]))
        .collect()
}

/// `value` set in the head the proxy writes upstream for the client's
/// head `input` (the only heads `set_in_h1` is given), a body after it.
fn set_in_head(input: &[u8], value: &[u8; 55]) {
    let mut fields: Vec<Field> = Vec::new();
    let Ok(Some(parsed)) = parse_head_into(input, &LIMITS, &mut fields) else {
        return;
    };
    if fields.len() + 5 > MAX_FIELDS {
        return; // see h2_heads: past the field limit with what is added.
    }
    if parsed.host.is_none() {
        return; // see h2_heads: no Host is written upstream for HTTP/1.0.
    }
    let client = crate::h2_heads::client(0, input, &parsed, &fields);
    let head = upstream_h1(&client);
    let body = &input[parsed.len..];
    let mut buf = [&head[..], body].concat();
    let mut before: Vec<Field> = Vec::new();
    parse_head_into(&head, &LIMITS, &mut before)
        .ok()
        .flatten()
        .expect("the upstream head parses (h2_heads checks it)");
    if before.len() >= MAX_FIELDS {
        // One more field than a head may hold: the upstream refuses it
        // (431) whatever the value; nothing of set_in_h1 to check.
        return;
    }
    set_traceparent_h1(&mut buf, value);
    let mut after: Vec<Field> = Vec::new();
    let reparsed = parse_head_into(&buf, &LIMITS, &mut after);
    let Ok(Some(reparsed)) = reparsed else {
        panic!(
            "the head with traceparent does not parse: {reparsed:?}\n{}",
            String::from_utf8_lossy(&buf)
        );
    };
    assert_eq!(&buf[reparsed.len..], body, "the bytes after the head");

    let is_traceparent = |name: &[u8]| name.eq_ignore_ascii_case(b"traceparent");
    let mut before = fields_of(&head, &before);
    let mut now = fields_of(&buf, &after);
    let first = now
        .iter()
        .position(|(n, _)| is_traceparent(n))
        .expect("a traceparent field");
    assert_eq!(now[first].1, &value[..]);
    now.remove(first);
    if let Some(replaced) = before.iter().position(|(n, _)| is_traceparent(n)) {
        before.remove(replaced);
    }
    assert_eq!(now, before);

    let once = buf.clone();
    set_traceparent_h1(&mut buf, value);
    assert_eq!(buf, once, "setting the same value again changes the head");
}
