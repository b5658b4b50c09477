//! Which protocol upgrades pass (RFC 9110 7.8). A route lists the
//! protocols its requests may switch to (`routes[].upgrades`); the others
//! are removed from the request, which then stays plain HTTP. `h2c` is
//! never relayed: once the upstream switched, the connection would carry
//! HTTP/2 requests that no route or chain ever sees (h2c smuggling).

use http1::request::trim;

/// What of a request's `Upgrade` goes upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Offer {
    /// The protocols that pass, comma-separated; empty: none, and the
    /// request is forwarded as a plain one.
    pub kept: Vec<u8>,
    /// How many offered protocols were taken out.
    pub removed: usize,
}

/// The protocols of `offered` (the values of the request's `Upgrade`
/// fields) that `allowed` lists (compared by name, any case, without a
/// `/version`).
pub fn offer<'a>(offered: impl IntoIterator<Item = &'a [u8]>, allowed: &[String]) -> Offer {
    let mut result = Offer::default();
    for protocol in offered
        .into_iter()
        .flat_map(|value| value.split(|&b| b == b','))
        .map(trim)
        .filter(|p| !p.is_empty())
    {
        if !is_allowed(protocol, allowed) {
            result.removed += 1;
            continue;
        }
        if !result.kept.is_empty() {
            result.kept.extend_from_slice(b", ");
        }
        result.kept.extend_from_slice(protocol);
    }
    result
}

fn is_allowed(protocol: &[u8], allowed: &[String]) -> bool {
    let name = name(protocol);
    !name.eq_ignore_ascii_case(b"h2c")
        && allowed
            .iter()
            .any(|a| name.eq_ignore_ascii_case(a.as_bytes()))
}

/// Whether a `101` answer's `Upgrade` value switches to a protocol that
/// `offered` (the list sent upstream) names.
pub fn switched_to_offered(answered: &[u8], offered: &[u8]) -> bool {
    let switched = name(trim(
        answered.split(|&b| b == b',').next().unwrap_or_default(),
    ));
    !switched.is_empty()
        && offered
            .split(|&b| b == b',')
            .any(|p| name(trim(p)).eq_ignore_ascii_case(switched))
}

/// A protocol's name, without its `/version`.
fn name(protocol: &[u8]) -> &[u8] {
    protocol.split(|&b| b == b'/').next().unwrap_or_default()
}
