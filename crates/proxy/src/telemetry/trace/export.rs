//! The exporter thread: takes finished spans off the queue, a batch at a
//! time (`traces.batch` spans, or what came within a second), and sends
//! each batch to the collector over OTLP/gRPC (HTTP/2, the `h2` crate) or
//! OTLP/HTTP (protobuf body over HTTP/1.1, a keep-alive connection), in
//! the clear or over TLS (`https://`). A batch that fails is dropped and
//! counted: the collector being slow or down costs the requests nothing
//! but their spans.

use std::{
    io::Write as _,
    sync::{
        atomic::Ordering::Relaxed,
        mpsc::{Receiver, RecvTimeoutError},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use bytes::Bytes;
use tls::{rustls::pki_types::ServerName, tokio_rustls::TlsConnector};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
};
use tracing::{debug, info, warn};

use super::{otlp, Span, DROPPED, EXPORTED};
use crate::config::{OtlpProtocol, TraceExport};

/// A batch goes at the latest this long after its first span.
const LINGER: Duration = Duration::from_secs(1);
const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// The connector of an `https://` endpoint, built when the plan is (so a
/// bad file is a load error): ALPN `h2` for gRPC, `http/1.1` for HTTP.
pub(super) fn connector(settings: &TraceExport) -> anyhow::Result<Option<TlsConnector>> {
    let Some(otlp_tls) = &settings.tls else {
        return Ok(None);
    };
    let trust = match &otlp_tls.ca_file {
        Some(path) => tls::Trust::CaFile(path),
        None => tls::Trust::WebRoots,
    };
    let identity = otlp_tls
        .identity
        .as_ref()
        .map(|(cert, key)| tls::Identity { cert, key });
    let alpn = match settings.protocol {
        OtlpProtocol::Grpc => tls::ALPN_H2,
        OtlpProtocol::HttpProtobuf => tls::ALPN_HTTP11,
    };
    let config = tls::client_config(trust, identity, &[alpn]).context("traces.otlp tls")?;
    Ok(Some(TlsConnector::from(std::sync::Arc::new(config))))
}

pub(super) fn spawn(
    settings: TraceExport,
    tls: Option<TlsConnector>,
    spans: Receiver<Box<Span>>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("sluice-traces".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    tracing::error!(%err, "traces: no runtime for the exporter");
                    return;
                }
            };
            runtime.block_on(run(settings, tls, spans));
        })
        .map(drop)
}

async fn run(settings: TraceExport, tls: Option<TlsConnector>, spans: Receiver<Box<Span>>) {
    let mut resource = vec![("service.name".to_string(), settings.service_name.clone())];
    resource.extend(settings.resource.iter().cloned());
    let (authority, path) = split_endpoint(&settings.endpoint);
    let mut exporter = Exporter {
        settings: &settings,
        authority,
        path,
        tls,
        grpc: None,
        http: None,
    };
    let mut batch = Vec::with_capacity(settings.batch);
    // Logged once per change: a collector that is down for an hour is one
    // warning, not one per batch.
    let mut failing = false;
    loop {
        // The first span of a batch is waited for as long as it takes
        // (blocking this thread, whose only other task is the idle gRPC
        // connection); the rest for what is left of LINGER.
        match spans.recv() {
            Ok(span) => batch.push(span),
            Err(_) => return,
        }
        let deadline = Instant::now() + LINGER;
        let mut closed = false;
        while batch.len() < settings.batch {
            let left = deadline.saturating_duration_since(Instant::now());
            match spans.recv_timeout(left) {
                Ok(span) => batch.push(span),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
        }
        let body = otlp::encode(&resource, &batch);
        let body = if settings.gzip { gzip(&body) } else { body };
        let n = batch.len() as u64;
        batch.clear();
        match tokio::time::timeout(settings.timeout, exporter.send(body)).await {
            Ok(Ok(())) => {
                EXPORTED.fetch_add(n, Relaxed);
                if std::mem::take(&mut failing) {
                    info!("traces: export to the collector works again");
                }
            }
            outcome => {
                let why = match outcome {
                    Ok(Err(err)) => err,
                    _ => "timed out".into(),
                };
                if !std::mem::replace(&mut failing, true) {
                    warn!(%why, "traces: export to the collector failed; spans are dropped (counted in sluice_trace_spans_dropped_total) until it works again");
                }
                debug!(spans = n, %why, "traces: export failed, spans dropped");
                exporter.grpc = None;
                exporter.http = None;
                DROPPED.fetch_add(n, Relaxed);
            }
        }
        if closed {
            return;
        }
    }
}

/// A connection to the collector, in the clear or over TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

struct Exporter<'a> {
    settings: &'a TraceExport,
    authority: String,
    path: String,
    tls: Option<TlsConnector>,
    /// The HTTP/2 connection of OTLP/gRPC, kept between batches.
    grpc: Option<h2::client::SendRequest<Bytes>>,
    /// The HTTP/1.1 connection of OTLP/HTTP, kept while the collector
    /// keeps it (its answers are read whole).
    http: Option<Box<dyn Io>>,
}

impl Exporter<'_> {
    async fn connect(&self) -> Result<Box<dyn Io>, String> {
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", self.authority);
        let tcp = TcpStream::connect(&self.authority)
            .await
            .map_err(|e| err(&e))?;
        let _ = tcp.set_nodelay(true);
        let Some(connector) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let host = host_of(&self.authority);
        let name = ServerName::try_from(host.to_string()).map_err(|e| err(&e))?;
        let stream = connector.connect(name, tcp).await.map_err(|e| err(&e))?;
        Ok(Box::new(stream))
    }

    async fn send(&mut self, body: Vec<u8>) -> Result<(), String> {
        match self.settings.protocol {
            OtlpProtocol::Grpc => self.grpc(body).await,
            OtlpProtocol::HttpProtobuf => self.http(body).await,
        }
    }

    async fn grpc(&mut self, body: Vec<u8>) -> Result<(), String> {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        if self.grpc.is_none() {
            let io = self.connect().await?;
            let (send, connection) = h2::client::handshake(io).await.map_err(|e| err(&e))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            self.grpc = Some(send);
        }
        let Some(send) = self.grpc.as_mut() else {
            return Err("no connection".into());
        };
        let mut send = send.clone().ready().await.map_err(|e| err(&e))?;
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut request = http::Request::post(format!("{scheme}://{}{GRPC_PATH}", self.authority))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if self.settings.gzip {
            request = request.header("grpc-encoding", "gzip");
        }
        for (k, v) in &self.settings.headers {
            request = request.header(k.to_ascii_lowercase(), v);
        }
        let request = request.body(()).map_err(|e| err(&e))?;
        let mut framed = Vec::with_capacity(body.len() + 5);
        framed.push(u8::from(self.settings.gzip));
        framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
        framed.extend_from_slice(&body);
        let (response, mut stream) = send.send_request(request, false).map_err(|e| err(&e))?;
        stream
            .send_data(Bytes::from(framed), true)
            .map_err(|e| err(&e))?;
        let response = response.await.map_err(|e| err(&e))?;
        let (parts, mut body) = response.into_parts();
        if parts.status != http::StatusCode::OK {
            return Err(format!("gRPC answered HTTP {}", parts.status));
        }
        let mut status = parts.headers.get("grpc-status").cloned();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| err(&e))?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        if let Some(trailers) = body.trailers().await.map_err(|e| err(&e))? {
            status = trailers.get("grpc-status").cloned().or(status);
        }
        match status.as_ref().map(|s| s.as_bytes()) {
            Some(b"0") => Ok(()),
            other => Err(format!(
                "grpc-status {}",
                other.map_or("missing".into(), |s| String::from_utf8_lossy(s)
                    .into_owned())
            )),
        }
    }

    /// One POST on the kept connection, or on a new one if there is none
    /// or the kept one turns out closed before answering (the collector
    /// may close an idle connection at any time).
    async fn http(&mut self, body: Vec<u8>) -> Result<(), String> {
        if let Some(io) = self.http.take() {
            match self.post(io, &body).await {
                Ok(kept) => {
                    self.http = kept;
                    return Ok(());
                }
                Err(Post::Unanswered(_)) => {}
                Err(Post::Failed(why)) => return Err(why),
            }
        }
        let io = self.connect().await?;
        match self.post(io, &body).await {
            Ok(kept) => {
                self.http = kept;
                Ok(())
            }
            Err(Post::Unanswered(why) | Post::Failed(why)) => Err(why),
        }
    }

    /// Sends `body`, reads the answer whole; the connection back if the
    /// collector keeps it open.
    async fn post(&self, mut io: Box<dyn Io>, body: &[u8]) -> Result<Option<Box<dyn Io>>, Post> {
        let unanswered = |e: &dyn std::fmt::Display| Post::Unanswered(e.to_string());
        let failed = |e: &dyn std::fmt::Display| Post::Failed(e.to_string());
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n",
            self.path,
            self.authority,
            body.len()
        );
        if self.settings.gzip {
            head.push_str("Content-Encoding: gzip\r\n");
        }
        for (k, v) in &self.settings.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        io.write_all(head.as_bytes())
            .await
            .map_err(|e| unanswered(&e))?;
        io.write_all(body).await.map_err(|e| unanswered(&e))?;
        io.flush().await.map_err(|e| unanswered(&e))?;
        let mut answer = Vec::with_capacity(1024);
        let mut buf = [0u8; 4096];
        let response = loop {
            let n = io.read(&mut buf).await.map_err(|e| unanswered(&e))?;
            if n == 0 {
                return Err(Post::Unanswered(
                    "the collector closed the connection".into(),
                ));
            }
            answer.extend_from_slice(&buf[..n]);
            match http1::parse_response_head(&answer, MAX_ANSWER, false, &mut ()) {
                Ok(Some(response)) => break response,
                Ok(None) if answer.len() < MAX_ANSWER => {}
                _ => {
                    return Err(Post::Failed(
                        "the collector's answer is not HTTP/1.1".into(),
                    ))
                }
            }
        };
        if !response.status.is_success() {
            return Err(Post::Failed(format!(
                "the collector answered {}",
                response.status
            )));
        }
        // The body (an ExportTraceServiceResponse, usually empty) is read
        // so that the next request starts on a clean connection; one
        // framed otherwise than by length is not kept.
        let len = match response.framing {
            http1::BodyFraming::None => 0,
            http1::BodyFraming::Length(len) => len,
            http1::BodyFraming::Chunked | http1::BodyFraming::UntilClose => return Ok(None),
        };
        let want = response.len + usize::try_from(len).unwrap_or(usize::MAX);
        if want > MAX_ANSWER {
            return Ok(None);
        }
        while answer.len() < want {
            let n = io.read(&mut buf).await.map_err(|e| failed(&e))?;
            if n == 0 {
                return Ok(None);
            }
            answer.extend_from_slice(&buf[..n]);
        }
        Ok((response.keep_alive && answer.len() == want).then_some(io))
    }
}

/// Why an OTLP/HTTP export failed: `Unanswered` before any byte of an
/// answer (on a kept connection: it was closed meanwhile, try a new one).
enum Post {
    Unanswered(String),
    Failed(String),
}

/// The largest answer head and body read from the collector.
const MAX_ANSWER: usize = 64 * 1024;

/// `host` of `host:port` or `[v6]:port`, for TLS's server name.
fn host_of(authority: &str) -> &str {
    let host = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => &authority[..i],
        _ => authority,
    };
    host.trim_start_matches('[').trim_end_matches(']')
}

/// `http[s]://host:port/path` as `host:port` and the path (`/v1/traces`
/// when there is none).
fn split_endpoint(endpoint: &str) -> (String, String) {
    let rest = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
        .unwrap_or(endpoint);
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let path = if path.is_empty() || path == "/" {
        "/v1/traces"
    } else {
        path
    };
    (authority.to_string(), path.to_string())
}

fn gzip(body: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = encoder.write_all(body);
    encoder.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_split() {
        assert_eq!(
            split_endpoint("http://c:4318/v1/traces"),
            ("c:4318".into(), "/v1/traces".into())
        );
        assert_eq!(
            split_endpoint("http://c:4317"),
            ("c:4317".into(), "/v1/traces".into())
        );
        assert_eq!(
            split_endpoint("https://c:4318/x"),
            ("c:4318".into(), "/x".into())
        );
    }

    #[test]
    fn server_names_come_from_the_authority() {
        assert_eq!(host_of("collector.example:4317"), "collector.example");
        assert_eq!(host_of("127.0.0.1:4317"), "127.0.0.1");
        assert_eq!(host_of("[::1]:4317"), "::1");
        assert_eq!(host_of("collector"), "collector");
    }
}
