//! `listeners[].proxy_protocol` (the PROXY protocol header a load
//! balancer in front of the proxy sends) and `upstreams.NAME.proxy_protocol`
//! (the header the proxy sends to an upstream that wants one).

use http::HeaderName;
use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::typed::Parsed;

/// A listener whose clients come through a load balancer that sends the
/// PROXY protocol.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListenerProxySettings {
    /// Which versions are accepted.
    pub version: ProxyVersions,
    /// The networks whose connections must begin with a header; from
    /// anyone else a header is refused (the connection closed), and a
    /// connection without one is served with its own address.
    pub trusted: Vec<Parsed<IpNet>>,
    /// Request headers that carry what a version 2 header's TLVs said to
    /// the upstream; a client's own field of that name is removed.
    #[serde(default)]
    pub headers: TlvHeaders,
}

impl ListenerProxySettings {
    /// Whether a connection from `ip` must begin with a header.
    pub fn trusts(&self, ip: std::net::IpAddr) -> bool {
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
            v4 => v4,
        };
        self.trusted.iter().any(|net| net.contains(&ip))
    }
}

/// `v1`, `v2` or `any`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProxyVersions {
    V1,
    V2,
    Any,
}

/// The TLVs sent on as request headers, each under the name given.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlvHeaders {
    pub alpn: Option<Parsed<HeaderName>>,
    pub authority: Option<Parsed<HeaderName>>,
    pub unique_id: Option<Parsed<HeaderName>>,
    pub tls_version: Option<Parsed<HeaderName>>,
    pub tls_cipher: Option<Parsed<HeaderName>>,
    pub tls_client_cn: Option<Parsed<HeaderName>>,
    /// `true` or `false`: whether the client's certificate was verified.
    pub tls_client_verified: Option<Parsed<HeaderName>>,
}

impl TlvHeaders {
    /// Every name configured.
    pub fn names(&self) -> impl Iterator<Item = &HeaderName> {
        [
            &self.alpn,
            &self.authority,
            &self.unique_id,
            &self.tls_version,
            &self.tls_cipher,
            &self.tls_client_cn,
            &self.tls_client_verified,
        ]
        .into_iter()
        .flatten()
        .map(|name| &name.0)
    }
}

/// The version of the header sent to an upstream's hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SendProxyVersion {
    V1,
    V2,
}
