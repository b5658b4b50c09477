//! Opening a connection to an upstream host: TCP, then TLS for `https://`
//! hosts (SNI, certificate check, ALPN), within the connect timeout.

use crate::ids::HostId;
use tokio::net::TcpStream;

use crate::{telemetry::UpstreamError, upstream::pool::UpstreamStream, upstream::Upstream};

/// Why no connection could be opened, in words for the log and the problem body.
#[derive(Debug)]
pub(crate) struct ConnectError {
    pub kind: UpstreamError,
    pub what: String,
}

/// A connection to `upstream`'s host number `host`; over TLS, one whose
/// peer agreed to `alpn` when it is given.
pub(crate) async fn open(
    upstream: &Upstream,
    host: HostId,
    alpn: Option<&[u8]>,
) -> Result<UpstreamStream, ConnectError> {
    let timeout = upstream.timeouts.connect;
    let opening = async {
        let tcp = TcpStream::connect(upstream.hosts[host.index()])
            .await
            .map_err(|err| ConnectError {
                kind: UpstreamError::Connect,
                what: format!("cannot connect: {err}"),
            })?;
        let _ = tcp.set_nodelay(true);
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
    };
    match tokio::time::timeout(timeout, opening).await {
        Ok(result) => result,
        Err(_) => Err(ConnectError {
            kind: UpstreamError::Timeout,
            what: format!("no connection within {timeout:?}"),
        }),
    }
}
