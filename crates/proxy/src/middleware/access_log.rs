//! `access_log`: one JSON line per request, to standard output or a file.
//! The line is begun on the request (method, path, client, chosen
//! headers, ids) and finished when the exchange is done (status, bytes,
//! duration, upstream). A writer thread owns the output: the hot path only
//! hands the line to a bounded queue, and when the queue is full the line
//! is dropped and counted rather than stalling requests.
//!
//! Never logged: the query string (it may carry tokens), bodies, and the
//! values of `authorization`, `proxy-authorization`, `cookie`, of headers
//! whose name ends in a secret-like word (`x-api-key`, `x-auth-token`:
//! the rule `/config` hides settings by) and of the headers listed in
//! `mask` (shown as `***`).

use std::{
    fmt::Write as _,
    fs::OpenOptions,
    io::{BufWriter, Write},
    path::Path,
    sync::{
        atomic::{AtomicU64, Ordering::Relaxed},
        mpsc::{sync_channel, Receiver, SyncSender, TrySendError},
        Arc,
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::Context as _;
use http::HeaderName;

use super::{
    build::{Build, Builder, Keep},
    Exchange, Flow, Handler, Outcome, RequestView,
};
use crate::config::{AccessLogSettings, LogField as Field};
use crate::telemetry::{Exposition, MetricKind};
use crate::wire::proxy_protocol::Proxied;

/// Lines wait at most about this long before they are written.
const BATCH_INTERVAL: Duration = Duration::from_millis(20);

/// Masked whatever the configuration says.
const ALWAYS_MASKED: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

#[derive(Debug)]
pub(crate) struct AccessLogger {
    queue: SyncSender<String>,
    /// Bits of the [`Field`]s written.
    fields: u16,
    headers: Vec<(HeaderName, bool)>,
    routes: Vec<String>,
    upstreams: Vec<String>,
    dropped: AtomicU64,
}

/// The bit set of the `fields` named (all when the list is empty).
fn field_set(fields: &[Field]) -> u16 {
    if fields.is_empty() {
        return u16::MAX;
    }
    fields.iter().fold(0, |set, field| set | 1 << *field as u16)
}

/// The first half of a line, written on the request (per-request state).
#[derive(Debug, Default)]
struct Pending(Option<String>);

impl Build for AccessLogSettings {
    fn build(&self, builder: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        builder.keep = Keep::SameRoutes;
        Ok(Arc::new(AccessLogger::new(self, builder)?))
    }
}

impl AccessLogger {
    fn new(config: &AccessLogSettings, builder: &Builder<'_>) -> anyhow::Result<Self> {
        let headers = config
            .headers
            .iter()
            .map(|name| {
                // A credential header (`x-api-key`, `x-auth-token`) is
                // masked whatever `mask` says: the log is no place for it.
                let masked = ALWAYS_MASKED.contains(&name.as_str())
                    || config.mask.contains(name)
                    || crate::config::secret_name(name.as_str());
                (name.0.clone(), masked)
            })
            .collect();
        let output: Box<dyn Write + Send> = match config.path.as_deref() {
            None | Some("-") => Box::new(std::io::stdout()),
            // `--check` creates no file: its directory must be there.
            Some(path) if builder.context.check && !Path::new(path).exists() => {
                let dir = Path::new(path)
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                if !dir.is_dir() {
                    anyhow::bail!(
                        "cannot open the access log `{path}`: no directory {}",
                        dir.display()
                    );
                }
                Box::new(std::io::sink())
            }
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
            fields: field_set(&config.fields),
            headers,
            routes: builder.context.route_names.to_vec(),
            upstreams: builder
                .context
                .route_upstreams
                .iter()
                .map(|u| u.to_string())
                .collect(),
            dropped: AtomicU64::new(0),
        })
    }
}

/// Writes lines in batches until the proxy (every sender) is gone. While
/// lines keep coming the writer sleeps between batches instead of waiting
/// on the queue, so that a request never has to wake it (a futex call and
/// a context switch per line cost more than the rest of the log);
/// it waits on the queue only once a whole batch interval was quiet.
fn write_lines(lines: &Receiver<String>, output: Box<dyn Write + Send>) {
    let mut output = BufWriter::with_capacity(64 * 1024, output);
    while let Ok(first) = lines.recv() {
        let mut batch = Some(first);
        while let Some(first) = batch.take() {
            let mut ok = output.write_all(first.as_bytes()).is_ok();
            while let Ok(line) = lines.try_recv() {
                ok &= output.write_all(line.as_bytes()).is_ok();
            }
            if !(ok && output.flush().is_ok()) {
                // Nowhere to report it but standard error; keep draining.
                eprintln!("sluice: the access log cannot be written");
            }
            std::thread::sleep(BATCH_INTERVAL);
            batch = lines.try_recv().ok();
        }
    }
}

impl AccessLogger {
    fn has(&self, field: Field) -> bool {
        self.fields & (1 << field as u16) != 0
    }
}

/// Starts the member `name` of the line's object.
fn key(line: &mut String, name: &str) {
    if !line.ends_with('{') {
        line.push(',');
    }
    line.push('"');
    line.push_str(name);
    line.push_str("\":");
}

impl Handler for AccessLogger {
    /// One total over every `access_log` instance.
    fn render_metrics(&self, _name: &str, out: &mut Exposition) {
        out.family(
            "sluice_access_log_dropped_total",
            MetricKind::Counter,
            "Access log lines dropped because the writer fell behind.",
        )
        .add(&[], self.dropped.load(Relaxed));
    }

    fn request(&self, request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        let mut line = String::with_capacity(256);
        line.push('{');
        if self.has(Field::Time) {
            key(&mut line, "time");
            line.push('"');
            push_time(&mut line, SystemTime::now());
            line.push('"');
        }
        if self.has(Field::Client) {
            key(&mut line, "client");
            let _ = write!(line, "\"{}\"", request.client_ip);
        }
        if let (true, Some(proxied)) = (self.has(Field::Proxy), request.proxied) {
            push_proxied(&mut line, proxied);
        }
        if self.has(Field::Method) {
            key(&mut line, "method");
            push_json(&mut line, request.method.as_str().as_bytes());
        }
        if self.has(Field::Path) {
            key(&mut line, "path");
            push_json(&mut line, request.path.as_bytes());
        }
        if !self.headers.is_empty() {
            key(&mut line, "headers");
            line.push('{');
            for (name, masked) in &self.headers {
                let Some(value) = request.header(name.as_str()) else {
                    continue;
                };
                key(&mut line, name.as_str());
                push_json(&mut line, if *masked { b"***" } else { value });
            }
            line.push('}');
        }
        exchange.state.get_mut::<Pending>().0 = Some(line);
        Flow::Next
    }

    fn done(&self, exchange: &mut Exchange, outcome: &Outcome) {
        let Some(mut line) = exchange.state.get_mut::<Pending>().0.take() else {
            return;
        };
        if self.has(Field::Status) {
            key(&mut line, "status");
            let _ = write!(line, "{}", outcome.status.as_u16());
        }
        if self.has(Field::Bytes) {
            key(&mut line, "bytes");
            let _ = write!(line, "{}", outcome.body_bytes);
        }
        if self.has(Field::DurationMs) {
            let duration = exchange
                .started
                .map_or(0.0, |s| super::millis(Instant::now() - s));
            key(&mut line, "duration_ms");
            let _ = write!(line, "{duration:.3}");
        }
        if self.has(Field::Route) {
            key(&mut line, "route");
            let route = self
                .routes
                .get(exchange.route.index())
                .map_or("", String::as_str);
            push_json(&mut line, route.as_bytes());
        }
        if self.has(Field::Upstream) {
            key(&mut line, "upstream");
            let upstream = outcome
                .upstream
                .and_then(|_| self.upstreams.get(exchange.route.index()))
                .map_or("", String::as_str);
            push_json(&mut line, upstream.as_bytes());
        }
        for (field, name, id) in [
            (
                Field::CorrelationId,
                "correlation_id",
                &exchange.correlation_id,
            ),
            (
                Field::TraceabilityId,
                "traceability_id",
                &exchange.traceability_id,
            ),
            (Field::Traceparent, "traceparent", &exchange.traceparent),
        ] {
            if let (true, Some(id)) = (self.has(field), id) {
                key(&mut line, name);
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

/// The `proxy` member: what the connection's PROXY protocol header said
/// (nothing for a client that connected directly).
fn push_proxied(line: &mut String, proxied: &Proxied) {
    let Some(via) = proxied.via else {
        return;
    };
    key(line, "proxy");
    let _ = write!(line, "{{\"via\":\"{via}\",\"version\":{}", proxied.version);
    let tlvs = &proxied.tlvs;
    let ssl = tlvs.ssl.as_ref();
    for (name, value) in [
        ("alpn", tlvs.alpn.as_deref()),
        ("authority", tlvs.authority.as_deref()),
        ("unique_id", tlvs.unique_id.as_deref()),
        ("tls_version", ssl.and_then(|ssl| ssl.version.as_deref())),
        ("tls_cipher", ssl.and_then(|ssl| ssl.cipher.as_deref())),
        ("tls_client_cn", ssl.and_then(|ssl| ssl.cn.as_deref())),
    ] {
        if let Some(value) = value {
            key(line, name);
            push_json(line, value.as_bytes());
        }
    }
    if let Some(ssl) = ssl.filter(|ssl| ssl.client_cert) {
        key(line, "tls_client_verified");
        line.push_str(if ssl.verified { "true" } else { "false" });
    }
    line.push('}');
}

thread_local! {
    /// The last second formatted (`2026-11-21T08:53:12`), reused within it.
    static SECOND: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((u64::MAX, String::new())) };
}

/// RFC 3339 UTC with milliseconds; the date part is formatted once a second.
fn push_time(out: &mut String, now: SystemTime) {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    SECOND.with_borrow_mut(|(second, text)| {
        if *second != since.as_secs() {
            *second = since.as_secs();
            let full = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(*second))
                .to_string();
            *text = full.trim_end_matches('Z').to_string();
        }
        out.push_str(text);
    });
    let _ = write!(out, ".{:03}Z", since.subsec_millis());
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
    fn fields_are_chosen_by_name() {
        assert_eq!(field_set(&[]), u16::MAX);
        let set = field_set(&[Field::Status, Field::Path]);
        assert_eq!(set, 1 << Field::Status as u16 | 1 << Field::Path as u16);
    }

    #[test]
    fn times_are_rfc3339_with_millis() {
        let mut out = String::new();
        push_time(
            &mut out,
            UNIX_EPOCH + Duration::from_millis(1_763_713_992_045),
        );
        assert_eq!(out, "2025-11-21T08:33:12.045Z");
        out.clear();
        push_time(
            &mut out,
            UNIX_EPOCH + Duration::from_millis(1_763_713_993_007),
        );
        assert_eq!(out, "2025-11-21T08:33:13.007Z");
    }

    #[test]
    fn a_proxy_header_is_logged_as_an_object() {
        let mut proxied = Proxied {
            client: "192.0.2.1:5000".parse().unwrap(),
            local: None,
            via: Some("10.0.0.9:41000".parse().unwrap()),
            version: 2,
            tlvs: crate::wire::proxy_protocol::Tlvs {
                alpn: Some("h2".into()),
                authority: Some("api.example".into()),
                ssl: Some(crate::wire::proxy_protocol::Ssl {
                    client_ssl: true,
                    client_cert: true,
                    verified: false,
                    cn: Some("alice".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            headers: Default::default(),
        };
        let mut line = String::from("{");
        push_proxied(&mut line, &proxied);
        line.push('}');
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            parsed["proxy"],
            serde_json::json!({"via": "10.0.0.9:41000", "version": 2, "alpn": "h2",
                "authority": "api.example", "tls_client_cn": "alice", "tls_client_verified": false})
        );
        // A direct client on the same listener: no member.
        proxied.via = None;
        let mut line = String::from("{");
        push_proxied(&mut line, &proxied);
        assert_eq!(line, "{");
    }

    #[test]
    fn json_strings_are_escaped() {
        let mut out = String::new();
        push_json(&mut out, b"a\"b\\c\n\x01\xff");
        assert_eq!(out, "\"a\\\"b\\\\c\\u000a\\u0001\u{fffd}\"");
        let parsed: String = serde_json::from_str(&out).unwrap();
        assert_eq!(parsed, "a\"b\\c\n\u{1}\u{fffd}");
    }
}
