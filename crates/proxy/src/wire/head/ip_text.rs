//! Addresses written into forwarded fields.

use std::net::IpAddr;

/// An address as text without the formatting machinery (it shows in
/// profiles): an IPv4 address is four numbers.
pub(super) struct IpText {
    buf: [u8; 48],
}

impl Default for IpText {
    fn default() -> Self {
        Self { buf: [0; 48] }
    }
}

impl IpText {
    pub(super) fn format(&mut self, ip: IpAddr) -> &[u8] {
        use std::io::Write as _;
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        let mut len = 0;
        match ip {
            IpAddr::V4(v4) => {
                let mut digits = itoa::Buffer::new();
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        self.buf[len] = b'.';
                        len += 1;
                    }
                    let text = digits.format(octet).as_bytes();
                    self.buf[len..len + text.len()].copy_from_slice(text);
                    len += text.len();
                }
            }
            IpAddr::V6(v6) => {
                let mut cursor = std::io::Cursor::new(&mut self.buf[..]);
                let _ = write!(cursor, "{v6}");
                len = usize::try_from(cursor.position()).unwrap_or(0);
            }
        }
        &self.buf[..len]
    }
}
