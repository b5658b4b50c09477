//! Host normalisation (RFC 3986 3.2.2 and 6.2.3, RFC 9110 4.2.3): the name
//! lower-cased, one trailing dot dropped, internationalised names as
//! A-labels (`bücher.example` is `xn--bcher-kva.example`), the scheme's
//! default port dropped. Anything that is not `host[:port]` is refused.

use std::{borrow::Cow, net::Ipv6Addr};

use super::Refusal;

/// A Host (or absolute-form authority) in normal form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalHost<'a> {
    /// What routes compare: the name without the port.
    pub name: Cow<'a, str>,
    /// The whole authority to send upstream: `name` and a non-default port.
    pub authority: Cow<'a, str>,
}

/// The normal form of `raw` (a Host value or an authority) whose scheme's
/// port is `default_port`; `None` for an empty one.
pub fn normalize(raw: &str, default_port: u16) -> Result<Option<NormalHost<'_>>, Refusal> {
    if raw.is_empty() {
        return Ok(None);
    }
    if let Some(name) = already_normal(raw.as_bytes(), default_port) {
        return Ok(Some(NormalHost {
            name: Cow::Borrowed(&raw[..name]),
            authority: Cow::Borrowed(raw),
        }));
    }
    slow(raw, default_port)
}

/// The slow path of [`normalize`], for what one scan could not accept.
pub(super) fn slow(raw: &str, default_port: u16) -> Result<Option<NormalHost<'_>>, Refusal> {
    if raw.is_empty() {
        return Ok(None);
    }
    let (name, port) = split_port(raw)?;
    let port = match port {
        None | Some("") => None,
        Some(digits) => Some(parse_port(digits)?),
    };
    let normal_name = if name.starts_with('[') {
        ip_literal(name)?
    } else {
        reg_name(name)?
    };
    let port = port.filter(|&p| p != default_port);
    // The authority as sent is normal when nothing in it changes.
    let unchanged_port = match (port, raw.len() - name.len()) {
        (None, 0) => true,
        (Some(p), extra) => extra > 1 && raw[name.len() + 1..] == *itoa::Buffer::new().format(p),
        (None, _) => false,
    };
    let unchanged_name = matches!(&normal_name, Cow::Borrowed(n) if n.len() == name.len());
    let authority = match (&normal_name, port) {
        _ if unchanged_name && unchanged_port => Cow::Borrowed(raw),
        (_, None) => Cow::Owned(normal_name.to_string()),
        (_, Some(p)) => Cow::Owned(format!("{normal_name}:{p}")),
    };
    Ok(Some(NormalHost {
        name: normal_name,
        authority,
    }))
}

/// The fast path, one scan: a lower-case name of letters, digits and
/// `-._~` with no empty label and no trailing dot, and a port (if any)
/// written without leading zeros that is not the default. The length of
/// the name, or `None` when the slow path must decide.
pub(super) fn already_normal(raw: &[u8], default_port: u16) -> Option<usize> {
    let mut label = 0;
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'~' => label += 1,
            b'.' if label > 0 => label = 0,
            b':' => break,
            _ => return None,
        }
        i += 1;
    }
    if label == 0 {
        return None;
    }
    if i == raw.len() {
        return Some(i);
    }
    let digits = &raw[i + 1..];
    if digits.is_empty() || digits.len() > 5 || digits[0] == b'0' {
        return None;
    }
    let mut port = 0u32;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        port = port * 10 + u32::from(d - b'0');
    }
    (port <= 65535 && port != u32::from(default_port)).then_some(i)
}

/// `name` and the text after its port colon, if any.
fn split_port(raw: &str) -> Result<(&str, Option<&str>), Refusal> {
    if raw.starts_with('[') {
        let close = raw.find(']').ok_or(Refusal::Host)? + 1;
        return match &raw[close..] {
            "" => Ok((raw, None)),
            rest => match rest.strip_prefix(':') {
                Some(port) => Ok((&raw[..close], Some(port))),
                None => Err(Refusal::Host),
            },
        };
    }
    Ok(match raw.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (raw, None),
    })
}

fn parse_port(digits: &str) -> Result<u16, Refusal> {
    if digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Refusal::Host);
    }
    digits.parse().map_err(|_| Refusal::Host)
}

/// `[v6]`, in its RFC 5952 spelling. Zone identifiers and IPvFuture are refused.
fn ip_literal(name: &str) -> Result<Cow<'_, str>, Refusal> {
    let inner = &name[1..name.len() - 1];
    let addr: Ipv6Addr = inner.parse().map_err(|_| Refusal::Host)?;
    let canonical = format!("[{addr}]");
    Ok(if canonical == name {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(canonical)
    })
}

/// A DNS-style name: letters, digits, `-`, `_`, `~`, dots between
/// non-empty labels (one trailing dot allowed and dropped), and non-ASCII
/// characters, which are turned into A-labels.
fn reg_name(name: &str) -> Result<Cow<'_, str>, Refusal> {
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    let mut ascii = true;
    let mut upper = false;
    let mut label_len = 0;
    for b in trimmed.bytes() {
        match b {
            b'.' if label_len == 0 => return Err(Refusal::Host),
            b'.' => label_len = 0,
            b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'~' => label_len += 1,
            b'A'..=b'Z' => {
                upper = true;
                label_len += 1;
            }
            0x80.. => {
                ascii = false;
                label_len += 1;
            }
            _ => return Err(Refusal::Host),
        }
    }
    if label_len == 0 {
        return Err(Refusal::Host);
    }
    Ok(match (ascii, upper) {
        (true, false) if trimmed.len() == name.len() => Cow::Borrowed(name),
        (true, false) => Cow::Borrowed(trimmed),
        (true, true) => Cow::Owned(trimmed.to_ascii_lowercase()),
        (false, _) => {
            let ascii = idna::domain_to_ascii(trimmed).map_err(|_| Refusal::Host)?;
            // UTS 46 mapping can make what the rules above refuse (`˜` maps
            // to a space and a combining tilde, `。。` to an empty label):
            // the result must pass them, else it is no host name (and would
            // not come back the same if normalised again).
            match reg_name(&ascii) {
                Ok(Cow::Borrowed(valid)) => Cow::Owned(valid.to_owned()),
                _ => return Err(Refusal::Host),
            }
        }
    })
}
