//! The `Alt-Svc` field (RFC 7838) a TLS listener that also serves HTTP/3
//! adds to its responses, so that clients learn they may switch.

use std::num::NonZeroU16;

use http::HeaderValue;

/// How long a client may remember the offer: a day, as Caddy and
/// Cloudflare send it.
const MAX_AGE: u32 = 86_400;

/// `h3=":PORT"; ma=86400`.
pub(crate) fn value(port: NonZeroU16) -> HeaderValue {
    let text = format!("h3=\":{port}\"; ma={MAX_AGE}");
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("clear"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_port_and_a_day() {
        let port = NonZeroU16::new(8443).expect("not zero");
        assert_eq!(value(port), "h3=\":8443\"; ma=86400");
    }
}
