//! Active health checks (`health.active`): one task per process asks
//! each host of each upstream for `path` every `interval` (a new
//! connection each time, HTTP/1.1 or HTTP/2 as the upstream speaks) and
//! tells the balancer whether the answer's status was expected in time.
//! The balancer takes a host out after `fall` failures in a row and back
//! after `rise` passes.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{info, warn};

use super::{connect, Upstream};
use crate::{
    config::{ActiveHealthSettings, Protocol},
    ids::HostId,
};

/// One check of `host`, bounded by the check's timeout: `Ok` when it
/// answered an expected status.
pub(crate) async fn probe(
    upstream: &Upstream,
    host: HostId,
    active: &ActiveHealthSettings,
) -> Result<(), String> {
    tokio::time::timeout(active.timeout, check(upstream, host, active))
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {:?}", active.timeout)))
}

/// Tells the balancer how a check went, and logs a change of state.
pub(crate) fn report(
    upstream: &Upstream,
    host: HostId,
    active: &ActiveHealthSettings,
    verdict: Result<(), String>,
    now: u64,
) {
    let change = upstream
        .balancer
        .checked(host, verdict.is_ok(), (active.rise, active.fall), now);
    let name = upstream.host_name(host);
    match (change, verdict) {
        (Some(true), _) => {
            info!(upstream = %upstream.name, host = %name, "host passed its health checks: back in");
        }
        (Some(false), Err(why)) => {
            warn!(upstream = %upstream.name, host = %name, %why, "host failed its health checks: out");
        }
        _ => {}
    }
}

/// One check of one host: `Ok` when it answered an expected status.
async fn check(
    upstream: &Upstream,
    host: HostId,
    active: &ActiveHealthSettings,
) -> Result<(), String> {
    let status = match upstream.protocol {
        Protocol::Http1 => check_http1(upstream, host, active).await?,
        Protocol::H2 | Protocol::H2c => check_h2(upstream, host, active).await?,
    };
    if active.expect.iter().any(|range| range.contains(status)) {
        Ok(())
    } else {
        Err(format!("answered {status}"))
    }
}

fn authority(upstream: &Upstream, host: HostId) -> String {
    upstream
        .host_header
        .as_ref()
        .and_then(|h| h.to_str().ok())
        .map_or_else(|| upstream.host_name(host).to_string(), str::to_string)
}

async fn check_http1(
    upstream: &Upstream,
    host: HostId,
    active: &ActiveHealthSettings,
) -> Result<u16, String> {
    let mut stream = connect::open(upstream, host, None, None)
        .await
        .map_err(|err| err.what)?;
    let request = format!(
        "GET {} HTTP/1.1\r\nhost: {}\r\nuser-agent: sluice-health-check\r\nconnection: close\r\n\r\n",
        active.path,
        authority(upstream, host)
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|err| format!("cannot send the check: {err}"))?;
    let mut buf = Vec::with_capacity(1024);
    loop {
        match http1::parse_response_head(&buf, 16 * 1024, false, &mut ()) {
            Ok(Some(head)) => return Ok(head.status.as_u16()),
            Ok(None) => {}
            Err(rejection) => return Err(rejection.detail.to_string()),
        }
        if buf.len() >= 16 * 1024 {
            return Err("the answer's head is too large".into());
        }
        match stream.read_buf(&mut buf).await {
            Ok(0) => return Err("closed before answering".into()),
            Ok(_) => {}
            Err(err) => return Err(format!("read failed: {err}")),
        }
    }
}

async fn check_h2(
    upstream: &Upstream,
    host: HostId,
    active: &ActiveHealthSettings,
) -> Result<u16, String> {
    let alpn = upstream.tls.is_some().then_some(tls::ALPN_H2);
    let io = connect::open(upstream, host, alpn, None)
        .await
        .map_err(|err| err.what)?;
    let (mut sender, connection) = h2::client::handshake(io)
        .await
        .map_err(|err| format!("HTTP/2 handshake failed: {err}"))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let scheme = if upstream.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let request = http::Request::get(format!(
        "{scheme}://{}{}",
        authority(upstream, host),
        active.path
    ))
    .header("user-agent", "sluice-health-check")
    .body(())
    .map_err(|err| format!("cannot build the check: {err}"))?;
    let answer = async {
        let (response, _) = sender
            .send_request(request, true)
            .map_err(|err| format!("cannot send the check: {err}"))?;
        let response = response
            .await
            .map_err(|err| format!("the check failed: {err}"))?;
        Ok(response.status().as_u16())
    }
    .await;
    driver.abort();
    answer
}
