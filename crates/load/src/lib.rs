//! `sluice load`: an HTTP/1.1, HTTP/2 and HTTP/3 load generator.
//!
//! Closed model (wrk, h2load): `-c` connections over `-t` threads, each
//! connection keeping `--pipeline` HTTP/1.1 requests or `--streams` HTTP/2
//! or HTTP/3 streams in flight. Open model (wrk2): `--rate`
//! requests/s on a fixed timetable, each request sent within microseconds
//! of its time by its thread's pacer (`pacer.rs`), latency measured from
//! its intended send time (coordinated-omission corrected), with the
//! uncorrected figures and the generator's own send lateness beside it. Users model (Gatling): the closed model
//! with one request in flight per connection, a random think time
//! (`think`) between a response and the next request, and an optional
//! `ramp` over which the users start. One current-thread runtime per thread;
//! statistics in HDR histograms per thread, merged at the end.
//!
//! ```no_run
//! use http::Method;
//! let mut config = load::LoadConfig::new(&[(Method::GET, "http://127.0.0.1:8080/v1/pets".into())]).unwrap();
//! config.connections = 128;
//! let report = load::run(&config, load::RunControl::default()).unwrap();
//! println!("{}", report.to_text());
//! ```

mod config;
mod conn;
mod format;
mod identity;
pub mod idle;
mod log;
mod measured;
mod merge;
mod pacer;
pub mod procfs;
mod report;
mod response;
mod shard;
mod stats;
mod target;
mod thread;

use std::{
    net::{SocketAddr, ToSocketAddrs},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc, Arc,
    },
    time::{Duration, SystemTime},
};

use anyhow::Context;
use conn::{Prepared, Requests, Shared, Template};
use thread::{measure, run_thread, ThreadPlan};
use tls::rustls::pki_types::ServerName;
use tokio::{sync::watch, time::Instant};

pub use config::{ConfigError, LoadConfig, Protocol, ThinkTime};
pub use format::{format_bytes, format_count, format_us};
pub use merge::{merge, read_logs, RunLog, LOG_EXTENSION};
pub use report::{
    IntervalSummary, LatencySummary, Lateness, Percentile, RateSummary, Report, ReportConfig,
    ScheduleReport, SpectrumPoint, GENERATOR_BOUND_SHARE, PERCENTILES,
};
pub use response::{Done, ResponseReader};
pub use shard::{parse_start_at, Shard, JOB_COMPLETION_INDEX};
pub use stats::{Accounting, Errors};
pub use target::{
    parse_header, parse_requests_file, parse_url, request_bytes, RequestSpec, Scheme, Target,
};

/// How often the caller's progress callback runs.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// Descriptors kept free beyond one per connection.
const SPARE_FDS: u64 = 64;

/// A progress sample for a live display.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Time since the start, warm-up included.
    pub elapsed: Duration,
    /// Warm-up plus duration, for a timed run.
    pub planned: Option<Duration>,
    pub warming_up: bool,
    /// Responses so far, warm-up included.
    pub responses: u64,
}

/// Outside control of a run.
#[derive(Default)]
pub struct RunControl {
    /// Set it (from a Ctrl-C handler) to end the run early; results so far are reported.
    pub interrupt: Arc<AtomicBool>,
    pub on_progress: Option<Box<dyn FnMut(Progress) + Send>>,
    /// Called once when the warm-up ends and measuring starts (at once
    /// without a warm-up), within about 10 ms: a caller that samples a
    /// server's CPU time can leave the warm-up out.
    pub on_measure: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for RunControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunControl")
            .field("interrupt", &self.interrupt)
            .finish_non_exhaustive()
    }
}

/// Raises the open-file limit and checks that `connections` fit under it.
pub fn ensure_fd_limit(connections: usize) -> Result<u64, ConfigError> {
    let limit = rlimit::increase_nofile_limit(u64::MAX).unwrap_or(0);
    let needed = connections as u64 + SPARE_FDS;
    if limit != 0 && limit < needed {
        return Err(ConfigError(format!(
            "cannot open {connections} connections: the open-file limit is {limit} \
             (at most {} connections; raise it with `ulimit -n`)",
            limit.saturating_sub(SPARE_FDS)
        )));
    }
    Ok(limit)
}

/// Runs the load and returns its report. Configuration mistakes are
/// [`ConfigError`]s (`sluice load` exits 2 on those).
pub fn run(config: &LoadConfig, mut control: RunControl) -> anyhow::Result<Report> {
    config.validate()?;
    ensure_fd_limit(config.connections())?;
    let shared = Arc::new(prepare(config)?);
    if let Some(at) = config.start_at {
        if wait_until(at, &control.interrupt) {
            return Err(anyhow::anyhow!("interrupted before --start-at"));
        }
    }

    let start = Instant::now();
    let record_from = start + config.warmup;
    let planned = config
        .total_requests
        .is_none()
        .then(|| config.warmup + config.duration);
    let progress: Vec<Arc<AtomicU64>> = (0..config.threads)
        .map(|_| Arc::new(AtomicU64::new(0)))
        .collect();
    // Threads hand their intervals to this thread, which writes the log.
    let (windows, handed) = mpsc::channel();
    let measuring_at = SystemTime::now() + config.warmup;
    let mut log = match &config.log {
        Some(path) => Some(
            log::LogWriter::create(
                path,
                measuring_at,
                config.threads,
                &identity::TestIdentity::new(config),
            )
            .with_context(|| format!("cannot write the log {}", path.display()))?,
        ),
        None => None,
    };

    let mut workers = Vec::with_capacity(config.threads);
    for (thread, counter) in progress.iter().enumerate() {
        let shared = Arc::clone(&shared);
        let counter = Arc::clone(counter);
        let plan = ThreadPlan {
            thread,
            threads: config.threads,
            shard: config.shard,
            connections: config.connections(),
            all_connections: config.connections,
            rate: config.rate,
            think: config.think,
            ramp: config.ramp,
            start,
            record_from,
        };
        let windows = log.is_some().then(|| windows.clone());
        let handle = std::thread::Builder::new()
            .name(format!("load-{thread}"))
            .spawn(move || run_thread(shared, counter, plan, windows))
            .context("cannot spawn a load thread")?;
        workers.push(handle);
    }

    drop(windows);
    let mut last_progress = start;
    let interrupted = loop {
        if let Some(log) = &mut log {
            write_windows(log, &handed)?;
        }
        let now = Instant::now();
        if now >= record_from {
            if let Some(measuring) = control.on_measure.take() {
                measuring();
            }
        }
        if control.interrupt.load(Ordering::Relaxed) {
            break true;
        }
        if shared.stopped.load(Ordering::Relaxed) || planned.is_some_and(|p| now >= start + p) {
            break false;
        }
        if now >= last_progress + PROGRESS_EVERY {
            last_progress = now;
            if let Some(report) = &mut control.on_progress {
                report(Progress {
                    elapsed: now - start,
                    planned,
                    warming_up: now < record_from,
                    responses: progress.iter().map(|c| c.load(Ordering::Relaxed)).sum(),
                });
            }
        }
        let until_end = planned.map_or(Duration::MAX, |p| {
            (start + p).saturating_duration_since(now)
        });
        std::thread::sleep(until_end.min(Duration::from_millis(10)));
    };
    shared.request_stop();
    let stopped_at = shared
        .stopped_at
        .get()
        .copied()
        .unwrap_or_else(Instant::now);

    let mut results = Vec::with_capacity(workers.len());
    for worker in workers {
        results.push(
            worker
                .join()
                .map_err(|_| anyhow::anyhow!("a load thread panicked"))??,
        );
    }
    if let Some(why) = shared.fatal.get() {
        return Err(ConfigError(why.clone()).into());
    }
    let elapsed = stopped_at.saturating_duration_since(record_from);
    let mut measured = measure(results, elapsed, interrupted);
    let report_config = ReportConfig::new(config);
    if let Some(mut log) = log {
        write_windows(&mut log, &handed)?;
        let summary = measured.log_summary(&report_config, measuring_at);
        let path = log.path().display().to_string();
        measured.intervals = log
            .finish(&summary)
            .with_context(|| format!("cannot write the log {path}"))?;
    }
    Ok(Report::build(report_config, measured, 0))
}

/// Sleeps until the wall-clock time `at`; true if interrupted first. A
/// time already past starts at once, with a warning: this shard is late.
fn wait_until(at: SystemTime, interrupt: &AtomicBool) -> bool {
    if let Err(late) = at.duration_since(SystemTime::now()) {
        // `sluice load` sets up no logging: straight to stderr, where the
        // report of a `--log -` run goes too.
        eprintln!(
            "sluice load: warning: --start-at was {:.3}s ago: starting now, late against the other shards",
            late.duration().as_secs_f64()
        );
        return false;
    }
    while let Ok(left) = at.duration_since(SystemTime::now()) {
        if interrupt.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(10)));
    }
    false
}

/// Writes the intervals the threads handed over so far.
fn write_windows(
    log: &mut log::LogWriter,
    handed: &mpsc::Receiver<(u64, stats::Figures)>,
) -> anyhow::Result<()> {
    while let Ok((index, figures)) = handed.try_recv() {
        log.add(index, figures)
            .with_context(|| format!("cannot write the log {}", log.path().display()))?;
    }
    Ok(())
}

fn prepare(config: &LoadConfig) -> Result<Shared, ConfigError> {
    let target = &config.target;
    let addr = resolve(&target.host, target.port)?;
    let name = match target.scheme {
        Scheme::Http => None,
        Scheme::Https => Some(ServerName::try_from(target.host.clone()).map_err(|_| {
            ConfigError(format!("`{}` is not a valid TLS server name", target.host))
        })?),
    };
    let (tls, quic) = match (name, config.protocol) {
        (None, _) => (None, None),
        (Some(_), Protocol::Http3) => (
            None,
            Some(conn::Dialer::new(client_tls(config)?, &target.host, addr)?),
        ),
        (Some(name), _) => {
            let connector = tls::tokio_rustls::TlsConnector::from(Arc::new(client_tls(config)?));
            (Some((connector, name)), None)
        }
    };
    let requests = match config.protocol {
        Protocol::Http1 => Requests::Http1(
            config
                .requests
                .iter()
                .map(|spec| Prepared {
                    bytes: request_bytes(spec, target, &config.headers, &config.body),
                    head: spec.method == http::Method::HEAD,
                })
                .collect(),
        ),
        Protocol::Http2 => Requests::Http2(templates(config)?),
        Protocol::Http3 => Requests::Http3(templates(config)?),
    };
    let (stop, _) = watch::channel(false);
    Ok(Shared {
        addr,
        target: target.clone(),
        tls,
        quic,
        requests,
        pipeline: config.pipeline,
        streams: config.streams,
        timeout: config.timeout,
        budget: config.total_requests().map(AtomicU64::new),
        total: config.total_requests(),
        finished: AtomicU64::new(0),
        stopped: AtomicBool::new(false),
        stopped_at: std::sync::OnceLock::new(),
        stop,
        fatal: std::sync::OnceLock::new(),
    })
}

/// The HTTP/2 and HTTP/3 request heads, built once.
fn templates(config: &LoadConfig) -> Result<Vec<Template>, ConfigError> {
    config
        .requests
        .iter()
        .map(|spec| {
            Ok(Template {
                head: target::h2_request(spec, &config.target, &config.headers, &config.body)
                    .map_err(ConfigError)?,
                body: config.body.clone(),
            })
        })
        .collect()
}

/// The TLS client: ALPN `h3`, `h2` or `http/1.1` as the run speaks;
/// `--insecure` before `--cacert` before the built-in web roots.
fn client_tls(config: &LoadConfig) -> Result<tls::rustls::ClientConfig, ConfigError> {
    let trust = match (&config.cacert, config.insecure) {
        (_, true) => tls::Trust::AnyCertificate,
        (Some(path), false) => tls::Trust::CaFile(path),
        (None, false) => tls::Trust::WebRoots,
    };
    let alpn = match config.protocol {
        Protocol::Http1 => tls::ALPN_HTTP11,
        Protocol::Http2 => tls::ALPN_H2,
        Protocol::Http3 => conn::ALPN_H3,
    };
    tls::client_config(trust, None, &[alpn]).map_err(|err| match err.path {
        Some(_) => ConfigError(format!("--cacert {err}")),
        None => ConfigError(format!("TLS setup failed: {err}")),
    })
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, ConfigError> {
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| ConfigError(format!("cannot resolve host `{host}`")))
}
