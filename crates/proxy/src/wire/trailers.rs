//! Trailer fields that cross the proxy (RFC 9110 6.5). A trailer comes
//! after the head rules and the middleware have done their work, and
//! several frameworks merge trailers into the headers they hand the
//! application: a trailer `x-forwarded-for`, `authorization` or a field a
//! handler sets would walk around every rule applied to the head. So
//! wherever trailers pass, the fields the proxy controls in heads are
//! removed from them, in both directions: framing and hop-by-hop fields,
//! routing and identity fields, the override fields, and every field the
//! route's middleware sets, adds or removes (the `headers` handler's
//! rules, the jwt handler's forwarded claims, the correlation ids).

use http::HeaderMap;

use super::{
    edits::HeaderEdits,
    head::{is_override, HOP_BY_HOP},
    http2,
};

/// Fields that are never taken from a trailer section, beyond
/// [`HOP_BY_HOP`] and the override fields.
const CONTROLLED: [&str; 12] = [
    "host",
    "content-length",
    "content-type",
    "content-encoding",
    "content-range",
    "forwarded",
    "x-real-ip",
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "expect",
];

/// Whether a trailer field called `name` is one the proxy controls in
/// heads (before the middleware's own fields are asked about).
pub(crate) fn controlled(name: &[u8]) -> bool {
    let is = |list: &[&str]| list.iter().any(|c| name.eq_ignore_ascii_case(c.as_bytes()));
    is(&HOP_BY_HOP)
        || is(&CONTROLLED)
        || (name.len() > 12 && name[..12].eq_ignore_ascii_case(b"x-forwarded-"))
        || is_override(name)
}

/// Removes from `trailers` what may not pass: [`controlled`] fields,
/// fields `edits` names (set, added or removed by the route's
/// middleware), and fields whose value is padded with whitespace (which
/// make an HTTP/2 message malformed). How many fields were removed.
pub(crate) fn remove_controlled(trailers: &mut HeaderMap, edits: Option<&HeaderEdits>) -> usize {
    let named_by_edits = |name: &[u8]| {
        edits.is_some_and(|edits| {
            edits.drops(name)
                || edits
                    .add
                    .iter()
                    .any(|(n, _)| name.eq_ignore_ascii_case(n.as_str().as_bytes()))
        })
    };
    let before = trailers.len();
    let kept: HeaderMap = std::mem::take(trailers)
        .into_iter()
        .scan(None, |name, (next, value)| {
            // `into_iter` names a field's first value only.
            if let Some(next) = next {
                *name = Some(next);
            }
            Some((name.clone(), value))
        })
        .filter_map(|(name, value)| {
            let name = name?;
            let bytes = name.as_str().as_bytes();
            let removed =
                controlled(bytes) || named_by_edits(bytes) || http2::padded(value.as_bytes());
            (!removed).then_some((name, value))
        })
        .collect();
    *trailers = kept;
    before - trailers.len()
}

#[cfg(test)]
mod tests {
    use http::{HeaderName, HeaderValue};

    use super::*;

    fn map(fields: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in fields {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn fields_the_head_rules_control_do_not_pass_in_trailers() {
        let mut trailers = map(&[
            ("grpc-status", "0"),
            ("grpc-message", "ok"),
            ("x-checksum", "abc"),
            ("x-checksum", "def"),
            ("host", "evil.example"),
            ("content-length", "1"),
            ("transfer-encoding", "chunked"),
            ("connection", "close"),
            ("te", "trailers"),
            ("x-forwarded-for", "10.0.0.1"),
            ("X-Forwarded-Proto", "https"),
            ("forwarded", "for=10.0.0.1"),
            ("authorization", "Bearer forged"),
            ("cookie", "session=forged"),
            ("x-original-url", "/admin"),
            ("x-http-method-override", "DELETE"),
            ("x-internal", "forged"),
            ("x-user", "admin"),
            ("x-added", "forged"),
            ("x-removed", "forged"),
            ("x-padded", " a"),
        ]);
        let mut edits = HeaderEdits::default();
        edits.set(
            HeaderName::from_static("x-internal"),
            HeaderValue::from_static("proxy"),
        );
        edits.set(
            HeaderName::from_static("x-user"),
            HeaderValue::from_static("alice"),
        );
        edits.add.push((
            HeaderName::from_static("x-added"),
            HeaderValue::from_static("1"),
        ));
        edits.remove.push(HeaderName::from_static("x-removed"));
        let removed = remove_controlled(&mut trailers, Some(&edits));
        let kept: Vec<_> = trailers
            .iter()
            .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap()))
            .collect();
        assert_eq!(
            kept,
            [
                "grpc-status: 0",
                "grpc-message: ok",
                "x-checksum: abc",
                "x-checksum: def"
            ]
        );
        assert_eq!(removed, 17);
    }

    #[test]
    fn without_edits_only_the_fixed_rules_apply() {
        let mut trailers = map(&[("x-internal", "1"), ("x-forwarded-host", "h")]);
        assert_eq!(remove_controlled(&mut trailers, None), 1);
        assert_eq!(trailers.len(), 1);
        assert!(trailers.contains_key("x-internal"));
    }
}
