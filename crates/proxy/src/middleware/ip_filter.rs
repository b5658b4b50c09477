//! `ip_filter`: allow and deny lists of networks for the client address
//! (the peer, or with `forwarded.trust` the last X-Forwarded-For address).
//! Deny is checked first; a non-empty allow list admits only its networks.

use std::{net::IpAddr, sync::Arc};

use http::StatusCode;
use ipnet::IpNet;

use super::{
    build::{Build, Builder},
    Answer, Exchange, Flow, Handler, RequestView,
};
use crate::config::{self, Parsed};

#[derive(Debug)]
pub(crate) struct IpFilter {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
}

impl IpFilter {
    fn new(config: &config::IpFilterSettings) -> Self {
        let nets = |list: &[Parsed<IpNet>]| list.iter().map(|net| net.0).collect();
        Self {
            allow: nets(&config.allow),
            deny: nets(&config.deny),
        }
    }

    fn admits(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        !self.deny.iter().any(|net| net.contains(&ip))
            && (self.allow.is_empty() || self.allow.iter().any(|net| net.contains(&ip)))
    }
}

impl Build for config::IpFilterSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(IpFilter::new(self)))
    }
}

impl Handler for IpFilter {
    fn request(&self, request: &RequestView<'_>, _exchange: &mut Exchange) -> Flow {
        if self.admits(request.client_ip) {
            Flow::Next
        } else {
            Flow::Answer(Answer::problem(
                StatusCode::FORBIDDEN,
                "the client address is not allowed here",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Setting as _;

    fn filter(allow: &[&str], deny: &[&str]) -> IpFilter {
        IpFilter {
            allow: allow.iter().map(|n| IpNet::parse(n).unwrap()).collect(),
            deny: deny.iter().map(|n| IpNet::parse(n).unwrap()).collect(),
        }
    }

    #[test]
    fn deny_wins_and_allow_restricts() {
        let f = filter(&["10.0.0.0/8", "::1"], &["10.9.0.0/16"]);
        assert!(f.admits("10.1.2.3".parse().unwrap()));
        assert!(!f.admits("10.9.1.1".parse().unwrap()));
        assert!(!f.admits("192.168.1.1".parse().unwrap()));
        assert!(f.admits("::1".parse().unwrap()));
        // An IPv4-mapped IPv6 peer is judged as its IPv4 address.
        assert!(f.admits("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!f.admits("::ffff:10.9.2.3".parse().unwrap()));
        let open = filter(&[], &["127.0.0.1"]);
        assert!(open.admits("8.8.8.8".parse().unwrap()));
        assert!(!open.admits("127.0.0.1".parse().unwrap()));
    }
}
