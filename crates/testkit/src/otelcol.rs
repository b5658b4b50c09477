//! A real OpenTelemetry Collector (built by bench/otelcol/build.sh: OTLP
//! receiver, batch processor, file exporter) on free loopback ports, for
//! the tracing tests and `sluice load --otlp`'s: what the proxy exports
//! (spans) and what the load generator pushes (metrics) is read back from
//! the file exporters' JSON lines. Killed on drop.
//!
//! Without the binary (`SLUICE_OTELCOL`, else
//! `~/.cache/sluice/otelcol/otelcol-sluice`), [`Collector::start`] returns
//! `None` after printing a `SKIP` line naming the test, unless
//! `SLUICE_REQUIRE_OTELCOL=1` (set by `.ci/run` when it built the
//! collector): then it panics, so that CI cannot pass by skipping.

use std::{
    net::{SocketAddr, TcpListener, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

const READY_WITHIN: Duration = Duration::from_secs(20);

#[derive(Debug)]
pub struct Collector {
    child: Child,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    dir: PathBuf,
}

/// The collector's binary, if built.
fn binary() -> Option<PathBuf> {
    let path = match std::env::var_os("SLUICE_OTELCOL") {
        Some(path) => PathBuf::from(path),
        None => {
            PathBuf::from(std::env::var_os("HOME")?).join(".cache/sluice/otelcol/otelcol-sluice")
        }
    };
    path.is_file().then_some(path)
}

impl Collector {
    pub fn start(test: &str) -> Option<Self> {
        Self::start_with(test, None)
    }

    /// A collector whose two receivers take TLS only, with this server
    /// certificate and key (PEM files).
    pub fn start_tls(test: &str, cert: &std::path::Path, key: &std::path::Path) -> Option<Self> {
        Self::start_with(test, Some((cert, key)))
    }

    fn start_with(test: &str, tls: Option<(&std::path::Path, &std::path::Path)>) -> Option<Self> {
        let Some(binary) = binary() else {
            crate::skip(
                test,
                crate::Need::Otelcol,
                "no OpenTelemetry Collector (build it with bash bench/otelcol/build.sh; needs Go)",
            );
            return None;
        };
        let dir = std::env::temp_dir().join(format!(
            "sluice-otelcol-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("a directory for the collector");
        let grpc = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let http = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let tls = match tls {
            Some((cert, key)) => format!(
                ", tls: {{ cert_file: \"{}\", key_file: \"{}\" }}",
                cert.display(),
                key.display()
            ),
            None => String::new(),
        };
        let config = format!(
            "receivers:\n  otlp:\n    protocols:\n      grpc: {{ endpoint: \"{grpc}\"{tls} }}\n      http: {{ endpoint: \"{http}\"{tls} }}\n\
             processors:\n  batch: {{ timeout: 50ms }}\n\
             exporters:\n  file: {{ path: \"{}\", format: json, flush_interval: 50ms }}\n  file/metrics: {{ path: \"{}\", format: json, flush_interval: 50ms }}\n\
             service:\n  telemetry: {{ metrics: {{ level: none }} }}\n  pipelines:\n    traces: {{ receivers: [otlp], processors: [batch], exporters: [file] }}\n    metrics: {{ receivers: [otlp], processors: [batch], exporters: [file/metrics] }}\n",
            dir.join("spans.json").display(),
            dir.join("metrics.json").display()
        );
        let config_path = dir.join("config.yaml");
        std::fs::write(&config_path, config).expect("write the collector's configuration");
        let child = Command::new(&binary)
            .arg("--config")
            .arg(format!("file:{}", config_path.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.join("collector.log")).expect("a log file"),
            ))
            .spawn()
            .expect("start the collector");
        let collector = Self {
            child,
            grpc,
            http,
            dir,
        };
        let deadline = Instant::now() + READY_WITHIN;
        while TcpStream::connect(grpc).is_err() || TcpStream::connect(http).is_err() {
            assert!(
                Instant::now() < deadline,
                "the collector did not listen on {grpc} and {http} within {READY_WITHIN:?}: {}",
                collector.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(collector)
    }

    /// The collector's own log (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("collector.log")).unwrap_or_default()
    }

    /// Every span exported so far (OTLP JSON: `traceId`, `spanId`,
    /// `parentSpanId`, `name`, `kind`, `attributes`, `events`), each with
    /// its resource's attributes under `resource`.
    pub fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.join("spans.json")).unwrap_or_default();
        let mut spans = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(export) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            for resource_spans in export["resourceSpans"].as_array().into_iter().flatten() {
                let resource = resource_spans["resource"].clone();
                for scope in resource_spans["scopeSpans"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    for span in scope["spans"].as_array().into_iter().flatten() {
                        let mut span = span.clone();
                        span["resource"] = resource.clone();
                        spans.push(span);
                    }
                }
            }
        }
        spans
    }

    /// Every metrics export received so far, one OTLP JSON document
    /// (`resourceMetrics`) each, in the order they came.
    pub fn metric_exports(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.join("metrics.json")).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .collect()
    }

    /// Polls [`Collector::spans`] until `done` says so, within 20 seconds.
    pub fn wait_for(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not exported within {READY_WITHIN:?}; spans: {spans:#?}\ncollector log: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

/// The string or integer value of attribute `key` of a span (or event).
pub fn attribute(span: &Value, key: &str) -> Option<String> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|kv| kv["key"] == key)
        .and_then(|kv| {
            let value = &kv["value"];
            value["stringValue"]
                .as_str()
                .map(str::to_string)
                .or_else(|| value["intValue"].as_str().map(str::to_string))
                .or_else(|| value["intValue"].as_i64().map(|i| i.to_string()))
        })
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}
