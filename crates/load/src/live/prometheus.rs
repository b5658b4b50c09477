//! `--metrics-listen ADDR`: the live figures in Prometheus' text format
//! at `GET /metrics`, from a small server on its own thread (one
//! connection at a time, a 2 s deadline each, heads up to 8 KiB, nothing
//! but `/metrics` answered). Histograms come from the HDR histograms,
//! counted into fixed buckets; `_sum` is the mean times the count (HDR
//! keeps no exact sum).

use std::{
    fmt::Write as _,
    io::{self, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::Duration,
};

use hdrhistogram::Histogram;

use super::{Live, State};
use crate::figures::PHASES;

/// Bucket bounds, in µs: 100 µs to 60 s.
pub(crate) const BOUNDS_US: [u64; 18] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];
const MAX_HEAD: usize = 8 * 1024;
const DEADLINE: Duration = Duration::from_secs(2);

/// Counts of `histogram` (µs) per bucket of [`BOUNDS_US`], not cumulative;
/// the last is above the highest bound.
pub(crate) fn buckets(histogram: &Histogram<u64>) -> [u64; BOUNDS_US.len() + 1] {
    let mut counts = [0; BOUNDS_US.len() + 1];
    for value in histogram.iter_recorded() {
        let at = value.value_iterated_to();
        let slot = BOUNDS_US.partition_point(|&bound| bound < at);
        counts[slot] += value.count_at_value();
    }
    counts
}

/// The figures so far as Prometheus text.
pub(crate) fn render(state: &State) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        name.to_string()
    };
    let _ = family(
        "sluice_load_requests_total",
        "counter",
        "Responses received after the warm-up.",
    );
    let mut lines = String::new();
    let each = || {
        state
            .scenarios
            .iter()
            .filter_map(|s| Some((s, s.cumulative.as_ref()?)))
    };
    for (scenario, figures) in each() {
        let label = label(&scenario.name);
        let _ = writeln!(
            lines,
            "sluice_load_requests_total{{scenario=\"{label}\"}} {}",
            figures.responses()
        );
    }
    out.push_str(&std::mem::take(&mut lines));
    let counters: [(&str, &str); 4] = [
        ("sluice_load_responses_total", "Responses by status code."),
        (
            "sluice_load_errors_total",
            "Requests or connections that failed, by kind.",
        ),
        (
            "sluice_load_received_bytes_total",
            "Bytes read from the target.",
        ),
        (
            "sluice_load_checks_total",
            "Check verdicts on answers, by check and result.",
        ),
    ];
    for (i, (name, help)) in counters.iter().enumerate() {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (scenario, figures) in each() {
            let scenario_label = label(&scenario.name);
            match i {
                0 => {
                    for (code, n) in figures.statuses() {
                        let _ = writeln!(
                            out,
                            "{name}{{scenario=\"{scenario_label}\",status=\"{code}\"}} {n}"
                        );
                    }
                }
                1 => {
                    for (kind, n) in figures.errors.by_kind() {
                        let _ = writeln!(
                            out,
                            "{name}{{scenario=\"{scenario_label}\",kind=\"{kind}\"}} {n}"
                        );
                    }
                }
                2 => {
                    let _ = writeln!(
                        out,
                        "{name}{{scenario=\"{scenario_label}\"}} {}",
                        figures.bytes_read
                    );
                }
                _ => {
                    for (check, count) in scenario.checks.iter().zip(&figures.checks) {
                        let check = label(check);
                        for (result, n) in [("passed", count.passed), ("failed", count.failed)] {
                            let _ = writeln!(
                                out,
                                "{name}{{scenario=\"{scenario_label}\",check=\"{check}\",result=\"{result}\"}} {n}"
                            );
                        }
                    }
                }
            }
        }
    }
    let name = "sluice_load_latency_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Latency of each answer: from its intended send time in the open model, else from its send.\n# TYPE {name} histogram"
    );
    for (scenario, figures) in each() {
        let labels = format!("scenario=\"{}\"", label(&scenario.name));
        histogram(&mut out, name, &labels, &figures.latency);
    }
    let name = "sluice_load_phase_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Phases: dns (once per run), connect and tls (each new connection), waiting (send to first byte) and receiving (first to last byte) of each request.\n# TYPE {name} histogram"
    );
    for (scenario, figures) in each() {
        for (phase, histogram_of) in PHASES.iter().zip(figures.phases.each()) {
            let labels = format!("scenario=\"{}\",phase=\"{phase}\"", label(&scenario.name));
            histogram(&mut out, name, &labels, histogram_of);
        }
    }
    gauges(&mut out, state);
    out
}

fn gauges(out: &mut String, state: &State) {
    let gauge = |out: &mut String, name: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    };
    gauge(
        out,
        "sluice_load_response_rate",
        "Responses per second in the last complete interval.",
    );
    for scenario in &state.scenarios {
        if let Some(last) = &scenario.last {
            let rate = last.requests as f64 / last.duration_s.max(1e-9);
            let _ = writeln!(
                out,
                "sluice_load_response_rate{{scenario=\"{}\"}} {rate}",
                label(&scenario.name)
            );
        }
    }
    gauge(
        out,
        "sluice_load_target",
        "What the scenario asks for now: a rate (kind=rate, open model) or users (kind=users).",
    );
    for scenario in &state.scenarios {
        let kind = if scenario.target.is_rate() {
            "rate"
        } else {
            "users"
        };
        let _ = writeln!(
            out,
            "sluice_load_target{{scenario=\"{}\",kind=\"{kind}\"}} {}",
            label(&scenario.name),
            scenario.target.at(scenario.elapsed)
        );
    }
    gauge(out, "sluice_load_elapsed_seconds", "Measured time so far.");
    for scenario in &state.scenarios {
        let _ = writeln!(
            out,
            "sluice_load_elapsed_seconds{{scenario=\"{}\"}} {}",
            label(&scenario.name),
            scenario.elapsed.as_secs_f64()
        );
    }
    gauge(out, "sluice_load_threshold_passed", "1 while the threshold holds on the figures so far, 0 when it fails (scenario \"*\": all together).");
    for (rule, verdict) in &state.thresholds {
        let Some((passed, _)) = verdict else { continue };
        let scenario = rule
            .scenario
            .and_then(|i| state.scenarios.get(i))
            .map_or("*", |s| s.name.as_str());
        let _ = writeln!(
            out,
            "sluice_load_threshold_passed{{scenario=\"{}\",threshold=\"{}\"}} {}",
            label(scenario),
            label(&rule.threshold.text),
            u8::from(*passed)
        );
    }
    gauge(
        out,
        "sluice_load_aborted",
        "1 once a threshold with abort_on_fail stopped the run.",
    );
    let _ = writeln!(
        out,
        "sluice_load_aborted {}",
        u8::from(state.aborted.is_some())
    );
}

/// One histogram's buckets, sum and count.
fn histogram(out: &mut String, name: &str, labels: &str, histogram: &Histogram<u64>) {
    let counts = buckets(histogram);
    let mut cumulative = 0;
    for (bound, count) in BOUNDS_US.iter().zip(counts) {
        cumulative += count;
        let le = *bound as f64 / 1e6;
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
    }
    let total = histogram.len();
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {total}");
    let sum = histogram.mean() * total as f64 / 1e6;
    let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
    let _ = writeln!(out, "{name}_count{{{labels}}} {total}");
}

/// A label value with `\`, `"` and line breaks escaped.
fn label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The `/metrics` server; stops when dropped.
#[derive(Debug)]
pub struct MetricsServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `listen` and serves `live`'s figures.
    pub fn start(listen: SocketAddr, live: Live) -> io::Result<Self> {
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("load-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::Relaxed) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        // A client that misbehaves costs at most the deadline.
                        let _ = answer(conn, &live);
                    }
                }
            })?;
        Ok(Self {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept.
        let _ = TcpStream::connect_timeout(&self.addr, DEADLINE);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads one request head and answers it; the connection then closes,
/// after what the client still sends is read and dropped (a lingering
/// close, so that the answer is not lost to a reset).
fn answer(mut conn: TcpStream, live: &Live) -> io::Result<()> {
    let answered = exchange(&mut conn, live);
    let _ = conn.shutdown(std::net::Shutdown::Write);
    let mut rest = [0u8; 4096];
    let mut drained = 0;
    while drained < 64 * 1024 {
        match conn.read(&mut rest) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
    answered
}

fn exchange(conn: &mut TcpStream, live: &Live) -> io::Result<()> {
    conn.set_read_timeout(Some(DEADLINE))?;
    conn.set_write_timeout(Some(DEADLINE))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return respond(
                conn,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"head too large\n",
                true,
            );
        }
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let (method, target) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let body = matches!(method, b"GET" | b"HEAD");
    match (body, path) {
        (true, b"/metrics") => {
            let text = render(&live.lock());
            respond(
                conn,
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                text.as_bytes(),
                method == b"GET",
            )
        }
        (true, _) => respond(
            conn,
            "404 Not Found",
            "text/plain",
            b"only /metrics\n",
            method == b"GET",
        ),
        (false, _) => respond(
            conn,
            "405 Method Not Allowed",
            "text/plain",
            b"GET /metrics\n",
            true,
        ),
    }
}

fn respond(
    conn: &mut TcpStream,
    status: &str,
    kind: &str,
    body: &[u8],
    with_body: bool,
) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    if with_body {
        conn.write_all(body)?;
    }
    conn.flush()
}
