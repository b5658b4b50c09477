//! Writing PROXY protocol headers, for upstreams that want to know the
//! client's address (`upstreams.NAME.proxy_protocol`), and the CRC32C
//! that version 2's checksum TLV carries.

use std::net::{IpAddr, SocketAddr};

use super::{V1_PREFIX, V2_SIGNATURE};

/// Both addresses in one family, as both versions need: an IPv4 one
/// beside an IPv6 one becomes IPv4-mapped (as HAProxy does).
fn same_family(source: SocketAddr, destination: SocketAddr) -> (SocketAddr, SocketAddr) {
    let v6 = |addr: SocketAddr| match addr.ip() {
        IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), addr.port()),
        IpAddr::V6(_) => addr,
    };
    match (source.ip(), destination.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => (source, destination),
        _ => (v6(source), v6(destination)),
    }
}

/// Appends a version 1 line for a connection from `source` to
/// `destination`; `None`: `PROXY UNKNOWN` (a health check's own).
pub fn write_v1(out: &mut Vec<u8>, addresses: Option<(SocketAddr, SocketAddr)>) {
    use std::io::Write as _;
    out.extend_from_slice(V1_PREFIX);
    let Some((source, destination)) = addresses else {
        out.extend_from_slice(b"UNKNOWN\r\n");
        return;
    };
    let (source, destination) = same_family(source, destination);
    let family = if source.is_ipv4() { "TCP4" } else { "TCP6" };
    // Writing to a Vec cannot fail.
    let _ = write!(
        out,
        "{family} {} {} {} {}\r\n",
        source.ip(),
        destination.ip(),
        source.port(),
        destination.port()
    );
}

/// Appends a version 2 header: `PROXY` over TCP from `source` to
/// `destination`, or `LOCAL` when `addresses` is `None`, with `tlvs`
/// (type, value; each value at most 65,535 bytes) after the addresses.
pub fn write_v2(
    out: &mut Vec<u8>,
    addresses: Option<(SocketAddr, SocketAddr)>,
    tlvs: &[(u8, &[u8])],
) {
    let start = out.len();
    out.extend_from_slice(&V2_SIGNATURE);
    let mut body = Vec::with_capacity(36);
    let (command, family) = match addresses.map(|(s, d)| same_family(s, d)) {
        None => (0x20, 0x00),
        Some((source, destination)) => {
            let family = match (source.ip(), destination.ip()) {
                (IpAddr::V4(s), IpAddr::V4(d)) => {
                    body.extend_from_slice(&s.octets());
                    body.extend_from_slice(&d.octets());
                    0x11
                }
                (IpAddr::V6(s), IpAddr::V6(d)) => {
                    body.extend_from_slice(&s.octets());
                    body.extend_from_slice(&d.octets());
                    0x21
                }
                // `same_family` made them alike.
                _ => 0x00,
            };
            body.extend_from_slice(&source.port().to_be_bytes());
            body.extend_from_slice(&destination.port().to_be_bytes());
            (0x21, family)
        }
    };
    for (kind, value) in tlvs {
        let len = u16::try_from(value.len()).unwrap_or(u16::MAX);
        body.push(*kind);
        body.extend_from_slice(&len.to_be_bytes());
        body.extend_from_slice(&value[..usize::from(len)]);
    }
    out.push(command);
    out.push(family);
    let len = u16::try_from(body.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body[..usize::from(len)]);
    debug_assert!(out.len() - start <= super::V2_FIXED + usize::from(u16::MAX));
}

/// CRC-32C (Castagnoli, reflected, as RFC 3720 B.4 and version 2's
/// checksum TLV use it), bit by bit: headers are tens of bytes.
pub fn crc32c(bytes: &[u8]) -> u32 {
    const POLY: u32 = 0x82f6_3b78;
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
