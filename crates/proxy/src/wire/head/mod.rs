//! Header rewriting between client and upstream (RFC 9110 7.6): hop-by-hop
//! fields dropped (the fixed list and whatever `Connection` names),
//! framing fields re-emitted for the framing we actually send,
//! `X-Forwarded-*` appended, `Host` optionally replaced.

use std::net::IpAddr;

use http::{HeaderValue, Method, StatusCode};
use http1::Persistence;

use super::{edits::HeaderEdits, fields::Fields, proxy_protocol::Proxied};

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

/// Request fields that make lenient frameworks serve another path or
/// method than the one the proxy routed: Symfony before the
/// CVE-2018-14773 fix, Zend Framework before ZF2018-01 and applications
/// behind IIS URL Rewrite take the path from `X-Original-URL` or
/// `X-Rewrite-URL`; Symfony and Laravel (on POST), Rack's
/// `MethodOverride`, Express's `method-override`, ASP.NET Core's
/// `UseHttpMethodOverride` and OData services take the method from the
/// others. Removed unless `paths.override_headers: keep`.
pub(crate) const OVERRIDES: [&str; 5] = [
    "x-original-url",
    "x-rewrite-url",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// Whether a field called `name` is one of [`OVERRIDES`].
pub(crate) fn is_override(name: &[u8]) -> bool {
    // Most names end here: none of the list is shorter or starts otherwise.
    name.len() >= 13
        && name[..2].eq_ignore_ascii_case(b"x-")
        && OVERRIDES
            .iter()
            .any(|o| name.eq_ignore_ascii_case(o.as_bytes()))
}

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

/// Where a head's fields go: a name and its value in parts (joined when
/// written), so that a composed value such as `X-Forwarded-For` costs no
/// allocation.
pub(crate) type Emit<'e> = dyn FnMut(&[u8], &[&[u8]]) + 'e;

/// The client's request as it goes upstream, whatever protocol it came in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outgoing<'a> {
    pub method: &'a Method,
    /// The path as the client sent it (may be empty: `/`).
    pub path: &'a [u8],
    pub query: Option<&'a [u8]>,
    /// The client's Host (HTTP/1.1) or `:authority` (HTTP/2).
    pub host: Option<&'a [u8]>,
    pub fields: Fields<'a>,
}

/// What the upstream request needs beyond the client's head.
#[derive(Debug)]
pub(crate) struct RequestContext<'a> {
    pub peer: IpAddr,
    /// The client came over TLS.
    pub secure: bool,
    pub trust_forwarded: bool,
    pub host_header: Option<&'a HeaderValue>,
    /// The Host for a request that came without one (HTTP/1.0 may omit
    /// it; HTTP/1.1 upstreams must get one, RFC 9112 3.2): the chosen
    /// host's `host:port` as configured, as nginx sends `$proxy_host`.
    pub fallback_host: Option<&'a str>,
    /// The normalised path and Host value, where they differ from the
    /// client's (`paths.forward`; an absolute-form authority).
    pub path: Option<&'a str>,
    pub host: Option<&'a str>,
    /// The protocols offered upstream (`Upgrade`); `None`: a plain request.
    pub upgrade: Option<Offered<'a>>,
    /// Remove [`OVERRIDES`] (set only when the request has one).
    pub strip_overrides: bool,
    pub framing: Framing,
    /// Changes from the route's middleware.
    pub edits: Option<&'a HeaderEdits>,
    /// What the client connection's PROXY protocol header said: its TLVs
    /// go upstream in the listener's headers, and the client's own
    /// fields of those names do not.
    pub proxied: Option<&'a Proxied>,
}

/// The path a request goes upstream with: the normalised one (`rewritten`)
/// where it differs, else the client's; `/` for an empty one.
pub(crate) fn sent_path<'a>(rewritten: Option<&'a str>, path: &'a [u8]) -> &'a [u8] {
    let path = rewritten.map_or(path, str::as_bytes);
    if path.is_empty() {
        b"/"
    } else {
        path
    }
}

impl<'a> RequestContext<'a> {
    /// The path to send: the normalised one where it differs, else the client's.
    pub(crate) fn path(&self, request: &Outgoing<'a>) -> &'a [u8] {
        sent_path(self.path, request.path)
    }

    /// The query to send: the client's, unless a handler took parameters
    /// out of it (`None` too when none are left).
    pub(crate) fn query(&self, request: &Outgoing<'a>) -> Option<&'a [u8]> {
        match self.edits.and_then(|edits| edits.query.as_deref()) {
            Some("") => None,
            Some(query) => Some(query.as_bytes()),
            None => request.query,
        }
    }

    /// The Host to send: a configured `host_header`, the normalised Host, or the client's.
    pub(crate) fn host(&self, request: &Outgoing<'a>) -> Option<&'a [u8]> {
        self.host_header
            .map(HeaderValue::as_bytes)
            .or_else(|| self.host.map(str::as_bytes))
            .or(request.host)
    }
}

/// Which of the client's fields go upstream unchanged: not hop-by-hop
/// ones (the fixed list and what `Connection` names), nor framing, nor
/// what the proxy writes itself (`Host` when it is replaced,
/// `X-Forwarded-*` unless trusted), nor what the middleware removes.
pub(crate) struct RequestRules<'a> {
    hop_by_hop: HopByHop<'a>,
    context: &'a RequestContext<'a>,
    /// The head came over HTTP/2: its Host is `:authority`, its cookies
    /// may be split.
    from_h2: bool,
}

impl<'a> RequestRules<'a> {
    pub(crate) fn new(request: &Outgoing<'a>, context: &'a RequestContext<'a>) -> Self {
        Self {
            hop_by_hop: HopByHop::new(request.fields),
            context,
            from_h2: matches!(request.fields, Fields::Map(_)),
        }
    }

    /// Whether the client's field called `name` goes upstream as it is.
    pub(crate) fn keeps(&self, name: &[u8]) -> bool {
        let context = self.context;
        let lower = |wanted: &str| name.eq_ignore_ascii_case(wanted.as_bytes());
        let upgrade_as_sent = context.upgrade == Some(Offered::AsSent) && lower("upgrade");
        // `Connection: host` does not take the Host away: an HTTP/1.1
        // request must carry one (RFC 9112 3.2), and the upstream would
        // answer 400 or pick its default host.
        let dropped = self.hop_by_hop.contains(name) && !upgrade_as_sent && !lower("host")
            || lower("content-length")
            || lower("expect")
            // Never relayed: asks the upstream to switch to h2c (issue 15).
            || lower("http2-settings")
            || (lower("host") && (context.host_header.is_some() || context.host.is_some()))
            || context.edits.is_some_and(|edits| edits.drops(name))
            || context.proxied.is_some_and(|proxied| proxied.replaces(name))
            || (context.strip_overrides && is_override(name))
            || lower("x-forwarded-for")
            || ((lower("x-forwarded-proto") || lower("x-forwarded-host")) && !context.trust_forwarded)
            // HTTP/2 may split cookies across fields; they go as one.
            // Its Host is `:authority` (a `host` field too is dropped).
            || ((lower("cookie") || lower("host")) && self.from_h2);
        !dropped
    }
}

/// Every field the upstream request carries, in order, as `(name, value
/// parts)`: the client's fields that [`RequestRules`] keeps, then
/// [`added_fields`]. Framing fields are left to the writer (they depend
/// on the protocol). One set of rules for every protocol, so HTTP/1.1 and
/// HTTP/2 upstreams get the same head.
pub(crate) fn upstream_fields(
    request: &Outgoing<'_>,
    context: &RequestContext<'_>,
    emit: &mut Emit<'_>,
) {
    let rules = RequestRules::new(request, context);
    request.fields.for_each(|name, value| {
        if rules.keeps(name) {
            emit(name, &[value]);
        }
    });
    added_fields(request, context, emit);
}

/// The fields the proxy adds to an upstream request: joined cookies (from
/// HTTP/2), `Host`, `X-Forwarded-*`, the upgrade offer and the
/// middleware's additions.
pub(crate) fn added_fields(
    request: &Outgoing<'_>,
    context: &RequestContext<'_>,
    emit: &mut Emit<'_>,
) {
    let fields = request.fields;
    // A middleware that replaces or removes `Cookie` (oidc) is obeyed for
    // HTTP/2 clients too, whose cookies are joined here.
    if let Fields::Map(_) = fields {
        if !context.edits.is_some_and(|edits| edits.drops(b"cookie")) {
            joined_cookies(fields, emit);
        }
    }
    if let Some(host) = context.host_header.map(HeaderValue::as_bytes) {
        emit(b"host", &[host]);
    } else if let Some(host) = context.host {
        emit(b"host", &[host.as_bytes()]);
    } else if let (Fields::Map(_), Some(host)) = (fields, request.host) {
        emit(b"host", &[host]);
    } else if let (None, Some(host)) = (request.host, context.fallback_host) {
        emit(b"host", &[host.as_bytes()]);
    }
    // Several X-Forwarded-For fields are one list (RFC 9110 5.3): a
    // trusted one is extended, in one field, with the peer.
    let mut ip = IpText::default();
    let peer = ip.format(context.peer);
    let mut parts: [&[u8]; 9] = [b""; 9];
    let mut count = 0;
    if context.trust_forwarded {
        for prior in fields.get_all("x-forwarded-for") {
            if count + 2 < parts.len() {
                parts[count] = prior;
                parts[count + 1] = b", ";
                count += 2;
            }
        }
    }
    parts[count] = peer;
    emit(b"x-forwarded-for", &parts[..=count]);
    let trusted = |name| context.trust_forwarded && fields.get(name).is_some();
    if !trusted("x-forwarded-proto") {
        let proto: &[u8] = if context.secure { b"https" } else { b"http" };
        emit(b"x-forwarded-proto", &[proto]);
    }
    let client_host = context.host.map(str::as_bytes).or(request.host);
    if let (false, Some(host)) = (trusted("x-forwarded-host"), client_host) {
        emit(b"x-forwarded-host", &[host]);
    }
    if let Some(offered) = context.upgrade {
        if let Offered::Only(protocols) = offered {
            emit(b"upgrade", &[protocols]);
        }
        emit(b"connection", &[b"upgrade"]);
    }
    for (name, value) in context.proxied.iter().flat_map(|p| p.fields()) {
        emit(name, &[value]);
    }
    for (name, value) in context.edits.iter().flat_map(|edits| edits.appended()) {
        emit(name, &[value]);
    }
}

/// An HTTP/2 request's `cookie` fields as one (RFC 9113 8.2.3).
fn joined_cookies(fields: Fields<'_>, emit: &mut Emit<'_>) {
    let mut parts: [&[u8]; 15] = [b""; 15];
    let mut count = 0;
    let mut overflow = Vec::new();
    for (i, cookie) in fields.get_all("cookie").enumerate() {
        let separator: &[u8] = if i == 0 { b"" } else { b"; " };
        if count + 2 <= parts.len() && overflow.is_empty() {
            parts[count] = separator;
            parts[count + 1] = cookie;
            count += 2;
        } else {
            if overflow.is_empty() {
                overflow = parts[..count].concat();
            }
            overflow.extend_from_slice(separator);
            overflow.extend_from_slice(cookie);
        }
    }
    if !overflow.is_empty() {
        emit(b"cookie", &[&overflow]);
    } else if count > 0 {
        emit(b"cookie", &parts[..count]);
    }
}

/// Appends the HTTP/1.1 request head to send upstream: the request line,
/// [`upstream_fields`], then the framing fields.
pub(crate) fn request_head(
    out: &mut Vec<u8>,
    request: &Outgoing<'_>,
    context: &RequestContext<'_>,
) {
    out.extend_from_slice(request.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(context.path(request));
    if let Some(query) = context.query(request) {
        out.push(b'?');
        out.extend_from_slice(query);
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");
    upstream_fields(request, context, &mut |name, value| field(out, name, value));
    framing_fields(out, context.framing);
    out.extend_from_slice(b"\r\n");
}

/// Which of the upstream's response fields go to the client: not
/// hop-by-hop ones (but `Upgrade` on a `101`), not its `Content-Length`
/// unless `keep_length`, nor what the middleware removes.
pub(crate) struct ResponseRules<'a> {
    hop_by_hop: HopByHop<'a>,
    switching: bool,
    keep_length: bool,
    edits: Option<&'a HeaderEdits>,
}

impl<'a> ResponseRules<'a> {
    pub(crate) fn new(
        status: StatusCode,
        fields: Fields<'a>,
        keep_length: bool,
        edits: Option<&'a HeaderEdits>,
    ) -> Self {
        Self {
            hop_by_hop: HopByHop::new(fields),
            switching: status == StatusCode::SWITCHING_PROTOCOLS,
            keep_length,
            edits,
        }
    }

    pub(crate) fn keeps(&self, name: &[u8]) -> bool {
        if self.switching && name.eq_ignore_ascii_case(b"upgrade") {
            return true;
        }
        !(self.hop_by_hop.contains(name)
            || (!self.keep_length && name.eq_ignore_ascii_case(b"content-length"))
            || self.edits.is_some_and(|edits| edits.drops(name)))
    }
}

/// Every field of a response for the client, in order: the upstream's
/// that [`ResponseRules`] keeps, then the middleware's additions.
pub(crate) fn response_fields(
    status: StatusCode,
    fields: Fields<'_>,
    keep_length: bool,
    edits: Option<&HeaderEdits>,
    emit: &mut Emit<'_>,
) {
    let rules = ResponseRules::new(status, fields, keep_length, edits);
    fields.for_each(|name, value| {
        if rules.keeps(name) {
            emit(name, &[value]);
        }
    });
    for (name, value) in edits.iter().flat_map(|edits| edits.appended()) {
        emit(name, &[value]);
    }
}

/// Appends the HTTP/1.1 response head for the client: status line,
/// [`response_fields`], then framing and persistence.
pub(crate) fn response_head(
    out: &mut Vec<u8>,
    status: StatusCode,
    fields: Fields<'_>,
    framing: Framing,
    persistence: Persistence,
    edits: Option<&HeaderEdits>,
) {
    http1::response::status_line(out, status);
    let keep_length = framing == Framing::None;
    response_fields(status, fields, keep_length, edits, &mut |name, value| {
        field(out, name, value)
    });
    framing_fields(out, framing);
    if status == StatusCode::SWITCHING_PROTOCOLS {
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

fn field(out: &mut Vec<u8>, name: &[u8], value: &[&[u8]]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    for part in value {
        out.extend_from_slice(part);
    }
    out.extend_from_slice(b"\r\n");
}

/// The hop-by-hop fields of one message: the fixed list and the tokens of
/// its `Connection` fields, gathered once so that checking every field
/// stays linear in the head's size.
pub(crate) struct HopByHop<'a> {
    named: Vec<&'a [u8]>,
}

impl<'a> HopByHop<'a> {
    pub(crate) fn new(fields: Fields<'a>) -> Self {
        let mut named = Vec::new();
        fields.for_each(|name, value| {
            if name.eq_ignore_ascii_case(b"connection") {
                let tokens = value.split(|&b| b == b',').map(http1::request::trim);
                named.extend(tokens.filter(|token| !token.is_empty()));
            }
        });
        Self { named }
    }

    pub(crate) fn contains(&self, name: &[u8]) -> bool {
        HOP_BY_HOP
            .iter()
            .any(|hop| name.eq_ignore_ascii_case(hop.as_bytes()))
            || self
                .named
                .iter()
                .any(|token| token.eq_ignore_ascii_case(name))
    }
}

mod ip_text;

use ip_text::IpText;

#[cfg(test)]
mod tests;
