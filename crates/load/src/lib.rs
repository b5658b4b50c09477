//! `sluice load`: an HTTP/1.1 and HTTP/2 load generator.
//!
//! Closed model (wrk, h2load): `-c` connections over `-t` threads, each
//! connection keeping `--pipeline` HTTP/1.1 requests or `--streams` HTTP/2
//! streams in flight. Open model (wrk2): `--rate`
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
pub mod idle;
mod pacer;
mod report;
mod response;
mod stats;
mod target;

use std::{
    cell::RefCell,
    net::{SocketAddr, ToSocketAddrs},
    rc::Rc,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use anyhow::Context;
use conn::{Client, Prepared, Requests, Shared, Template};
use pacer::{Pace, Pacer, Schedule};
use tls::rustls::pki_types::ServerName;
use tokio::{sync::watch, time::Instant};

pub use config::{ConfigError, LoadConfig, Protocol, ThinkTime};
pub use report::{
    format_bytes, format_count, format_us, LatencySummary, Lateness, Percentile, RateSummary,
    Report, ReportConfig, ScheduleReport, SpectrumPoint, GENERATOR_BOUND_SHARE, PERCENTILES,
};
pub use response::{Done, ResponseReader};
pub use stats::Errors;
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
    ensure_fd_limit(config.connections)?;
    let shared = Arc::new(prepare(config)?);

    let start = Instant::now();
    let record_from = start + config.warmup;
    let planned = config
        .total_requests
        .is_none()
        .then(|| config.warmup + config.duration);
    let progress: Vec<Arc<AtomicU64>> = (0..config.threads)
        .map(|_| Arc::new(AtomicU64::new(0)))
        .collect();

    let mut workers = Vec::with_capacity(config.threads);
    for (thread, counter) in progress.iter().enumerate() {
        let shared = Arc::clone(&shared);
        let counter = Arc::clone(counter);
        let plan = ThreadPlan {
            thread,
            threads: config.threads,
            connections: config.connections,
            rate: config.rate,
            think: config.think,
            ramp: config.ramp,
            start,
            record_from,
        };
        let handle = std::thread::Builder::new()
            .name(format!("load-{thread}"))
            .spawn(move || run_thread(shared, counter, plan))
            .context("cannot spawn a load thread")?;
        workers.push(handle);
    }

    let mut last_progress = start;
    let interrupted = loop {
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
    Ok(build_report(config, results, elapsed, interrupted))
}

fn prepare(config: &LoadConfig) -> Result<Shared, ConfigError> {
    let target = &config.target;
    let addr = resolve(&target.host, target.port)?;
    let tls = match target.scheme {
        Scheme::Http => None,
        Scheme::Https => {
            let name = ServerName::try_from(target.host.clone()).map_err(|_| {
                ConfigError(format!("`{}` is not a valid TLS server name", target.host))
            })?;
            Some((connector(config)?, name))
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
        Protocol::Http2 => Requests::Http2(
            config
                .requests
                .iter()
                .map(|spec| {
                    Ok(Template {
                        head: target::h2_request(spec, target, &config.headers, &config.body)
                            .map_err(ConfigError)?,
                        body: config.body.clone(),
                    })
                })
                .collect::<Result<_, ConfigError>>()?,
        ),
    };
    let (stop, _) = watch::channel(false);
    Ok(Shared {
        addr,
        target: target.clone(),
        tls,
        requests,
        pipeline: config.pipeline,
        streams: config.streams,
        timeout: config.timeout,
        budget: config.total_requests.map(AtomicU64::new),
        total: config.total_requests,
        finished: AtomicU64::new(0),
        stopped: AtomicBool::new(false),
        stopped_at: std::sync::OnceLock::new(),
        stop,
        fatal: std::sync::OnceLock::new(),
    })
}

/// The TLS client: ALPN `h2` or `http/1.1` as the run speaks; `--insecure`
/// before `--cacert` before the built-in web roots.
fn connector(config: &LoadConfig) -> Result<tls::tokio_rustls::TlsConnector, ConfigError> {
    let trust = match (&config.cacert, config.insecure) {
        (_, true) => tls::Trust::AnyCertificate,
        (Some(path), false) => tls::Trust::CaFile(path),
        (None, false) => tls::Trust::WebRoots,
    };
    let alpn = match config.protocol {
        Protocol::Http1 => tls::ALPN_HTTP11,
        Protocol::Http2 => tls::ALPN_H2,
    };
    let client = tls::client_config(trust, None, &[alpn]).map_err(|err| match err.path {
        Some(_) => ConfigError(format!("--cacert {err}")),
        None => ConfigError(format!("TLS setup failed: {err}")),
    })?;
    Ok(tls::tokio_rustls::TlsConnector::from(Arc::new(client)))
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, ConfigError> {
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| ConfigError(format!("cannot resolve host `{host}`")))
}

#[derive(Debug, Clone, Copy)]
struct ThreadPlan {
    thread: usize,
    threads: usize,
    connections: usize,
    rate: Option<f64>,
    think: Option<config::ThinkTime>,
    ramp: Duration,
    start: Instant,
    record_from: Instant,
}

impl ThreadPlan {
    /// The users model's pacing of connection `index`: its first request
    /// at `start + ramp * index / connections`, its think times drawn from
    /// a generator seeded with its index (runs are repeatable). `None` for
    /// the plain closed and open models.
    fn pace(&self, index: usize) -> Option<Pace> {
        if self.think.is_none() && self.ramp.is_zero() {
            return None;
        }
        let offset = self.ramp.as_nanos() * index as u128 / self.connections as u128;
        Some(Pace::new(
            self.start + Duration::from_nanos(offset as u64),
            self.think,
            index as u64,
        ))
    }
}

/// What one thread brings back.
struct ThreadResult {
    stats: stats::Stats,
    max_lag: Duration,
    unsent: u64,
}

fn run_thread(
    shared: Arc<Shared>,
    progress: Arc<AtomicU64>,
    plan: ThreadPlan,
) -> anyhow::Result<ThreadResult> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build a load runtime")?;
    let local = tokio::task::LocalSet::new();
    // Clients create their timers up front, which needs the runtime's context.
    let _context = runtime.enter();
    let stats = Rc::new(RefCell::new(stats::Stats::new(
        plan.record_from,
        plan.rate.is_some(),
    )));
    // The open model sends on time to the microsecond: one pacer per
    // thread, whose task ends with the `LocalSet`.
    let spacing = |rate| Duration::from_secs_f64(plan.threads as f64 / rate);
    let pacer = plan.rate.map(|rate| Pacer::new(spacing(rate))).transpose();
    let (pacer, drive) = pacer.context("cannot create the pacer's timer")?.unzip();
    let clients: Vec<Client> = (plan.thread..plan.connections)
        .step_by(plan.threads)
        .map(|index| {
            let schedule = plan.rate.map(|rate| Schedule {
                // Connections take turns so that the total is evenly spaced.
                next: plan.start + Duration::from_secs_f64(index as f64 / rate),
                interval: Duration::from_secs_f64(plan.connections as f64 / rate),
            });
            Client::new(
                Arc::clone(&shared),
                Rc::clone(&stats),
                Arc::clone(&progress),
                index,
                schedule,
                plan.pace(index),
                pacer.as_ref(),
            )
        })
        .collect();
    let clients = local.block_on(&runtime, async {
        if let Some(drive) = drive {
            tokio::task::spawn_local(drive);
        }
        let tasks: Vec<_> = clients
            .into_iter()
            .map(|mut client| {
                tokio::task::spawn_local(async move {
                    client.run().await;
                    client
                })
            })
            .collect();
        let mut finished = Vec::with_capacity(tasks.len());
        for task in tasks {
            finished.push(task.await.context("a load connection panicked")?);
        }
        anyhow::Ok(finished)
    })?;
    let now = Instant::now();
    let mut max_lag = Duration::ZERO;
    let mut unsent = 0;
    // A `-n` run ends when its budget is spent: nothing is "behind" then.
    if let (Some(rate), None) = (plan.rate, shared.total) {
        let interval = plan.connections as f64 / rate;
        for client in &clients {
            let lag = client.lag(now);
            max_lag = max_lag.max(lag);
            // The request at the head of the timetable is itself due.
            if !lag.is_zero() {
                unsent += (lag.as_secs_f64() / interval) as u64 + 1;
            }
        }
    }
    drop(clients);
    let stats = Rc::try_unwrap(stats)
        .map_err(|_| anyhow::anyhow!("statistics still shared after the run"))?
        .into_inner();
    Ok(ThreadResult {
        stats,
        max_lag,
        unsent,
    })
}

fn build_report(
    config: &LoadConfig,
    results: Vec<ThreadResult>,
    elapsed: Duration,
    interrupted: bool,
) -> Report {
    let whole_seconds = elapsed.as_secs() as usize;
    let mut thread_samples = Vec::new();
    let mut merged: Option<stats::Stats> = None;
    let mut max_lag = Duration::ZERO;
    let mut unsent = 0;
    for result in &results {
        // Seconds without a response count as zero, not as missing.
        thread_samples.extend(
            (0..whole_seconds)
                .map(|second| result.stats.per_second.get(second).copied().unwrap_or(0)),
        );
        max_lag = max_lag.max(result.max_lag);
        unsent += result.unsent;
    }
    for result in results {
        match &mut merged {
            None => merged = Some(result.stats),
            Some(all) => all.merge(&result.stats),
        }
    }
    let all = merged.unwrap_or_else(|| stats::Stats::new(Instant::now(), false));
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let requests_per_sec = all.responses as f64 / seconds;
    let status = all
        .status
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(code, &n)| (code as u16, n))
        .collect::<std::collections::BTreeMap<_, _>>();
    let non_2xx_3xx = status
        .iter()
        .filter(|(code, _)| !(200..400).contains(*code))
        .map(|(_, n)| n)
        .sum();
    let uncorrected = all.uncorrected.as_ref().map(LatencySummary::from_histogram);
    let lateness = all.lateness.as_ref().map(Lateness::from_histogram);
    let schedule = (config.rate)
        .map(|rate| ScheduleReport::new(rate, requests_per_sec, max_lag, unsent, lateness));
    // Whole seconds only: a last partial second would read as a drop.
    let mut per_second = all.per_second.clone();
    per_second.resize(whole_seconds.max(1), 0);
    Report {
        tool: format!("sluice load {}", env!("CARGO_PKG_VERSION")),
        config: ReportConfig {
            target: config.target.to_string(),
            urls: config
                .requests
                .iter()
                .map(|r| format!("{} {}", r.method, r.url))
                .collect(),
            threads: config.threads,
            connections: config.connections,
            duration_s: config
                .total_requests
                .is_none()
                .then_some(config.duration.as_secs_f64()),
            total_requests: config.total_requests,
            protocol: config.protocol,
            pipeline: config.pipeline,
            streams: config.streams,
            rate: config.rate,
            timeout_ms: config.timeout.as_millis() as u64,
            warmup_s: config.warmup.as_secs_f64(),
            think_ms: config
                .think
                .map(|t| [t.min.as_millis() as u64, t.max.as_millis() as u64]),
            ramp_s: config.ramp.as_secs_f64(),
        },
        elapsed_s: elapsed.as_secs_f64(),
        requests: all.responses,
        bytes_read: all.bytes_read,
        requests_per_sec,
        bytes_per_sec: all.bytes_read as f64 / seconds,
        latency: LatencySummary::from_histogram(&all.latency),
        thread_rate: RateSummary::from_samples(&thread_samples),
        per_second,
        errors: all.errors,
        status,
        non_2xx_3xx,
        schedule: schedule.map(|s| s.judged(uncorrected.as_ref())),
        uncorrected_latency: uncorrected,
        interrupted,
    }
}
