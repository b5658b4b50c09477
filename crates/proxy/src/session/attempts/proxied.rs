//! What a PROXY protocol header toward an upstream names
//! (`upstreams.NAME.proxy_protocol`).

use std::net::{IpAddr, SocketAddr};

use super::Hosts;

impl Hosts<'_> {
    /// The client's address and the one it connected to, when the
    /// upstream wants a PROXY protocol header (an unspecified address
    /// when the second is not known).
    pub(super) fn client(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.config().proxy_protocol?;
        let unspecified = match self.peer {
            SocketAddr::V4(_) => IpAddr::from([0u8; 4]),
            SocketAddr::V6(_) => IpAddr::from([0u8; 16]),
        };
        let local = self.local.unwrap_or(SocketAddr::new(unspecified, 0));
        Some((self.peer, local))
    }
}
