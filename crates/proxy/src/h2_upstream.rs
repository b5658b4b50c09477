//! HTTP/2 to upstream hosts (`protocol: h2c | h2`): each worker keeps a
//! few multiplexed connections per host. A request takes a stream on the
//! first connection with one free under the peer's
//! SETTINGS_MAX_CONCURRENT_STREAMS, and another connection is opened when
//! all are full. A connection the upstream closed (GOAWAY, error) leaves
//! the pool as soon as its driver task ends.

use std::{
    future::poll_fn,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed},
        Arc, Mutex,
    },
};

use bytes::Bytes;
use h2::{client::SendRequest, SendStream};
use http::{header, HeaderName, HeaderValue, Request, Uri};
use http1::Head;
use tracing::debug;

use crate::{
    connect::{self, ConnectError},
    gateway::{Gateway, Upstream},
    metrics::UpstreamError,
    pool::PerHost,
    worker::Worker,
};

/// Receive windows we offer upstreams: large, so that one response body
/// is not held to 64 KiB per round trip.
const STREAM_WINDOW: u32 = 1024 * 1024;
const CONNECTION_WINDOW: u32 = 8 * 1024 * 1024;

/// One multiplexed connection.
#[derive(Debug)]
struct H2Conn {
    sender: SendRequest<Bytes>,
    /// Streams of ours open on it.
    streams: Arc<AtomicUsize>,
    /// Set by the driver task when the connection ended.
    closed: Arc<AtomicBool>,
}

/// A stream slot on a connection, given back when dropped.
#[derive(Debug)]
pub(crate) struct StreamLease(Arc<AtomicUsize>);

impl Drop for StreamLease {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// The HTTP/2 connections of one worker, by upstream and host.
#[derive(Debug)]
pub(crate) struct H2Pool {
    conns: PerHost<Mutex<Vec<H2Conn>>>,
}

impl H2Pool {
    pub(crate) fn new(gateway: &Gateway) -> Self {
        Self {
            conns: PerHost::new(gateway),
        }
    }

    fn slot(&self, upstream: usize, host: usize) -> &Mutex<Vec<H2Conn>> {
        self.conns.get(upstream, host)
    }

    /// A stream on a live connection with room for one more.
    pub(crate) fn take(
        &self,
        upstream: usize,
        host: usize,
    ) -> Option<(SendRequest<Bytes>, StreamLease)> {
        let mut conns = self.slot(upstream, host).lock().ok()?;
        conns.retain(|conn| !conn.closed.load(Relaxed));
        let conn = conns
            .iter()
            .find(|conn| conn.streams.load(Relaxed) < conn.sender.current_max_send_streams())?;
        Some(lease(conn))
    }

    fn add(&self, upstream: usize, host: usize, conn: H2Conn) -> (SendRequest<Bytes>, StreamLease) {
        let taken = lease(&conn);
        if let Ok(mut conns) = self.slot(upstream, host).lock() {
            conns.push(conn);
        }
        taken
    }
}

fn lease(conn: &H2Conn) -> (SendRequest<Bytes>, StreamLease) {
    conn.streams.fetch_add(1, Relaxed);
    (conn.sender.clone(), StreamLease(Arc::clone(&conn.streams)))
}

/// A stream to `host`: on a pooled connection, or on a new one.
pub(crate) async fn stream(
    worker: &Arc<Worker>,
    upstream: usize,
    host: usize,
) -> Result<(SendRequest<Bytes>, StreamLease), ConnectError> {
    if let Some(found) = worker.h2_pool.take(upstream, host) {
        return Ok(found);
    }
    let config = &worker.gateway.upstreams[upstream];
    let alpn = config.tls.is_some().then_some(tls::ALPN_H2);
    let io = connect::open(config, host, alpn).await?;
    let handshake = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(u32::try_from(worker.gateway.limits.max_head).unwrap_or(u32::MAX))
        .handshake::<_, Bytes>(io);
    let (sender, connection) = tokio::time::timeout(config.timeouts.connect, handshake)
        .await
        .map_err(|_| ConnectError {
            kind: UpstreamError::Timeout,
            what: format!("no HTTP/2 handshake within {:?}", config.timeouts.connect),
        })?
        .map_err(|err| ConnectError {
            kind: UpstreamError::Connect,
            what: format!("HTTP/2 handshake failed: {err}"),
        })?;
    let closed = Arc::new(AtomicBool::new(false));
    worker.metrics().upstream_open(upstream, 1);
    let driver = {
        let closed = Arc::clone(&closed);
        let worker = Arc::clone(worker);
        let name = config.host_names[host].clone();
        async move {
            if let Err(err) = connection.await {
                debug!(host = %name, %err, "HTTP/2 upstream connection ended");
            }
            closed.store(true, Relaxed);
            worker.metrics().upstream_open(upstream, -1);
        }
    };
    tokio::spawn(driver);
    let conn = H2Conn {
        sender,
        streams: Arc::new(AtomicUsize::new(0)),
        closed,
    };
    Ok(worker.h2_pool.add(upstream, host, conn))
}

/// The upstream request for HTTP/2, from the HTTP/1.1 head `forward`
/// wrote (so one set of header rules serves both): `Host` becomes
/// `:authority`, framing fields go, and `te: trailers` tells gRPC servers
/// that trailers will pass.
pub(crate) fn request(head_bytes: &[u8], upstream: &Upstream) -> Option<Request<()>> {
    let mut fields = Vec::with_capacity(32);
    let limits = http1::Limits {
        max_head: head_bytes.len() + 1,
        max_body: usize::MAX,
    };
    let head: Head = http1::parse_head_into(head_bytes, &limits, &mut fields).ok()??;
    let text = |range: std::ops::Range<usize>| &head_bytes[range];
    let authority = match &head.host {
        Some(host) => text(host.clone()).to_vec(),
        None => upstream.host_names.first()?.as_bytes().to_vec(),
    };
    let mut target = text(head.path.clone()).to_vec();
    if target.is_empty() {
        target.push(b'/');
    }
    if let Some(query) = &head.query {
        target.push(b'?');
        target.extend_from_slice(text(query.clone()));
    }
    let scheme = if upstream.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let uri = Uri::builder()
        .scheme(scheme)
        .authority(authority)
        .path_and_query(target)
        .build()
        .ok()?;
    let mut request = Request::builder()
        .method(head.method)
        .uri(uri)
        .body(())
        .ok()?;
    let headers = request.headers_mut();
    for (name, value) in &fields {
        let name = text(name.clone());
        if name.eq_ignore_ascii_case(b"host") || name.eq_ignore_ascii_case(b"transfer-encoding") {
            continue;
        }
        headers.append(
            HeaderName::from_bytes(name).ok()?,
            HeaderValue::from_bytes(text(value.clone())).ok()?,
        );
    }
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    Some(request)
}

/// Why sending data on a stream stopped.
#[derive(Debug)]
pub(crate) struct StreamBroken;

/// Sends `data` as the peer's flow-control window allows, never buffering
/// more than the window (so a large body costs no memory here).
pub(crate) async fn send_data(
    send: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
) -> Result<(), StreamBroken> {
    let mut ended = false;
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let granted = match poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(Ok(granted)) => granted,
            Some(Err(_)) | None => return Err(StreamBroken),
        };
        if granted == 0 {
            continue;
        }
        let chunk = data.split_to(granted.min(data.len()));
        ended = end && data.is_empty();
        send.send_data(chunk, ended).map_err(|_| StreamBroken)?;
    }
    if end && !ended {
        // No data was left to carry the end flag.
        send.send_data(Bytes::new(), true)
            .map_err(|_| StreamBroken)?;
    }
    Ok(())
}
