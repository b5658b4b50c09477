//! One run of one configuration: its threads, the loop that watches the
//! clock, the progress and the intervals, and what it measured.

use std::{
    net::{SocketAddr, ToSocketAddrs},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc, Arc,
    },
    time::{Duration, SystemTime},
};

use anyhow::Context;
use tls::rustls::pki_types::ServerName;
use tokio::{sync::watch, time::Instant};

use crate::{
    checks::CheckSet,
    conn::{self, Prepared, Requests, Shared, Template},
    ensure_fd_limit,
    figures::Figures,
    identity::TestIdentity,
    intervals::Collector,
    live::Feed,
    log,
    measured::Measured,
    stages::Curve,
    target::{self, request_bytes},
    thread::{measure, run_thread, ThreadPlan, ThreadShare},
    ConfigError, LoadConfig, Progress, Protocol, Report, ReportConfig, RunControl, Scheme,
};

/// How often the caller's progress callback runs.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Runs the load and returns its report. Configuration mistakes are
/// [`ConfigError`]s (`sluice load` exits 2 on those).
pub fn run(config: &LoadConfig, control: RunControl) -> anyhow::Result<Report> {
    let (report_config, measured) = run_measured(config, control, None)?;
    Ok(Report::build(report_config, measured, 0))
}

/// Runs the load; what it measured, before it becomes a report. Each
/// complete interval also goes to `live`.
pub(crate) fn run_measured(
    config: &LoadConfig,
    mut control: RunControl,
    live: Option<Feed>,
) -> anyhow::Result<(ReportConfig, Measured)> {
    config.validate()?;
    ensure_fd_limit(config.connections())?;
    let shared = Arc::new(prepare(config)?);
    let dns = shared.resolved;
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
    let share = thread_share(config, start);
    // Threads hand their intervals to this thread, which writes the log
    // and feeds the live figures.
    let (windows, handed) = mpsc::channel();
    let measuring_at = SystemTime::now() + config.warmup;
    let log = match &config.log {
        Some(path) => Some(
            log::LogWriter::create(path, measuring_at, &TestIdentity::new(config))
                .with_context(|| format!("cannot write the log {}", path.display()))?,
        ),
        None => None,
    };
    let takes_intervals = log.is_some() || live.is_some() || config.intervals;
    let mut collector = Collector::new(config.threads, log, live);
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
        let windows = takes_intervals.then(|| windows.clone());
        let share = share.clone();
        let handle = std::thread::Builder::new()
            .name(format!("load-{thread}"))
            .spawn(move || run_thread(shared, counter, plan, share, windows))
            .context("cannot spawn a load thread")?;
        workers.push(handle);
    }

    drop(windows);
    let mut last_progress = start;
    let interrupted = loop {
        take_windows(&mut collector, &handed)?;
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
    let mut measured = measure(results, &share.shape, elapsed, interrupted);
    // One lookup for the run, before it started.
    measured
        .figures
        .phases
        .dns
        .saturating_record(crate::figures::whole_micros(dns));
    let report_config = ReportConfig::new(config);
    // What the threads handed over at their end: the last interval may be
    // partial, which only the collector's finish knows.
    while let Ok((index, figures)) = handed.try_recv() {
        collector.add_last(index, figures);
    }
    let summary = measured.log_summary(&report_config, measuring_at);
    let path = collector.log_path().unwrap_or_default();
    measured.intervals = collector
        .finish(elapsed, Some(&summary))
        .with_context(|| format!("cannot write the log {path}"))?;
    Ok((report_config, measured))
}

/// The stages, as the threads use them, and the figures' shape.
fn thread_share(config: &LoadConfig, start: Instant) -> ThreadShare {
    let curve = config
        .stages
        .as_ref()
        .map(|stages| Arc::new(Curve::new(stages)));
    let stage_ends = config.stages.as_ref().map(|stages| {
        let mut end = start;
        stages
            .steps
            .iter()
            .map(|stage| {
                end += stage.duration;
                end
            })
            .collect()
    });
    ThreadShare {
        curve,
        stage_ends,
        shape: Arc::new(Figures::new(config.rate.is_some(), config.checks.len())),
    }
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

/// Takes the intervals the threads handed over so far.
fn take_windows(
    collector: &mut Collector,
    handed: &mpsc::Receiver<(u64, Figures)>,
) -> anyhow::Result<()> {
    while let Ok((index, figures)) = handed.try_recv() {
        collector.add(index, figures).with_context(|| {
            format!(
                "cannot write the log {}",
                collector.log_path().unwrap_or_default()
            )
        })?;
    }
    Ok(())
}

fn prepare(config: &LoadConfig) -> Result<Shared, ConfigError> {
    let target = &config.target;
    let resolving = std::time::Instant::now();
    let addr = resolve(&target.host, target.port)?;
    let resolved = resolving.elapsed();
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
        rotation: config.rotation(),
        checks: CheckSet::new(&config.checks, config.check_body_limit),
        resolved,
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
                body: spec.body_or(&config.body).clone(),
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
