//! The exporter thread: takes finished spans off the queue, a batch at a
//! time (`traces.batch` spans, or what came within a second), and sends
//! each batch to the collector over OTLP/gRPC (HTTP/2, the `h2` crate) or
//! OTLP/HTTP (protobuf body over HTTP/1.1). A batch that fails is dropped
//! and counted: the collector being slow or down costs the requests
//! nothing but their spans.

use std::{
    io::Write as _,
    sync::{
        atomic::Ordering::Relaxed,
        mpsc::{Receiver, RecvTimeoutError},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tracing::debug;

use super::{otlp, Span, DROPPED, EXPORTED};
use crate::config::{OtlpProtocol, TraceSettings};

/// A batch goes at the latest this long after its first span.
const LINGER: Duration = Duration::from_secs(1);
const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

pub(super) fn spawn(settings: TraceSettings, spans: Receiver<Box<Span>>) -> std::io::Result<()> {
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
            runtime.block_on(run(settings, spans));
        })
        .map(drop)
}

async fn run(settings: TraceSettings, spans: Receiver<Box<Span>>) {
    let mut resource = vec![("service.name".to_string(), settings.service_name.clone())];
    resource.extend(settings.resource.iter().cloned());
    let (authority, path) = split_endpoint(&settings.endpoint);
    let mut exporter = Exporter {
        settings: &settings,
        authority,
        path,
        grpc: None,
    };
    let mut batch = Vec::with_capacity(settings.batch);
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
            }
            outcome => {
                let why = match outcome {
                    Ok(Err(err)) => err,
                    _ => "timed out".into(),
                };
                debug!(spans = n, %why, "traces: export failed, spans dropped");
                exporter.grpc = None;
                DROPPED.fetch_add(n, Relaxed);
            }
        }
        if closed {
            return;
        }
    }
}

struct Exporter<'a> {
    settings: &'a TraceSettings,
    authority: String,
    path: String,
    /// The HTTP/2 connection of OTLP/gRPC, kept between batches.
    grpc: Option<h2::client::SendRequest<Bytes>>,
}

impl Exporter<'_> {
    async fn send(&mut self, body: Vec<u8>) -> Result<(), String> {
        match self.settings.protocol {
            OtlpProtocol::Grpc => self.grpc(body).await,
            OtlpProtocol::HttpProtobuf => self.http(body).await,
        }
    }

    async fn grpc(&mut self, body: Vec<u8>) -> Result<(), String> {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        if self.grpc.is_none() {
            let tcp = TcpStream::connect(&self.authority)
                .await
                .map_err(|e| err(&e))?;
            let _ = tcp.set_nodelay(true);
            let (send, connection) = h2::client::handshake(tcp).await.map_err(|e| err(&e))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            self.grpc = Some(send);
        }
        let Some(send) = self.grpc.as_mut() else {
            return Err("no connection".into());
        };
        let mut send = send.clone().ready().await.map_err(|e| err(&e))?;
        let mut request = http::Request::post(format!("http://{}{GRPC_PATH}", self.authority))
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

    /// One POST on a connection of its own (a batch a second at most:
    /// keeping it is not worth the code).
    async fn http(&mut self, body: Vec<u8>) -> Result<(), String> {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        let mut tcp = TcpStream::connect(&self.authority)
            .await
            .map_err(|e| err(&e))?;
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\n",
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
        tcp.write_all(head.as_bytes()).await.map_err(|e| err(&e))?;
        tcp.write_all(&body).await.map_err(|e| err(&e))?;
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        // The status line is all that is read.
        while !answer.windows(2).any(|w| w == b"\r\n") {
            let n = tcp.read(&mut buf).await.map_err(|e| err(&e))?;
            if n == 0 || answer.len() > 16 * 1024 {
                return Err("the collector closed the connection".into());
            }
            answer.extend_from_slice(&buf[..n]);
        }
        match answer.get(9..10) {
            Some(b"2") => Ok(()),
            _ => Err(format!(
                "the collector answered {}",
                String::from_utf8_lossy(&answer[..answer.len().min(12)])
            )),
        }
    }
}

/// `http://host:port/path` as `host:port` and the path (`/v1/traces`
/// when there is none).
fn split_endpoint(endpoint: &str) -> (String, String) {
    let rest = endpoint.trim_start_matches("http://");
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
    }
}
