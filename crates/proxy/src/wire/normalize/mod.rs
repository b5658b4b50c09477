//! Request normalisation: one step between parsing a request head and
//! routing it, the same for HTTP/1.1 heads and HTTP/2 streams (each
//! protocol's session builds the [`Raw`] view this reads). It gives each
//! request one spelling, so
//! that every way of writing a guarded resource (`//admin`, `/%61dmin`,
//! `/x/../admin`, `Host: admin.example.`) meets that resource's route and
//! chain, and refuses (400) what has no unambiguous spelling. See
//! docs/CONFIG.md, "Request normalisation", for each input form.
//!
//! Pure functions over text, with the `paths` settings: no I/O, no state.

pub mod host;
pub mod path;
pub mod unicode;
pub mod upgrade;

use std::borrow::Cow;

use http::Method;

use crate::config::{Forward, PathSettings};
pub use host::NormalHost;
pub use path::NormalPath;

/// Why a request was refused (400), the `reason` of
/// `sluice_requests_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The head did not parse (refused by the HTTP/1.1 parser).
    Malformed,
    /// Not origin-form or absolute-form (`*` is for OPTIONS only).
    TargetForm,
    /// A `#` in the request-target.
    Fragment,
    /// `%` not followed by two hex digits.
    BadEscape,
    /// Escapes that decode to bytes that are not UTF-8: overlong forms
    /// (`%C0%AE`, a `.` to legacy decoders), surrogates, stray bytes.
    NotUtf8,
    /// `%25` and two hex digits, with `paths.double_encoding: reject`.
    DoubleEncoding,
    /// A control character, raw or percent-encoded (`%00`-`%1F`, `%7F`).
    Control,
    /// A raw `\` in the path.
    Backslash,
    /// `%2F` or `%5C` in the path, with `paths.escaped_slash: reject`.
    EscapedSlash,
    /// `..` segments that climb above the root.
    AboveRoot,
    /// A `;` or `%3B` in the path, with `paths.semicolon: reject`.
    Semicolon,
    /// A Host (or authority) that is not a valid `host[:port]`.
    Host,
}

impl Refusal {
    pub const ALL: [Self; 12] = [
        Self::Malformed,
        Self::TargetForm,
        Self::Fragment,
        Self::BadEscape,
        Self::NotUtf8,
        Self::DoubleEncoding,
        Self::Control,
        Self::Backslash,
        Self::EscapedSlash,
        Self::AboveRoot,
        Self::Semicolon,
        Self::Host,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::TargetForm => "target_form",
            Self::Fragment => "fragment",
            Self::BadEscape => "bad_escape",
            Self::NotUtf8 => "not_utf8",
            Self::DoubleEncoding => "double_encoding",
            Self::Control => "control",
            Self::Backslash => "backslash",
            Self::EscapedSlash => "escaped_slash",
            Self::AboveRoot => "above_root",
            Self::Semicolon => "semicolon",
            Self::Host => "host",
        }
    }

    /// What the client is told (problem+json `detail`).
    pub fn detail(self) -> &'static str {
        match self {
            Self::Malformed => "the request head is malformed",
            Self::TargetForm => {
                "the request target must be origin-form or absolute-form (`*` only for OPTIONS)"
            }
            Self::Fragment => "a request target cannot carry a `#` fragment",
            Self::BadEscape => "`%` in the path must be followed by two hex digits",
            Self::NotUtf8 => {
                "escapes in the path must decode to UTF-8 (no overlong or invalid sequences)"
            }
            Self::DoubleEncoding => {
                "an encoded `%` before two hex digits (double encoding) is not allowed in the path"
            }
            Self::Control => "control characters are not allowed in the path, raw or encoded",
            Self::Backslash => "`\\` is not allowed in the path",
            Self::EscapedSlash => "an encoded `/` or `\\` (%2F, %5C) is not allowed in the path",
            Self::AboveRoot => "`..` segments climb above the root",
            Self::Semicolon => "`;` path parameters (or `%3B`) are not allowed",
            Self::Host => "the Host is not a valid host[:port]",
        }
    }
}

/// The parts of a request head that normalisation reads, as sent.
#[derive(Debug, Clone, Copy)]
pub struct Raw<'a> {
    pub method: &'a Method,
    /// The whole request-target (read only where its form needs it).
    pub target: &'a [u8],
    /// Its path (origin-form; empty for `http://host`).
    pub path: &'a str,
    pub query: Option<&'a [u8]>,
    /// The Host field's value.
    pub host: Option<&'a str>,
    /// The client came over TLS (the default port is 443, not 80).
    pub secure: bool,
}

/// A request that normalisation admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Normal<'a> {
    /// `OPTIONS *`: a question about the server, not about a resource.
    Asterisk,
    Request(NormalRequest<'a>),
}

/// A request's target and Host in normal form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalRequest<'a> {
    pub path: NormalPath<'a>,
    /// From the absolute-form authority if there was one, else from Host.
    pub host: Option<NormalHost<'a>>,
    /// The target was absolute-form: its authority replaces Host (RFC 9112 3.2.2).
    pub absolute: bool,
}

/// Normalises a request's target and Host, or refuses it.
pub fn request<'a>(raw: &Raw<'a>, paths: &PathSettings) -> Result<Normal<'a>, Refusal> {
    if raw.query.is_some_and(|q| q.contains(&b'#')) {
        return Err(Refusal::Fragment);
    }
    let (host, absolute) = match raw.target {
        [b'/', ..] => {
            let default_port = if raw.secure { 443 } else { 80 };
            let host = raw.host.map(|h| host::normalize(h, default_port));
            (host.transpose()?.flatten(), false)
        }
        b"*" if raw.method == Method::OPTIONS => return Ok(Normal::Asterisk),
        target => (Some(authority(target)?), true),
    };
    Ok(Normal::Request(NormalRequest {
        path: path::normalize(raw.path, paths)?,
        host,
        absolute,
    }))
}

/// The host of an absolute-form target (`http://host[:port]/...`).
fn authority(target: &[u8]) -> Result<NormalHost<'_>, Refusal> {
    let (rest, default_port) = [(&b"http://"[..], 80), (&b"https://"[..], 443)]
        .into_iter()
        .find_map(|(scheme, port)| Some((target.strip_prefix(scheme)?, port)))
        .ok_or(Refusal::TargetForm)?;
    let end = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.contains(&b'#') {
        return Err(Refusal::Fragment);
    }
    let authority = std::str::from_utf8(authority).map_err(|_| Refusal::Host)?;
    host::normalize(authority, default_port)?.ok_or(Refusal::Host)
}

/// What the upstream receives instead of the client's spelling, owned so
/// that it outlives the read buffer it was made from: `None` where the
/// client's bytes go unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rewrites {
    pub path: Option<String>,
    /// The `Host` value.
    pub host: Option<String>,
}

impl NormalRequest<'_> {
    /// The rewrites `forward` asks for. An absolute-form authority always
    /// replaces Host, whatever `forward` says (RFC 9112 3.2.2).
    pub fn into_rewrites(self, forward: Forward) -> Rewrites {
        let normalized = forward == Forward::Normalized;
        let owned = |text: Cow<'_, str>| match text {
            Cow::Owned(text) => Some(text),
            Cow::Borrowed(_) => None,
        };
        Rewrites {
            path: owned(self.path.path).filter(|_| normalized),
            host: match self.host {
                Some(host) if self.absolute => Some(host.authority.into_owned()),
                Some(host) if normalized => owned(host.authority),
                _ => None,
            },
        }
    }
}

/// Checks that a route's `path` and `host` are written in the normal form
/// requests are matched in (else no request could match them); the error
/// says what to write instead.
pub fn check_route(path: &str, host: Option<&str>, paths: &PathSettings) -> Result<(), String> {
    // Case folding is the route table's own (it folds route paths too).
    let paths = &PathSettings {
        case: crate::config::Case::Sensitive,
        ..*paths
    };
    let normal = path::normalize(path, paths)
        .map_err(|refusal| format!("`{path}` can never match: {}", refusal.detail()))?;
    if normal.matching.is_some() {
        return Err(format!(
            "`{path}` can never match: routes match paths without `;` parameters (paths.semicolon)"
        ));
    }
    if normal.path != path {
        return Err(format!(
            "`{path}` is not in normal form, so no request matches it; write `{}`",
            normal.path
        ));
    }
    match host.map(|h| host::normalize(h, 0)) {
        None => Ok(()),
        Some(Ok(Some(normal))) if normal.name == normal.authority => Ok(()),
        _ => Err(format!(
            "host `{}` is not a host name or IP address (without a port)",
            host.unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
