//! The HPACK static table (RFC 7541 Appendix A), indexed from 1.

/// Entries 1 to 61, at positions 0 to 60.
pub(crate) const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The first static index (1-based) named `name`, and the index whose
/// value is `value` too, if any: what the encoder looks for.
pub(crate) fn find(name: &[u8], value: &[u8]) -> (Option<usize>, Option<usize>) {
    let range = match name {
        b":authority" => 1..2,
        b":method" => 2..4,
        b":path" => 4..6,
        b":scheme" => 6..8,
        b":status" => 8..15,
        _ => {
            // Regular names stand once each, from 15 on.
            let index = match name {
                b"accept-charset" => 15,
                b"accept-encoding" => 16,
                b"accept-language" => 17,
                b"accept-ranges" => 18,
                b"accept" => 19,
                b"access-control-allow-origin" => 20,
                b"age" => 21,
                b"allow" => 22,
                b"authorization" => 23,
                b"cache-control" => 24,
                b"content-disposition" => 25,
                b"content-encoding" => 26,
                b"content-language" => 27,
                b"content-length" => 28,
                b"content-location" => 29,
                b"content-range" => 30,
                b"content-type" => 31,
                b"cookie" => 32,
                b"date" => 33,
                b"etag" => 34,
                b"expect" => 35,
                b"expires" => 36,
                b"from" => 37,
                b"host" => 38,
                b"if-match" => 39,
                b"if-modified-since" => 40,
                b"if-none-match" => 41,
                b"if-range" => 42,
                b"if-unmodified-since" => 43,
                b"last-modified" => 44,
                b"link" => 45,
                b"location" => 46,
                b"max-forwards" => 47,
                b"proxy-authenticate" => 48,
                b"proxy-authorization" => 49,
                b"range" => 50,
                b"referer" => 51,
                b"refresh" => 52,
                b"retry-after" => 53,
                b"server" => 54,
                b"set-cookie" => 55,
                b"strict-transport-security" => 56,
                b"transfer-encoding" => 57,
                b"user-agent" => 58,
                b"vary" => 59,
                b"via" => 60,
                b"www-authenticate" => 61,
                _ => return (None, None),
            };
            return (Some(index), None);
        }
    };
    let exact = range.clone().find(|&i| STATIC[i - 1].1 == value);
    (Some(range.start), exact)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_agrees_with_the_table() {
        for (i, (name, value)) in STATIC.iter().enumerate() {
            let (named, exact) = find(name, value);
            assert_eq!(STATIC[named.expect("found") - 1].0, *name);
            if name.starts_with(b":") {
                assert_eq!(exact, Some(i + 1));
            }
        }
        assert_eq!(find(b"accept-encoding", b"gzip"), (Some(16), None));
        assert_eq!(find(b":status", b"404"), (Some(8), Some(13)));
        assert_eq!(find(b"www-authenticate", b""), (Some(61), None));
        assert_eq!(find(b"x-unknown", b""), (None, None));
    }
}
