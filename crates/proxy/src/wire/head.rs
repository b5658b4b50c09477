//! Header rewriting between client and upstream (RFC 9110 7.6): hop-by-hop
//! fields dropped (the fixed list and whatever `Connection` names),
//! framing fields re-emitted for the framing we actually send,
//! `X-Forwarded-*` appended, `Host` optionally replaced.

use std::{net::IpAddr, ops::Range};

use http::{HeaderValue, StatusCode};
use http1::{Field, Head, Persistence};

use super::edits::HeaderEdits;

/// Fields that describe one connection, never forwarded.
pub(crate) const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// How a body is framed on the side we write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body, or a head-only answer whose length fields pass unchanged.
    None,
    Length(u64),
    Chunked,
    /// Raw bytes, then close (answers to HTTP/1.0 clients).
    Close,
}

/// Which `Upgrade` goes upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offered<'a> {
    /// The client's field, all of whose protocols the route allows.
    AsSent,
    /// Only these protocols (the others were taken out).
    Only(&'a [u8]),
}

/// What the upstream request needs beyond the client's head.
#[derive(Debug)]
pub(crate) struct RequestContext<'a> {
    pub peer: IpAddr,
    /// The client came over TLS.
    pub secure: bool,
    pub trust_forwarded: bool,
    pub host_header: Option<&'a HeaderValue>,
    /// The normalised path and Host value, where they differ from the
    /// client's (`paths.forward`; an absolute-form authority).
    pub path: Option<&'a str>,
    pub host: Option<&'a str>,
    /// The protocols offered upstream (`Upgrade`); `None`: a plain request.
    pub upgrade: Option<Offered<'a>>,
    pub framing: Framing,
    /// Changes from the route's middleware.
    pub edits: Option<&'a HeaderEdits>,
}

/// Appends the request head to send upstream: request line, the client's
/// fields minus hop-by-hop ones, then `X-Forwarded-*` and framing.
pub(crate) fn request_head(
    out: &mut Vec<u8>,
    buf: &[u8],
    head: &Head,
    fields: &[Field],
    context: &RequestContext<'_>,
) {
    out.extend_from_slice(head.method.as_str().as_bytes());
    out.push(b' ');
    let path = context.path.map_or(&buf[head.path.clone()], str::as_bytes);
    out.extend_from_slice(if path.is_empty() { b"/" } else { path });
    if let Some(query) = &head.query {
        out.push(b'?');
        out.extend_from_slice(&buf[query.clone()]);
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");

    let mut forwarded_for: Option<Range<usize>> = None;
    let mut forwarded_proto = false;
    let mut forwarded_host = false;
    let hop_by_hop = HopByHop::new(buf, fields);
    for (name, value) in fields {
        let name_bytes = &buf[name.clone()];
        let lower = |wanted: &str| name_bytes.eq_ignore_ascii_case(wanted.as_bytes());
        let upgrade_as_sent = context.upgrade == Some(Offered::AsSent) && lower("upgrade");
        if hop_by_hop.contains(name_bytes) && !upgrade_as_sent
            || lower("content-length")
            || lower("expect")
            // Never relayed: asks the upstream to switch to h2c (issue 15).
            || lower("http2-settings")
            || (lower("host") && (context.host_header.is_some() || context.host.is_some()))
            || context.edits.is_some_and(|edits| edits.drops(name_bytes))
        {
            continue;
        }
        if lower("x-forwarded-for") {
            // Several fields are one list (RFC 9110 5.3); keep the first's place.
            if context.trust_forwarded && forwarded_for.is_none() {
                forwarded_for = Some(value.clone());
            }
            continue;
        }
        if lower("x-forwarded-proto") || lower("x-forwarded-host") {
            if !context.trust_forwarded {
                continue;
            }
            forwarded_proto |= lower("x-forwarded-proto");
            forwarded_host |= lower("x-forwarded-host");
        }
        field(out, name_bytes, &buf[value.clone()]);
    }
    if let Some(host) = context.host_header.map(HeaderValue::as_bytes) {
        field(out, b"host", host);
    } else if let Some(host) = context.host {
        field(out, b"host", host.as_bytes());
    }
    out.extend_from_slice(b"x-forwarded-for: ");
    if let Some(prior) = forwarded_for {
        // Later X-Forwarded-For fields join the first one's list.
        out.extend_from_slice(&buf[prior]);
        for (name, value) in fields
            .iter()
            .skip_while(|(n, _)| !buf[n.clone()].eq_ignore_ascii_case(b"x-forwarded-for"))
            .skip(1)
        {
            if buf[name.clone()].eq_ignore_ascii_case(b"x-forwarded-for") {
                out.extend_from_slice(b", ");
                out.extend_from_slice(&buf[value.clone()]);
            }
        }
        out.extend_from_slice(b", ");
    }
    push_ip(out, context.peer);
    out.extend_from_slice(b"\r\n");
    if !forwarded_proto {
        let proto: &[u8] = if context.secure { b"https" } else { b"http" };
        field(out, b"x-forwarded-proto", proto);
    }
    let client_host = context
        .host
        .map(str::as_bytes)
        .or_else(|| head.host.clone().map(|host| &buf[host]));
    if let (false, Some(host)) = (forwarded_host, client_host) {
        field(out, b"x-forwarded-host", host);
    }
    if let Some(offered) = context.upgrade {
        if let Offered::Only(protocols) = offered {
            field(out, b"upgrade", protocols);
        }
        field(out, b"connection", b"upgrade");
    }
    for (name, value) in context.edits.iter().flat_map(|edits| edits.appended()) {
        field(out, name, value);
    }
    framing_fields(out, context.framing);
    out.extend_from_slice(b"\r\n");
}

/// Appends the response head for the client: status line, the upstream's
/// fields minus hop-by-hop ones, then framing and persistence.
pub(crate) fn response_head(
    out: &mut Vec<u8>,
    status: StatusCode,
    buf: &[u8],
    fields: &[Field],
    framing: Framing,
    persistence: Persistence,
    edits: Option<&HeaderEdits>,
) {
    http1::response::status_line(out, status);
    let switching = status == StatusCode::SWITCHING_PROTOCOLS;
    let keep_length = framing == Framing::None;
    let hop_by_hop = HopByHop::new(buf, fields);
    for (name, value) in fields {
        let name_bytes = &buf[name.clone()];
        if switching && name_bytes.eq_ignore_ascii_case(b"upgrade") {
            field(out, name_bytes, &buf[value.clone()]);
            continue;
        }
        if hop_by_hop.contains(name_bytes)
            || (!keep_length && name_bytes.eq_ignore_ascii_case(b"content-length"))
            || edits.is_some_and(|edits| edits.drops(name_bytes))
        {
            continue;
        }
        field(out, name_bytes, &buf[value.clone()]);
    }
    for (name, value) in edits.iter().flat_map(|edits| edits.appended()) {
        field(out, name, value);
    }
    framing_fields(out, framing);
    if switching {
        out.extend_from_slice(b"connection: upgrade\r\n");
    } else {
        match persistence {
            Persistence::KeepAlive => {}
            Persistence::KeepAlive10 => out.extend_from_slice(b"connection: keep-alive\r\n"),
            Persistence::Close => out.extend_from_slice(b"connection: close\r\n"),
        }
    }
    out.extend_from_slice(b"\r\n");
}

fn framing_fields(out: &mut Vec<u8>, framing: Framing) {
    match framing {
        Framing::None | Framing::Close => {}
        Framing::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
}

fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// The hop-by-hop fields of one message: the fixed list and the tokens of
/// its `Connection` fields, gathered once so that checking every field
/// stays linear in the head's size.
struct HopByHop<'a> {
    named: Vec<&'a [u8]>,
}

impl<'a> HopByHop<'a> {
    fn new(buf: &'a [u8], fields: &[Field]) -> Self {
        let named = fields
            .iter()
            .filter(|(n, _)| buf[n.clone()].eq_ignore_ascii_case(b"connection"))
            .flat_map(|(_, v)| buf[v.clone()].split(|&b| b == b','))
            .map(http1::request::trim)
            .filter(|token| !token.is_empty())
            .collect();
        Self { named }
    }

    fn contains(&self, name: &[u8]) -> bool {
        HOP_BY_HOP
            .iter()
            .any(|hop| name.eq_ignore_ascii_case(hop.as_bytes()))
            || self
                .named
                .iter()
                .any(|token| token.eq_ignore_ascii_case(name))
    }
}

fn push_ip(out: &mut Vec<u8>, ip: IpAddr) {
    use std::io::Write as _;
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    match ip {
        // Formatting machinery shows in profiles; an IPv4 address is four numbers.
        IpAddr::V4(v4) => {
            let mut digits = itoa::Buffer::new();
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                out.extend_from_slice(digits.format(octet).as_bytes());
            }
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn forward(raw: &str, trust: bool, host_header: Option<&HeaderValue>) -> String {
        let mut fields = Vec::new();
        let limits = http1::Limits {
            max_head: 4096,
            max_body: 4096,
        };
        let head = http1::parse_head_into(raw.as_bytes(), &limits, &mut fields)
            .unwrap()
            .unwrap();
        let mut out = Vec::new();
        let context = RequestContext {
            peer: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)),
            secure: false,
            trust_forwarded: trust,
            host_header,
            path: None,
            host: None,
            upgrade: head.upgrade.then_some(Offered::AsSent),
            framing: Framing::None,
            edits: None,
        };
        request_head(&mut out, raw.as_bytes(), &head, &fields, &context);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn hop_by_hop_fields_are_dropped() {
        let out = forward(
            "GET /a?b=1 HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Secret\r\nX-Secret: s\r\nKeep-Alive: 5\r\nTE: trailers\r\nUpgrade: h2c\r\nAccept: */*\r\n\r\n",
            false,
            None,
        );
        assert_eq!(
            out,
            "GET /a?b=1 HTTP/1.1\r\nHost: h\r\nAccept: */*\r\nx-forwarded-for: 10.0.0.9\r\nx-forwarded-proto: http\r\nx-forwarded-host: h\r\n\r\n"
        );
    }

    #[test]
    fn forwarded_fields_are_replaced_unless_trusted() {
        let raw = "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-Proto: https\r\nX-Forwarded-For: 2.2.2.2\r\nX-Forwarded-Host: outer\r\n\r\n";
        let untrusted = forward(raw, false, None);
        assert!(
            !untrusted.contains("1.1.1.1")
                && !untrusted.contains("https")
                && !untrusted.contains("outer")
        );
        assert!(untrusted.contains("x-forwarded-for: 10.0.0.9\r\n"));
        let trusted = forward(raw, true, None);
        assert!(
            trusted.contains("x-forwarded-for: 1.1.1.1, 2.2.2.2, 10.0.0.9\r\n"),
            "{trusted}"
        );
        assert!(
            trusted.contains("X-Forwarded-Proto: https\r\n")
                && !trusted.contains("x-forwarded-proto")
        );
        assert!(
            trusted.contains("X-Forwarded-Host: outer\r\n")
                && !trusted.contains("x-forwarded-host")
        );
    }

    #[test]
    fn host_rewrite_and_upgrade() {
        let value = HeaderValue::from_static("backend.internal");
        let out = forward(
            "GET /ws HTTP/1.1\r\nHost: public\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            false,
            Some(&value),
        );
        assert!(out.contains("host: backend.internal\r\n") && !out.contains("Host: public"));
        assert!(out.contains("Upgrade: websocket\r\n") && out.contains("connection: upgrade\r\n"));
        assert!(out.contains("x-forwarded-host: public\r\n"));
    }

    #[test]
    fn response_heads_reframe() {
        let raw = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nX-Keep: 2\r\n\r\n";
        let mut fields = Vec::new();
        http1::parse_response_head(raw.as_bytes(), 4096, false, &mut fields).unwrap();
        let mut out = Vec::new();
        response_head(
            &mut out,
            StatusCode::OK,
            raw.as_bytes(),
            &fields,
            Framing::Chunked,
            Persistence::KeepAlive,
            None,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 200 OK\r\nX-Keep: 2\r\ntransfer-encoding: chunked\r\n\r\n"
        );
    }
}
