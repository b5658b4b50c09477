//! Opening a connection to an upstream host: TCP, then the PROXY protocol
//! header for an upstream that wants one (`proxy_protocol`), then TLS for
//! `https://` hosts (SNI, certificate check, ALPN), within the connect
//! timeout.

use std::net::SocketAddr;

use crate::{config::SendProxyVersion, ids::HostId, wire::proxy_protocol};
use tokio::{io::AsyncWriteExt, net::TcpStream};

use crate::{telemetry::UpstreamError, upstream::pool::UpstreamStream, upstream::Upstream};

/// Why no connection could be opened, in words for the log and the problem body.
#[derive(Debug)]
pub(crate) struct ConnectError {
    pub kind: UpstreamError,
    pub what: String,
}

/// A connection to `upstream`'s host number `host`; over TLS, one whose
/// peer agreed to `alpn` when it is given. To an upstream with
/// `proxy_protocol` it begins with a header naming `client` (its
/// address and the one it connected to), or one that names nobody
/// (`LOCAL`, `UNKNOWN`: a health check's own connection) without it.
pub(crate) async fn open(
    upstream: &Upstream,
    host: HostId,
    alpn: Option<&[u8]>,
    client: Option<(SocketAddr, SocketAddr)>,
) -> Result<UpstreamStream, ConnectError> {
    let timeout = upstream.timeouts.connect;
    let opening = async {
        let tcp = TcpStream::connect(upstream.hosts[host.index()])
            .await
            .map_err(|err| ConnectError {
                kind: UpstreamError::Connect,
                what: format!("cannot connect: {err}"),
            })?;
        let mut tcp = tcp;
        let _ = tcp.set_nodelay(true);
        if let Some(version) = upstream.proxy_protocol {
            let mut header = Vec::with_capacity(64);
            match version {
                SendProxyVersion::V1 => proxy_protocol::write_v1(&mut header, client),
                SendProxyVersion::V2 => proxy_protocol::write_v2(&mut header, client, &[]),
            }
            tcp.write_all(&header).await.map_err(|err| ConnectError {
                kind: UpstreamError::Connect,
                what: format!("cannot send the PROXY protocol header: {err}"),
            })?;
        }
        finish(upstream, host, alpn, tcp).await
    };
    match tokio::time::timeout(timeout, opening).await {
        Ok(result) => result,
        Err(_) => Err(ConnectError {
            kind: UpstreamError::Timeout,
            what: format!("no connection within {timeout:?}"),
        }),
    }
}

/// TLS over `tcp` for `https://` hosts, else `tcp` as it is.
async fn finish(
    upstream: &Upstream,
    host: HostId,
    alpn: Option<&[u8]>,
    tcp: TcpStream,
) -> Result<UpstreamStream, ConnectError> {
    let Some(tls) = &upstream.tls else {
        return Ok(UpstreamStream::Plain(tcp));
    };
    let name = tls.server_names[host.index()].clone();
    let stream = tls
        .connector
        .connect(name, tcp)
        .await
        .map_err(|err| ConnectError {
            kind: UpstreamError::Connect,
            what: format!("TLS handshake failed: {err}"),
        })?;
    if let Some(wanted) = alpn {
        if stream.get_ref().1.alpn_protocol() != Some(wanted) {
            return Err(ConnectError {
                kind: UpstreamError::Connect,
                what: format!(
                    "the host did not agree to {} by ALPN",
                    String::from_utf8_lossy(wanted)
                ),
            });
        }
    }
    Ok(UpstreamStream::Tls(Box::new(stream)))
}
