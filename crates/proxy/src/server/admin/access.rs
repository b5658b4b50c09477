//! Who may use the admin API (docs/CONFIG.md, "Admin API"): the `Host` a
//! request names (against DNS rebinding), and the bearer token that read
//! endpoints outside `admin.open` and every endpoint that changes state
//! need. The token is compared in constant time and never logged.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::config::AdminSettings;

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Allowed,
    /// 401: the token is needed; `wrong` when one was sent that does not match.
    Unauthorized {
        wrong: bool,
    },
    /// 403: the endpoint changes state, the listener is reachable from
    /// other hosts, and no token is configured that could allow it.
    NoToken,
}

/// `host` (a `Host` field or an absolute-form target's authority) names
/// the admin listener: an IP literal, `localhost`, or one of `names`
/// (case-insensitive, any port, a trailing dot allowed). A page whose
/// name an attacker rebinds to this address sends its own name.
pub(super) fn host_allowed(host: &[u8], names: &[impl AsRef<str>]) -> bool {
    let Ok(host) = std::str::from_utf8(host) else {
        return false;
    };
    if let Some(rest) = host.strip_prefix('[') {
        // `[v6]` or `[v6]:port`.
        return rest.split_once(']').is_some_and(|(ip, port)| {
            ip.parse::<Ipv6Addr>().is_ok() && (port.is_empty() || is_port(port.strip_prefix(':')))
        });
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if is_port(Some(port)) => name,
        Some(_) => return false,
        None => host,
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    name.parse::<Ipv4Addr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || names.iter().any(|n| {
            let n = n.as_ref();
            n.strip_suffix('.').unwrap_or(n).eq_ignore_ascii_case(name)
        })
}

fn is_port(port: Option<&str>) -> bool {
    port.is_some_and(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// May a request for `endpoint` with this `Authorization` field go on?
/// With a token configured: read endpoints in `admin.open` without it,
/// everything else with it. Without one: everything, except what
/// changes state on a listener beyond loopback.
pub(super) fn authorize(
    admin: Option<&AdminSettings>,
    beyond_loopback: bool,
    endpoint: &str,
    changes_state: bool,
    authorization: Option<&[u8]>,
) -> Verdict {
    let Some(token) = admin.and_then(|a| a.bearer.as_ref()) else {
        return if changes_state && beyond_loopback {
            Verdict::NoToken
        } else {
            Verdict::Allowed
        };
    };
    if !changes_state && admin.is_some_and(|a| a.is_open(endpoint)) {
        return Verdict::Allowed;
    }
    match authorization.and_then(bearer) {
        Some(given) if token.matches(given) => Verdict::Allowed,
        Some(_) => Verdict::Unauthorized { wrong: true },
        None => Verdict::Unauthorized {
            wrong: authorization.is_some(),
        },
    }
}

/// The credentials of `Bearer <token>` (the scheme in any case).
fn bearer(field: &[u8]) -> Option<&[u8]> {
    let field = http1::request::trim(field);
    let scheme = field.get(..7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = http1::request::trim(&field[7..]);
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn bearer_credentials() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer   abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearer "), None);
        assert_eq!(bearer(b"Bearerabc"), None);
    }

    #[test]
    fn hosts_are_ip_literals_localhost_or_named() {
        let names = ["admin.internal", "Sluice.Example."];
        for host in [
            "127.0.0.1",
            "127.0.0.1:9901",
            "10.1.2.3:80",
            "[::1]",
            "[::1]:9901",
            "[fe80::1]:1",
            "localhost",
            "LOCALHOST:9901",
            "localhost.:9901",
            "admin.internal:9901",
            "ADMIN.internal",
            "sluice.example:1",
        ] {
            assert!(host_allowed(host.as_bytes(), &names), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:9901",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "sub.admin.internal",
            "127.0.0.1:x",
            "[::1",
            "[::1]x",
            "[evil]:1",
            "",
            ":9901",
            "admin.internal:99999999",
        ] {
            assert!(!host_allowed(host.as_bytes(), &names), "{host}");
        }
        assert!(!host_allowed(b"\xff", &names));
    }
}
