//! The accept path of a listener with `proxy_protocol`: before anything
//! else (TLS, the HTTP/2 preface, a request), a connection from a
//! trusted network must begin with a PROXY protocol header, whose client
//! address then stands for the connection's peer everywhere (ip_filter,
//! rate limit keys, X-Forwarded-For, the access log, traces); from any
//! other address a header is refused, and a connection without one is
//! served as it came.
//!
//! The header is read without taking a byte of what follows it: on a TLS
//! listener the bytes after it are the ClientHello, which the TLS
//! acceptor must read from the socket itself. So the reader peeks and
//! takes only bytes that belong to the header for sure
//! (`wire::proxy_protocol::header_extent`). On a plaintext listener a
//! direct client's first bytes may begin like a header (`PR` of the
//! HTTP/2 preface): there the bytes are read, and those that are not a
//! header go on to the HTTP session as already received.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use bytes::BytesMut;
use tokio::{io::AsyncReadExt, net::TcpStream};
use tracing::debug;

use crate::{
    config::{ListenerProxySettings, ProxyVersions, TlvHeaders},
    telemetry::{Event, Shard},
    wire::proxy_protocol::{self, Header, Proxied, Start, Versions},
};

/// The first byte of a TLS record carrying a handshake message.
const TLS_HANDSHAKE: u8 = 0x16;
/// Bytes peeked at once: a version 1 header and then some.
const PEEK: usize = 256;

/// A listener's PROXY protocol settings, as its accept path uses them.
#[derive(Debug)]
pub(crate) struct ProxyListener {
    settings: ListenerProxySettings,
    versions: Versions,
    /// The TLV headers, when any is configured.
    headers: Option<Arc<TlvHeaders>>,
}

impl ProxyListener {
    pub(crate) fn new(settings: &ListenerProxySettings) -> Self {
        let headers = settings.headers.names().next().is_some();
        Self {
            settings: settings.clone(),
            versions: match settings.version {
                ProxyVersions::V1 => Versions::V1,
                ProxyVersions::V2 => Versions::V2,
                ProxyVersions::Any => Versions::Any,
            },
            headers: headers.then(|| Arc::new(settings.headers.clone())),
        }
    }
}

/// A connection whose beginning was read.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The client's address: the header's, or the connection's own.
    pub peer: SocketAddr,
    /// What the header said (and the listener's TLV header names).
    pub proxied: Option<Arc<Proxied>>,
    /// The client came over TLS to the balancer (the header's SSL TLV).
    pub client_tls: bool,
    /// Bytes read past the header (plaintext listeners only).
    pub received: BytesMut,
}

/// Why a connection was closed before it was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// A header from a network not listed in `trusted`.
    Untrusted,
    /// A trusted network's connection without one.
    Missing,
    Invalid(proxy_protocol::Invalid),
    /// Closed, failed or silent past the deadline before a whole header.
    Incomplete,
}

impl Refused {
    fn event(self) -> Event {
        match self {
            Refused::Untrusted => Event::ProxyHeaderUntrusted,
            Refused::Missing => Event::ProxyHeaderMissing,
            Refused::Invalid(_) => Event::ProxyHeaderInvalid,
            Refused::Incomplete => Event::ProxyHeaderIncomplete,
        }
    }
}

/// Reads the beginning of a connection from `socket_peer` on a listener
/// with `proxy`: `None` when the connection is refused (counted, and
/// dropped by the caller: closed without a byte).
pub(crate) async fn open(
    stream: &mut TcpStream,
    socket_peer: SocketAddr,
    proxy: &ProxyListener,
    tls: bool,
    timeout: Duration,
    metrics: &Shard,
) -> Option<Opened> {
    let trusted = proxy.settings.trusts(socket_peer.ip());
    let mut received = BytesMut::new();
    let read = async {
        match tls {
            true => read_before_tls(stream, &mut received, trusted, proxy.versions).await,
            false => read_plain(stream, &mut received, trusted, proxy.versions).await,
        }
    };
    let header = match tokio::time::timeout(timeout, read).await {
        Ok(Ok(header)) => header,
        Ok(Err(refused)) => return refuse(refused, socket_peer, metrics),
        Err(_) => return refuse(Refused::Incomplete, socket_peer, metrics),
    };
    let Some(header) = header else {
        // A direct client: its own address, and the listener's TLV
        // header names so that its own fields of those names go.
        return Some(Opened {
            peer: socket_peer,
            proxied: proxy.headers.as_ref().map(|headers| {
                Arc::new(Proxied {
                    client: socket_peer,
                    local: stream.local_addr().ok(),
                    via: None,
                    version: 0,
                    tlvs: proxy_protocol::Tlvs::default(),
                    headers: Arc::clone(headers),
                })
            }),
            client_tls: false,
            received,
        });
    };
    let _ = received.split_to(header.len);
    let peer = header.addresses.map_or(socket_peer, |(source, _)| source);
    let local = match header.addresses {
        Some((_, destination)) => Some(destination),
        None => stream.local_addr().ok(),
    };
    let client_tls = header.tlvs.ssl.as_ref().is_some_and(|ssl| ssl.client_ssl);
    Some(Opened {
        peer,
        proxied: Some(Arc::new(Proxied {
            client: peer,
            local,
            via: Some(socket_peer),
            version: header.version,
            tlvs: header.tlvs,
            headers: proxy.headers.clone().unwrap_or_default(),
        })),
        client_tls,
        received,
    })
}

fn refuse(refused: Refused, peer: SocketAddr, metrics: &Shard) -> Option<Opened> {
    metrics.event(refused.event());
    match refused {
        Refused::Invalid(invalid) => debug!(%peer, "connection refused: {}", invalid.detail()),
        _ => debug!(%peer, ?refused, "connection refused (PROXY protocol)"),
    }
    None
}

/// A plaintext listener's beginning: read (not peeked) until the bytes
/// tell; a direct client's bytes stay in `received`.
async fn read_plain(
    stream: &mut TcpStream,
    received: &mut BytesMut,
    trusted: bool,
    versions: Versions,
) -> Result<Option<Header>, Refused> {
    loop {
        match (proxy_protocol::start(received), trusted) {
            (Start::Other, true) => return Err(Refused::Missing),
            (Start::Other, false) => return Ok(None),
            (Start::V1 | Start::V2, false) => return Err(Refused::Untrusted),
            (Start::V1 | Start::V2, true) => match proxy_protocol::parse(received, versions) {
                Ok(Some(header)) => return Ok(Some(header)),
                Ok(None) => {}
                Err(invalid) => return Err(Refused::Invalid(invalid)),
            },
            (Start::Undecided, _) => {}
        }
        received.reserve(PEEK);
        match stream.read_buf(received).await {
            Ok(0) | Err(_) => return Err(Refused::Incomplete),
            Ok(_) => {}
        }
    }
}

/// A TLS listener's beginning: a ClientHello's first byte says no header
/// came; otherwise the header is taken byte-exact (peeked, then only its
/// own bytes read), so that the TLS handshake finds the socket as the
/// client wrote it after the header.
async fn read_before_tls(
    stream: &mut TcpStream,
    header: &mut BytesMut,
    trusted: bool,
    versions: Versions,
) -> Result<Option<Header>, Refused> {
    let mut peeked = [0u8; PEEK];
    loop {
        let n = match stream.peek(&mut peeked).await {
            Ok(0) | Err(_) => return Err(Refused::Incomplete),
            Ok(n) => n,
        };
        if header.is_empty() {
            match (peeked[0] == TLS_HANDSHAKE, trusted) {
                (true, true) => return Err(Refused::Missing),
                (true, false) => return Ok(None),
                // Not TLS: a header, or nothing this listener serves.
                (false, false) => return Err(Refused::Untrusted),
                (false, true) if !matches!(peeked[0], b'P' | b'\r') => {
                    return Err(Refused::Missing)
                }
                (false, true) => {}
            }
        }
        let mut seen = header.to_vec();
        seen.extend_from_slice(&peeked[..n]);
        let take = proxy_protocol::header_extent(&seen) - header.len();
        let at = header.len();
        header.resize(at + take, 0);
        if stream.read_exact(&mut header[at..]).await.is_err() {
            return Err(Refused::Incomplete);
        }
        match proxy_protocol::parse(header, versions) {
            Ok(Some(found)) => return Ok(Some(found)),
            Ok(None) => {}
            Err(invalid) => return Err(Refused::Invalid(invalid)),
        }
    }
}
