//! Opening a connection to an upstream host: TCP, then the PROXY protocol
//! header for an upstream that wants one (`proxy_protocol`), then TLS for
//! `https://` hosts (SNI, certificate check, ALPN), within the connect
//! timeout.

use std::net::SocketAddr;

use crate::{config::SendProxyVersion, ids::HostId, wire::proxy_protocol};
use tokio::{io::AsyncWriteExt, net::TcpStream};

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
};

use tls::tokio_rustls::client::TlsStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::{telemetry::UpstreamError, upstream::Upstream};

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

/// The bytes of an HTTP/1.1 upstream connection: plain TCP or TLS.
#[derive(Debug)]
pub(crate) enum UpstreamStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl UpstreamStream {
    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(tcp) => tcp,
            Self::Tls(tls) => tls.get_ref().0,
        }
    }
}

impl AsyncRead for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Self::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpstreamStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Self::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Self::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Self::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}
