//! The PROXY protocol (HAProxy's proxy-protocol.txt, versions 1 and 2):
//! the header a load balancer in front of the proxy sends before the
//! client's first byte, naming the client's address (and, in version 2,
//! facts of the connection in TLVs: ALPN, the authority asked for, the
//! client's TLS). Sans-IO: [`parse`] reads a header from the bytes at the
//! start of a connection, [`header_extent`] says how many of them belong
//! to it for sure (so that a reader never takes a byte of what follows),
//! and `encode` writes headers for upstreams that want one.

mod encode;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub use encode::{crc32c, write_v1, write_v2};

/// Version 1 begins with this.
pub const V1_PREFIX: &[u8] = b"PROXY ";
/// A version 1 header is at most this long, CRLF included.
pub const V1_MAX: usize = 107;
/// Version 2's signature.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// Version 2's fixed part: the signature, version and command, family
/// and protocol, and the length of the rest.
pub const V2_FIXED: usize = 16;
/// The most a version 2 header may carry after its fixed part: addresses
/// and TLVs. Load balancers send tens of bytes (AWS adds a VPC endpoint
/// id, GCP a connection id); anything longer is refused rather than held.
pub const V2_MAX_REST: usize = 4096;

/// The TLV types this reader knows (proxy-protocol.txt 2.2).
mod tlv {
    pub(crate) const ALPN: u8 = 0x01;
    pub(crate) const AUTHORITY: u8 = 0x02;
    pub(crate) const CRC32C: u8 = 0x03;
    pub(crate) const UNIQUE_ID: u8 = 0x05;
    pub(crate) const SSL: u8 = 0x20;
    pub(crate) const SSL_VERSION: u8 = 0x21;
    pub(crate) const SSL_CN: u8 = 0x22;
    pub(crate) const SSL_CIPHER: u8 = 0x23;
    pub(crate) const SSL_SIG_ALG: u8 = 0x24;
    pub(crate) const SSL_KEY_ALG: u8 = 0x25;
}

/// Which versions a listener accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versions {
    V1,
    V2,
    Any,
}

impl Versions {
    fn admits(self, version: u8) -> bool {
        matches!(
            (self, version),
            (Versions::Any, _) | (Versions::V1, 1) | (Versions::V2, 2)
        )
    }
}

/// What the first bytes of a connection are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// A version 1 header begins (or is all there is so far).
    V1,
    V2,
    /// Not a PROXY header: the client's own bytes.
    Other,
    /// Too few bytes to tell (a prefix of a signature, or none).
    Undecided,
}

/// What the first bytes of a connection begin with.
pub fn start(buf: &[u8]) -> Start {
    let prefix_of = |signature: &[u8]| {
        let n = buf.len().min(signature.len());
        buf[..n] == signature[..n]
    };
    match (prefix_of(V1_PREFIX), prefix_of(&V2_SIGNATURE)) {
        _ if buf.is_empty() => Start::Undecided,
        (true, _) if buf.len() >= V1_PREFIX.len() => Start::V1,
        (_, true) if buf.len() >= V2_SIGNATURE.len() => Start::V2,
        (false, false) => Start::Other,
        _ => Start::Undecided,
    }
}

/// How many of the bytes at the start of `buf`, which begin a header
/// ([`start`] said `V1` or `V2`, or is still undecided between them),
/// belong to the header for sure: a reader may take that many and no
/// more. Never 0 for a non-empty `buf` that begins a header.
pub fn header_extent(buf: &[u8]) -> usize {
    match buf.first() {
        Some(b'P') => buf
            .iter()
            .position(|&b| b == b'\n')
            .map_or(buf.len(), |lf| lf + 1)
            .min(V1_MAX),
        Some(_) if buf.len() < V2_FIXED => buf.len(),
        Some(_) => {
            let rest = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
            buf.len().min(V2_FIXED + rest.min(V2_MAX_REST))
        }
        None => 0,
    }
}

/// A whole header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    /// Its length: the client's own bytes follow.
    pub len: usize,
    /// The client's address and the one it connected to; `None` for a
    /// version 2 `LOCAL` (the balancer's own health check), `UNKNOWN`,
    /// or an address family without ports (`AF_UNIX`, unspecified): the
    /// connection's own addresses stand.
    pub addresses: Option<(SocketAddr, SocketAddr)>,
    pub tlvs: Tlvs,
}

/// What a version 2 header's TLVs say. Text values are kept only when
/// they are printable ASCII (they may be logged and sent on in headers);
/// others are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tlvs {
    /// The protocol the client agreed by ALPN (`h2`, `http/1.1`).
    pub alpn: Option<Box<str>>,
    /// The host name the client asked for (its TLS SNI).
    pub authority: Option<Box<str>>,
    /// The balancer's id of the connection.
    pub unique_id: Option<Box<str>>,
    pub ssl: Option<Ssl>,
}

/// The client's TLS, as the balancer that ended it saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ssl {
    /// `PP2_CLIENT_SSL`: the client connected over TLS.
    pub client_ssl: bool,
    /// `PP2_CLIENT_CERT_CONN` / `_SESS`: it presented a certificate.
    pub client_cert: bool,
    /// The certificate was verified (`verify` field zero).
    pub verified: bool,
    pub version: Option<Box<str>>,
    /// The client certificate's subject common name.
    pub cn: Option<Box<str>>,
    pub cipher: Option<Box<str>>,
    pub sig_alg: Option<Box<str>>,
    pub key_alg: Option<Box<str>>,
}

/// What a client connection's PROXY header said, kept for its requests
/// (the access log, the upstream request's headers), with the names of
/// the request headers its listener sends the TLVs on in.
#[derive(Debug, Clone)]
pub struct Proxied {
    /// The client's address: the header's source, or the connection's
    /// own peer when it named none or there was none.
    pub client: SocketAddr,
    /// The address the client connected to (the header's destination, or
    /// the connection's own), for a header sent on to an upstream.
    pub local: Option<SocketAddr>,
    /// The balancer's address (the connection's own peer); `None` for a
    /// client that connected directly (a listener with TLV headers
    /// keeps their names for such a client too, to remove its own).
    pub via: Option<SocketAddr>,
    pub version: u8,
    pub tlvs: Tlvs,
    pub headers: std::sync::Arc<crate::config::TlvHeaders>,
}

impl Proxied {
    /// The request fields the TLVs become: `(name, value)`.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let headers = &*self.headers;
        let tlvs = &self.tlvs;
        let ssl = tlvs.ssl.as_ref();
        let verified: Option<&str> =
            ssl.filter(|ssl| ssl.client_cert)
                .map(|ssl| if ssl.verified { "true" } else { "false" });
        [
            (&headers.alpn, tlvs.alpn.as_deref()),
            (&headers.authority, tlvs.authority.as_deref()),
            (&headers.unique_id, tlvs.unique_id.as_deref()),
            (&headers.tls_version, ssl.and_then(|s| s.version.as_deref())),
            (&headers.tls_cipher, ssl.and_then(|s| s.cipher.as_deref())),
            (&headers.tls_client_cn, ssl.and_then(|s| s.cn.as_deref())),
            (&headers.tls_client_verified, verified),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name.as_ref()?.as_str().as_bytes(), value?.as_bytes())))
    }

    /// Whether the client's own field `name` is one the TLVs' own replace.
    pub fn replaces(&self, name: &[u8]) -> bool {
        self.headers
            .names()
            .any(|header| name.eq_ignore_ascii_case(header.as_str().as_bytes()))
    }
}

/// Why a header is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// The version is not the one the listener accepts.
    Version,
    /// Version 1: no CRLF within 107 bytes, or a malformed line.
    V1Line,
    /// Version 2: an unknown version or command nibble.
    V2Command,
    /// Version 2: an unknown address family or protocol.
    V2Family,
    /// Version 2: a length too short for its addresses, a TLV running
    /// past the end, or more than [`V2_MAX_REST`] bytes.
    V2Length,
    /// Version 2: the CRC32C TLV does not match.
    V2Checksum,
}

impl Invalid {
    pub fn detail(self) -> &'static str {
        match self {
            Invalid::Version => "a PROXY protocol version this listener does not accept",
            Invalid::V1Line => "a malformed PROXY protocol v1 line",
            Invalid::V2Command => "an unknown PROXY protocol v2 version or command",
            Invalid::V2Family => "an unknown PROXY protocol v2 address family or protocol",
            Invalid::V2Length => "a PROXY protocol v2 header with bad lengths",
            Invalid::V2Checksum => "a PROXY protocol v2 header whose CRC32C does not match",
        }
    }
}

/// Reads the header at the start of `buf`: `Ok(None)` while more bytes
/// are needed. `buf` must begin a header ([`start`] said `V1` or `V2`);
/// bytes past the header are not looked at.
pub fn parse(buf: &[u8], accept: Versions) -> Result<Option<Header>, Invalid> {
    match start(buf) {
        Start::V1 if !accept.admits(1) => Err(Invalid::Version),
        Start::V2 if !accept.admits(2) => Err(Invalid::Version),
        Start::V1 => parse_v1(buf),
        Start::V2 => parse_v2(buf),
        Start::Undecided => Ok(None),
        Start::Other => Err(Invalid::V1Line),
    }
}

fn parse_v1(buf: &[u8]) -> Result<Option<Header>, Invalid> {
    let Some(lf) = buf.iter().take(V1_MAX).position(|&b| b == b'\n') else {
        return match buf.len() >= V1_MAX {
            true => Err(Invalid::V1Line),
            false => Ok(None),
        };
    };
    if lf == 0 || buf[lf - 1] != b'\r' {
        return Err(Invalid::V1Line);
    }
    let line = std::str::from_utf8(&buf[V1_PREFIX.len()..lf - 1]).map_err(|_| Invalid::V1Line)?;
    let mut words = line.split(' ');
    let family = words.next().ok_or(Invalid::V1Line)?;
    let header = |addresses| {
        Ok(Some(Header {
            version: 1,
            len: lf + 1,
            addresses,
            tlvs: Tlvs::default(),
        }))
    };
    // "UNKNOWN" may be followed by anything up to the CRLF.
    if family == "UNKNOWN" {
        return header(None);
    }
    let fields: Vec<&str> = words.collect();
    let [source, destination, source_port, destination_port] = fields[..] else {
        return Err(Invalid::V1Line);
    };
    let ip = |text: &str| -> Result<IpAddr, Invalid> {
        match family {
            "TCP4" => text.parse::<Ipv4Addr>().map(IpAddr::V4),
            "TCP6" => text.parse::<Ipv6Addr>().map(IpAddr::V6),
            _ => return Err(Invalid::V1Line),
        }
        .map_err(|_| Invalid::V1Line)
    };
    let source = SocketAddr::new(ip(source)?, v1_port(source_port)?);
    let destination = SocketAddr::new(ip(destination)?, v1_port(destination_port)?);
    header(Some((source, destination)))
}

/// A port as version 1 writes it: 1 to 5 digits, no leading zero.
fn v1_port(text: &str) -> Result<u16, Invalid> {
    let digits = !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit());
    if !digits || (text.len() > 1 && text.starts_with('0')) {
        return Err(Invalid::V1Line);
    }
    text.parse().map_err(|_| Invalid::V1Line)
}

fn parse_v2(buf: &[u8]) -> Result<Option<Header>, Invalid> {
    if buf.len() < V2_FIXED {
        return Ok(None);
    }
    let (version, command) = (buf[12] >> 4, buf[12] & 0x0f);
    if version != 2 || command > 1 {
        return Err(Invalid::V2Command);
    }
    let rest = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    if rest > V2_MAX_REST {
        return Err(Invalid::V2Length);
    }
    let len = V2_FIXED + rest;
    if buf.len() < len {
        return Ok(None);
    }
    let body = &buf[V2_FIXED..len];
    let (family, protocol) = (buf[13] >> 4, buf[13] & 0x0f);
    if family > 3 || protocol > 2 {
        return Err(Invalid::V2Family);
    }
    // Each family's address block; its length must fit (a LOCAL header's
    // block is still skipped as its family says).
    let block = match family {
        1 => 12,
        2 => 36,
        3 => 216,
        _ => 0,
    };
    if body.len() < block {
        return Err(Invalid::V2Length);
    }
    let tlvs = read_tlvs(&buf[..len], V2_FIXED + block)?;
    let addresses = match (command, family, protocol) {
        // LOCAL: the balancer speaking for itself.
        (0, _, _) => None,
        // Datagrams are not this proxy's to serve.
        (_, 1 | 2, 2) => return Err(Invalid::V2Family),
        (_, 1, _) => {
            let ip = |at: usize| {
                IpAddr::V4(Ipv4Addr::new(
                    body[at],
                    body[at + 1],
                    body[at + 2],
                    body[at + 3],
                ))
            };
            let port = |at: usize| u16::from_be_bytes([body[at], body[at + 1]]);
            Some((
                SocketAddr::new(ip(0), port(8)),
                SocketAddr::new(ip(4), port(10)),
            ))
        }
        (_, 2, _) => {
            let ip = |at: usize| {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&body[at..at + 16]);
                IpAddr::V6(Ipv6Addr::from(octets))
            };
            let port = |at: usize| u16::from_be_bytes([body[at], body[at + 1]]);
            Some((
                SocketAddr::new(ip(0), port(32)),
                SocketAddr::new(ip(16), port(34)),
            ))
        }
        _ => None,
    };
    Ok(Some(Header {
        version: 2,
        len,
        addresses,
        tlvs,
    }))
}

/// The TLVs of `header` (a whole version 2 header) from `at` on.
fn read_tlvs(header: &[u8], mut at: usize) -> Result<Tlvs, Invalid> {
    let mut tlvs = Tlvs::default();
    while at < header.len() {
        let (kind, value, next) = next_tlv(header, at)?;
        match kind {
            tlv::ALPN => tlvs.alpn = text(value),
            tlv::AUTHORITY => tlvs.authority = text(value),
            tlv::UNIQUE_ID if value.len() <= 128 => tlvs.unique_id = text(value),
            tlv::UNIQUE_ID => return Err(Invalid::V2Length),
            tlv::CRC32C => {
                let Ok(expected) = <[u8; 4]>::try_from(value) else {
                    return Err(Invalid::V2Length);
                };
                // The checksum of the whole header with its own value zeroed.
                let mut zeroed = header.to_vec();
                zeroed[next - 4..next].fill(0);
                if crc32c(&zeroed) != u32::from_be_bytes(expected) {
                    return Err(Invalid::V2Checksum);
                }
            }
            tlv::SSL => tlvs.ssl = Some(read_ssl(value)?),
            _ => {}
        }
        at = next;
    }
    Ok(tlvs)
}

/// The TLV at `at`: its type, value and where the next one begins.
fn next_tlv(buf: &[u8], at: usize) -> Result<(u8, &[u8], usize), Invalid> {
    let head = buf.get(at..at + 3).ok_or(Invalid::V2Length)?;
    let len = usize::from(u16::from_be_bytes([head[1], head[2]]));
    let value = buf.get(at + 3..at + 3 + len).ok_or(Invalid::V2Length)?;
    Ok((head[0], value, at + 3 + len))
}

/// `PP2_TYPE_SSL`: a client byte, a verify word, then sub-TLVs.
fn read_ssl(value: &[u8]) -> Result<Ssl, Invalid> {
    if value.len() < 5 {
        return Err(Invalid::V2Length);
    }
    let client = value[0];
    let verify = u32::from_be_bytes([value[1], value[2], value[3], value[4]]);
    let mut ssl = Ssl {
        client_ssl: client & 0x01 != 0,
        client_cert: client & 0x06 != 0,
        verified: verify == 0 && client & 0x06 != 0,
        ..Ssl::default()
    };
    let mut at = 5;
    while at < value.len() {
        let (kind, sub, next) = next_tlv(value, at)?;
        let slot = match kind {
            tlv::SSL_VERSION => &mut ssl.version,
            tlv::SSL_CN => &mut ssl.cn,
            tlv::SSL_CIPHER => &mut ssl.cipher,
            tlv::SSL_SIG_ALG => &mut ssl.sig_alg,
            tlv::SSL_KEY_ALG => &mut ssl.key_alg,
            _ => {
                at = next;
                continue;
            }
        };
        *slot = text(sub);
        at = next;
    }
    Ok(ssl)
}

/// A TLV's value as text, when it is non-empty printable ASCII.
fn text(value: &[u8]) -> Option<Box<str>> {
    let printable = !value.is_empty() && value.iter().all(|&b| (0x20..0x7f).contains(&b));
    printable
        .then(|| std::str::from_utf8(value).ok().map(Box::from))
        .flatten()
}

#[cfg(test)]
mod tests;
