//! `access_log`: one JSON line per request, to standard output or a file.
//! The line is begun on the request (method, path, client, chosen
//! headers, ids) and finished when the exchange is done (status, bytes,
//! duration, upstream). A writer thread owns the output: the hot path only
//! hands the line to a bounded queue, and when the queue is full the line
//! is dropped and counted rather than stalling requests.
//!
//! Never logged: the query string (it may carry tokens), bodies, and the
//! values of `authorization`, `proxy-authorization`, `cookie` and of the
//! headers listed in `mask` (shown as `***`).

use std::{
    fmt::Write as _,
    fs::OpenOptions,
    io::{BufWriter, Write},
    sync::{
        atomic::{AtomicU64, Ordering::Relaxed},
        mpsc::{sync_channel, Receiver, SyncSender, TrySendError},
    },
    time::{Instant, SystemTime},
};

use anyhow::Context as _;
use http::HeaderName;

use super::{header_name, BuildContext, Exchange, Flow, Handler, Outcome, RequestView};
use crate::config::AccessLog;

/// Masked whatever the configuration says.
const ALWAYS_MASKED: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

#[derive(Debug)]
pub(crate) struct AccessLogger {
    queue: SyncSender<String>,
    headers: Vec<(HeaderName, bool)>,
    routes: Vec<String>,
    upstreams: Vec<String>,
    dropped: AtomicU64,
}

/// The first half of a line, written on the request.
#[derive(Debug)]
pub(crate) struct Pending(String);

impl AccessLogger {
    pub(crate) fn new(config: &AccessLog, context: &BuildContext<'_>) -> anyhow::Result<Self> {
        let mask: Vec<HeaderName> = config
            .mask
            .iter()
            .map(|h| header_name(h))
            .collect::<anyhow::Result<_>>()?;
        let headers = config
            .headers
            .iter()
            .map(|h| {
                let name = header_name(h)?;
                let masked = ALWAYS_MASKED.contains(&name.as_str()) || mask.contains(&name);
                Ok((name, masked))
            })
            .collect::<anyhow::Result<_>>()?;
        let output: Box<dyn Write + Send> = match config.path.as_deref() {
            None | Some("-") => Box::new(std::io::stdout()),
            Some(path) => Box::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .with_context(|| format!("cannot open the access log `{path}`"))?,
            ),
        };
        let (queue, lines) = sync_channel(config.queue.max(1));
        std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || write_lines(&lines, output))
            .context("cannot start the access log writer")?;
        Ok(Self {
            queue,
            headers,
            routes: context.route_names.to_vec(),
            upstreams: context
                .route_upstreams
                .iter()
                .map(|u| u.to_string())
                .collect(),
            dropped: AtomicU64::new(0),
        })
    }

    /// Lines dropped because the writer fell behind.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }
}

/// Writes lines as they come, flushing whenever the queue runs dry; ends
/// when the proxy (every sender) is gone.
fn write_lines(lines: &Receiver<String>, output: Box<dyn Write + Send>) {
    let mut output = BufWriter::with_capacity(64 * 1024, output);
    while let Ok(line) = lines.recv() {
        let mut ok = output.write_all(line.as_bytes()).is_ok();
        while let Ok(line) = lines.try_recv() {
            ok &= output.write_all(line.as_bytes()).is_ok();
        }
        if !(ok && output.flush().is_ok()) {
            // Nowhere to report it but standard error; keep draining.
            eprintln!("sluice: the access log cannot be written");
        }
    }
}

impl Handler for AccessLogger {
    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        let mut line = String::with_capacity(256);
        line.push_str("{\"time\":\"");
        line.push_str(&humantime::format_rfc3339_millis(SystemTime::now()).to_string());
        let _ = write!(line, "\",\"client\":\"{}\",\"method\":", request.client_ip);
        push_json(&mut line, request.method.as_str().as_bytes());
        line.push_str(",\"path\":");
        push_json(&mut line, request.path.as_bytes());
        if !self.headers.is_empty() {
            line.push_str(",\"headers\":{");
            let mut first = true;
            for (name, masked) in &self.headers {
                let Some(value) = request.header(name.as_str()) else {
                    continue;
                };
                if !first {
                    line.push(',');
                }
                first = false;
                push_json(&mut line, name.as_str().as_bytes());
                line.push(':');
                push_json(&mut line, if *masked { b"***" } else { value });
            }
            line.push('}');
        }
        exchange.log_line = Some(Pending(line));
        Flow::Next
    }

    fn done(&self, exchange: &Exchange, outcome: &Outcome) {
        let Some(Pending(begun)) = &exchange.log_line else {
            return;
        };
        let mut line = begun.clone();
        let duration = exchange
            .started
            .map_or(0.0, |s| super::millis(Instant::now() - s));
        let route = self.routes.get(exchange.route).map_or("", String::as_str);
        let upstream = outcome
            .upstream
            .and_then(|_| self.upstreams.get(exchange.route))
            .map_or("", String::as_str);
        let _ = write!(
            line,
            ",\"status\":{},\"bytes\":{},\"duration_ms\":{duration:.3},\"route\":",
            outcome.status.as_u16(),
            outcome.body_bytes
        );
        push_json(&mut line, route.as_bytes());
        line.push_str(",\"upstream\":");
        push_json(&mut line, upstream.as_bytes());
        for (key, id) in [
            ("correlation_id", &exchange.correlation_id),
            ("traceability_id", &exchange.traceability_id),
            ("traceparent", &exchange.traceparent),
        ] {
            if let Some(id) = id {
                let _ = write!(line, ",\"{key}\":");
                push_json(&mut line, id.as_bytes());
            }
        }
        line.push_str("}\n");
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.queue.try_send(line)
        {
            self.dropped.fetch_add(1, Relaxed);
        }
    }
}

/// A JSON string of `bytes` (invalid UTF-8 replaced), quotes included.
fn push_json(out: &mut String, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        let mut out = String::new();
        push_json(&mut out, b"a\"b\\c\n\x01\xff");
        assert_eq!(out, "\"a\\\"b\\\\c\\u000a\\u0001\u{fffd}\"");
        let parsed: String = serde_json::from_str(&out).unwrap();
        assert_eq!(parsed, "a\"b\\c\n\u{1}\u{fffd}");
    }
}
