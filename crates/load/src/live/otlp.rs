//! `--otlp URL`: the live figures pushed as OTLP metrics (OTLP/HTTP with
//! the JSON encoding, `POST /v1/metrics`) every interval from a thread of
//! their own, and once more at the end: cumulative sums, histograms with
//! the Prometheus endpoint's buckets, and gauges, each point with the
//! scenario as an attribute. A push that fails is counted and retried at
//! the next interval; it never holds the run.

use std::{
    io::{self, Read, Write},
    net::{TcpStream, ToSocketAddrs},
    path::PathBuf,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    thread::JoinHandle,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use bytes::BytesMut;
use hdrhistogram::Histogram;
use serde_json::{json, Value};

use super::{prometheus, Live, State};
use crate::{
    figures::PHASES,
    response::ResponseReader,
    target::{parse_url, Scheme},
};

const DEADLINE: Duration = Duration::from_secs(5);
/// Most bytes read of a collector's answer.
const MAX_ANSWER: usize = 64 * 1024;

/// Where the metrics go.
#[derive(Debug, Clone)]
pub struct OtlpTarget {
    /// `http(s)://HOST:PORT/v1/metrics`.
    pub url: String,
    /// https: trust the CA certificates in this PEM file, not the built-in roots.
    pub cacert: Option<PathBuf>,
    /// How often to push.
    pub every: Duration,
}

impl OtlpTarget {
    /// Checks the URL; a path-less URL gets `/v1/metrics`.
    pub fn new(url: &str, cacert: Option<PathBuf>, every: Duration) -> Result<Self, String> {
        let (_, path) = parse_url(url).map_err(|err| format!("--otlp: {err}"))?;
        let url = if path == "/" {
            format!("{}/v1/metrics", url.trim_end_matches('/'))
        } else {
            url.to_string()
        };
        if every.is_zero() {
            return Err("--otlp-interval must be longer than 0".into());
        }
        Ok(Self { url, cacert, every })
    }
}

/// The pushing thread; [`OtlpPusher::finish`] pushes once more and stops it.
#[derive(Debug)]
pub struct OtlpPusher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    outcome: Arc<Mutex<Outcome>>,
    target: OtlpTarget,
    live: Live,
}

/// How the pushes went.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub pushed: u64,
    pub failed: u64,
    pub last_error: Option<String>,
}

impl OtlpPusher {
    pub fn start(target: OtlpTarget, live: Live) -> io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let outcome = Arc::new(Mutex::new(Outcome::default()));
        let thread = {
            let (stop, outcome, target, live) = (
                Arc::clone(&stop),
                Arc::clone(&outcome),
                target.clone(),
                live.clone(),
            );
            std::thread::Builder::new()
                .name("load-otlp".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        // Sleeps in short steps, so that the end is seen at once.
                        let wake = std::time::Instant::now() + target.every;
                        while std::time::Instant::now() < wake && !stop.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        if !stop.load(Ordering::Relaxed) {
                            push_once(&target, &live, &outcome);
                        }
                    }
                })?
        };
        Ok(Self {
            stop,
            thread: Some(thread),
            outcome,
            target,
            live,
        })
    }

    /// Stops the thread, pushes the final figures and says how it went.
    pub fn finish(mut self) -> Outcome {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        push_once(&self.target, &self.live, &self.outcome);
        self.outcome.lock().map(|o| o.clone()).unwrap_or_default()
    }
}

fn push_once(target: &OtlpTarget, live: &Live, outcome: &Mutex<Outcome>) {
    let body = export(&live.lock(), SystemTime::now()).to_string();
    let result = post(target, body.as_bytes());
    if let Ok(mut outcome) = outcome.lock() {
        match result {
            Ok(()) => outcome.pushed += 1,
            Err(err) => {
                outcome.failed += 1;
                outcome.last_error = Some(err);
            }
        }
    }
}

/// POSTs `body` to the collector; `Err` says why it did not take it.
fn post(target: &OtlpTarget, body: &[u8]) -> Result<(), String> {
    let (server, path) = parse_url(&target.url)?;
    let addr = (server.host.as_str(), server.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("cannot resolve {}", server.host))?;
    let tcp = TcpStream::connect_timeout(&addr, DEADLINE).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(DEADLINE))
        .map_err(|e| e.to_string())?;
    tcp.set_write_timeout(Some(DEADLINE))
        .map_err(|e| e.to_string())?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\nUser-Agent: sluice-load/{}\r\n\r\n",
        server.authority(),
        body.len(),
        env!("CARGO_PKG_VERSION")
    );
    let status = match server.scheme {
        Scheme::Http => exchange(tcp, head.as_bytes(), body)?,
        Scheme::Https => {
            let trust = match &target.cacert {
                Some(path) => tls::Trust::CaFile(path),
                None => tls::Trust::WebRoots,
            };
            let config =
                tls::client_config(trust, None, &[tls::ALPN_HTTP11]).map_err(|e| e.to_string())?;
            let name = tls::rustls::pki_types::ServerName::try_from(server.host.clone())
                .map_err(|e| e.to_string())?;
            let session = tls::rustls::ClientConnection::new(Arc::new(config), name)
                .map_err(|e| e.to_string())?;
            exchange(
                tls::rustls::StreamOwned::new(session, tcp),
                head.as_bytes(),
                body,
            )?
        }
    };
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("the collector answered {status}"))
    }
}

/// Writes the request, reads the answer's status.
fn exchange(mut stream: impl Read + Write, head: &[u8], body: &[u8]) -> Result<u16, String> {
    stream.write_all(head).map_err(|e| e.to_string())?;
    stream.write_all(body).map_err(|e| e.to_string())?;
    stream.flush().map_err(|e| e.to_string())?;
    let mut reader = ResponseReader::default();
    let mut buf = BytesMut::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let mut read = 0;
    loop {
        match reader.advance(&mut buf, false) {
            Ok(Some(done)) => return Ok(done.status),
            Ok(None) => {}
            Err(err) => return Err(format!("a bad answer from the collector: {err}")),
        }
        let n = stream.read(&mut chunk).map_err(|e| e.to_string())?;
        read += n;
        if n == 0 {
            return reader
                .finish_at_eof()
                .map(|done| done.status)
                .ok_or_else(|| "the collector closed the connection without an answer".into());
        }
        if read > MAX_ANSWER {
            return Err("the collector's answer is too long".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The figures so far as an OTLP `ExportMetricsServiceRequest` (JSON).
pub(crate) fn export(state: &State, now: SystemTime) -> Value {
    let nanos = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
            .to_string()
    };
    let (start, now) = (nanos(state.started), nanos(now));
    let point = |attributes: Vec<(&str, String)>| {
        json!({
            "attributes": attributes.into_iter().map(|(k, v)| json!({"key": k, "value": {"stringValue": v}})).collect::<Vec<_>>(),
            "startTimeUnixNano": start,
            "timeUnixNano": now,
        })
    };
    let mut metrics = Vec::new();
    let mut sum =
        |name: &str, unit: &str, description: &str, points: Vec<(Vec<(&str, String)>, u64)>| {
            let points: Vec<Value> = points
                .into_iter()
                .map(|(attributes, value)| {
                    let mut p = point(attributes);
                    p["asInt"] = value.to_string().into();
                    p
                })
                .collect();
            metrics.push(
                json!({"name": name, "unit": unit, "description": description,
            "sum": {"aggregationTemporality": 2, "isMonotonic": true, "dataPoints": points}}),
            );
        };
    let each = || {
        state
            .scenarios
            .iter()
            .filter_map(|s| Some((s, s.cumulative.as_ref()?)))
    };
    let scenario = |name: &str| vec![("scenario", name.to_string())];
    sum(
        "sluice.load.requests",
        "{response}",
        "Responses received after the warm-up.",
        each()
            .map(|(s, f)| (scenario(&s.name), f.responses()))
            .collect(),
    );
    sum(
        "sluice.load.responses",
        "{response}",
        "Responses by status code.",
        each()
            .flat_map(|(s, f)| {
                f.statuses().map(move |(code, n)| {
                    (
                        vec![("scenario", s.name.clone()), ("status", code.to_string())],
                        n,
                    )
                })
            })
            .collect(),
    );
    sum(
        "sluice.load.errors",
        "{error}",
        "Requests or connections that failed, by kind.",
        each()
            .flat_map(|(s, f)| {
                f.errors.by_kind().map(|(kind, n)| {
                    (
                        vec![("scenario", s.name.clone()), ("kind", kind.to_string())],
                        n,
                    )
                })
            })
            .collect(),
    );
    sum(
        "sluice.load.received_bytes",
        "By",
        "Bytes read from the target.",
        each()
            .map(|(s, f)| (scenario(&s.name), f.bytes_read))
            .collect(),
    );
    sum(
        "sluice.load.checks",
        "{verdict}",
        "Check verdicts on answers, by check and result.",
        each()
            .flat_map(|(s, f)| {
                s.checks.iter().zip(&f.checks).flat_map(move |(check, c)| {
                    [("passed", c.passed), ("failed", c.failed)].map(|(result, n)| {
                        (
                            vec![
                                ("scenario", s.name.clone()),
                                ("check", check.clone()),
                                ("result", result.to_string()),
                            ],
                            n,
                        )
                    })
                })
            })
            .collect(),
    );
    let histogram_point = |attributes: Vec<(&str, String)>, h: &Histogram<u64>| {
        let mut p = point(attributes);
        let counts = prometheus::buckets(h);
        p["count"] = h.len().to_string().into();
        p["sum"] = (h.mean() * h.len() as f64 / 1e6).into();
        p["bucketCounts"] = counts
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .into();
        p["explicitBounds"] = prometheus::BOUNDS_US
            .iter()
            .map(|b| *b as f64 / 1e6)
            .collect::<Vec<_>>()
            .into();
        if !h.is_empty() {
            p["min"] = (h.min() as f64 / 1e6).into();
            p["max"] = (h.max() as f64 / 1e6).into();
        }
        p
    };
    let latency: Vec<Value> = each()
        .map(|(s, f)| histogram_point(scenario(&s.name), &f.latency))
        .collect();
    metrics.push(json!({"name": "sluice.load.latency", "unit": "s",
        "description": "Latency of each answer: from its intended send time in the open model, else from its send.",
        "histogram": {"aggregationTemporality": 2, "dataPoints": latency}}));
    let phases: Vec<Value> = each()
        .flat_map(|(s, f)| {
            PHASES
                .iter()
                .zip(f.phases.each())
                .map(|(phase, h)| {
                    histogram_point(
                        vec![("scenario", s.name.clone()), ("phase", phase.to_string())],
                        h,
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    metrics.push(json!({"name": "sluice.load.phase", "unit": "s",
        "description": "Phases: dns, connect, tls (new connections), waiting and receiving (each request).",
        "histogram": {"aggregationTemporality": 2, "dataPoints": phases}}));
    let mut gauge = |name: &str,
                     unit: &str,
                     description: &str,
                     points: Vec<(Vec<(&str, String)>, f64)>| {
        let points: Vec<Value> = points
            .into_iter()
            .map(|(attributes, value)| {
                let mut p = point(attributes);
                p["asDouble"] = value.into();
                p
            })
            .collect();
        metrics.push(json!({"name": name, "unit": unit, "description": description, "gauge": {"dataPoints": points}}));
    };
    gauge(
        "sluice.load.response_rate",
        "{response}/s",
        "Responses per second in the last complete interval.",
        state
            .scenarios
            .iter()
            .filter_map(|s| {
                let last = s.last.as_ref()?;
                Some((
                    scenario(&s.name),
                    last.requests as f64 / last.duration_s.max(1e-9),
                ))
            })
            .collect(),
    );
    gauge(
        "sluice.load.target",
        "1",
        "What the scenario asks for now: a rate (kind=rate) or users (kind=users).",
        state
            .scenarios
            .iter()
            .map(|s| {
                let kind = if s.target.is_rate() { "rate" } else { "users" };
                (
                    vec![("scenario", s.name.clone()), ("kind", kind.to_string())],
                    s.target.at(s.elapsed),
                )
            })
            .collect(),
    );
    gauge(
        "sluice.load.threshold.passed",
        "1",
        "1 while the threshold holds on the figures so far, 0 when it fails.",
        state
            .thresholds
            .iter()
            .filter_map(|(rule, verdict)| {
                let (passed, _) = verdict.as_ref()?;
                let on = rule
                    .scenario
                    .and_then(|i| state.scenarios.get(i))
                    .map_or("*", |s| s.name.as_str());
                Some((
                    vec![
                        ("scenario", on.to_string()),
                        ("threshold", rule.threshold.text.clone()),
                    ],
                    f64::from(u8::from(*passed)),
                ))
            })
            .collect(),
    );
    // A metric without a point (before the first interval) says nothing.
    metrics.retain(|metric| {
        ["sum", "gauge", "histogram"].iter().any(|kind| {
            metric[kind]["dataPoints"]
                .as_array()
                .is_some_and(|points| !points.is_empty())
        })
    });
    json!({
        "resourceMetrics": [{
            "resource": {"attributes": [
                {"key": "service.name", "value": {"stringValue": "sluice-load"}},
                {"key": "service.version", "value": {"stringValue": env!("CARGO_PKG_VERSION")}},
            ]},
            "scopeMetrics": [{
                "scope": {"name": "sluice-load", "version": env!("CARGO_PKG_VERSION")},
                "metrics": metrics,
            }],
        }]
    })
}
