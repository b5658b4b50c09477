//! A redirect's `Location` from its parts: the one writer of it, for a
//! route's `redirect` and the `redirect_https` handler. What it is given
//! comes from the normalised request and from settings checked at load;
//! it still refuses a value that is not visible ASCII, so that no header
//! gets a CR or LF.

use std::fmt::Write as _;

/// The parts of a redirect's `Location`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Location<'a> {
    /// `http` or `https`.
    pub scheme: &'a str,
    pub host: &'a str,
    /// Left out when it is the scheme's well-known one.
    pub port: Option<u16>,
    pub path: &'a str,
    pub query: Option<&'a [u8]>,
}

impl Location<'_> {
    /// The `Location` value; `None` when the query holds a byte a field
    /// value cannot (it came from an HTTP/2 or HTTP/3 client's `:path`).
    pub(crate) fn value(&self) -> Option<String> {
        let mut out = String::with_capacity(self.path.len() + self.host.len() + 16);
        let _ = write!(out, "{}://", self.scheme);
        match self.host.contains(':') && !self.host.starts_with('[') {
            // An IPv6 literal without its brackets.
            true => {
                let _ = write!(out, "[{}]", self.host);
            }
            false => out.push_str(self.host),
        }
        let default = if self.scheme == "https" { 443 } else { 80 };
        if let Some(port) = self.port.filter(|&p| p != default) {
            let _ = write!(out, ":{port}");
        }
        out.push_str(self.path);
        if let Some(query) = self.query {
            if !query.iter().all(|&b| b.is_ascii_graphic()) {
                return None;
            }
            out.push('?');
            out.push_str(std::str::from_utf8(query).ok()?);
        }
        out.bytes().all(|b| b.is_ascii_graphic()).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_leave_out_well_known_ports_and_refuse_what_is_not_text() {
        let at = |scheme, port, query: Option<&'static [u8]>| Location {
            scheme,
            host: "example.org",
            port,
            path: "/a",
            query,
        };
        assert_eq!(
            at("http", Some(80), None).value().unwrap(),
            "http://example.org/a"
        );
        assert_eq!(
            at("https", Some(443), None).value().unwrap(),
            "https://example.org/a"
        );
        assert_eq!(
            at("http", Some(8443), Some(b"q=1")).value().unwrap(),
            "http://example.org:8443/a?q=1"
        );
        assert_eq!(
            at("https", Some(80), None).value().unwrap(),
            "https://example.org:80/a"
        );
        assert_eq!(
            at("http", None, None).value().unwrap(),
            "http://example.org/a"
        );
        for bad in [&b"a=\r\nx: y"[..], b"a b", b"\xff"] {
            assert_eq!(at("http", None, Some(bad)).value(), None, "{bad:?}");
        }
        let v6 = Location {
            host: "::1",
            ..at("http", Some(8080), None)
        };
        assert_eq!(v6.value().unwrap(), "http://[::1]:8080/a");
    }
}
