//! Workers, listeners and graceful shutdown.
//!
//! With `runtime: per_core` (the default) each worker is an OS thread with
//! a current-thread Tokio runtime, its own `SO_REUSEPORT` listener per
//! configured address (the kernel spreads connections across workers), its
//! own upstream connection pool and its own metrics shard: a request never
//! crosses a core and takes no contended lock. With `runtime: multi_thread`
//! one work-stealing runtime runs every connection and shares one pool,
//! which evens out uneven connections at the price of cross-core traffic.
//! The admin listener, reloads and discovery share one more thread.

mod accept;
mod acme;
mod acme_certs;
pub(crate) mod admin;
mod bound;
mod control;
mod h2;
mod h3;
mod health_checks;
pub(crate) mod listener;
mod proxied;
mod reload;
mod resets;
mod shown;
mod upstreams;

pub use reload::LogHook;
pub use shown::shown as shown_config;

use std::{
    net::{SocketAddr, TcpListener as StdListener},
    path::{Path, PathBuf},
    sync::Arc,
    thread::JoinHandle,
    time::Duration,
};

use anyhow::Context;
use tokio::sync::{mpsc::UnboundedReceiver, watch, Semaphore};
use tracing::{info, warn};

use crate::{
    config::{Config, Runtime},
    plan::{Compile, Plan, Plans, WorkerPlan},
    session::{run_parking_lot, Parked, ParkingLot, Worker},
    telemetry::Metrics,
    upstream::{
        discovery::{self, Answers},
        h2_pool::H2Pool,
        pool::Pool,
    },
};
use listener::Endpoint;

/// A proxy serving until [`RunningProxy::shutdown`].
#[derive(Debug)]
pub struct RunningProxy {
    /// Bound listener addresses, in configuration order (real ports for port 0).
    pub listeners: Vec<SocketAddr>,
    pub admin: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    parking: Arc<ParkingLot>,
    threads: Vec<JoinHandle<()>>,
}

impl RunningProxy {
    /// Stops accepting; requests in flight may finish until the shutdown
    /// deadline, then what is left is closed. Blocks until every thread is done.
    pub fn shutdown(self) {
        let _ = self.shutdown.send(true);
        self.parking.stop();
        for thread in self.threads {
            if thread.join().is_err() {
                warn!("a proxy thread panicked during shutdown");
            }
        }
    }
}

/// Everything `start` would do before binding: compiles the plan (hosts
/// resolved, handlers built) and reads every TLS listener's files.
/// It writes nothing: an ACME listener whose files are still to be made
/// (start writes a placeholder there) gets its placeholder made in memory
/// and its files left unread.
pub fn check(config: &Config) -> anyhow::Result<()> {
    Plan::compile(config, 1)?;
    for (i, listener) in config.listeners.iter().enumerate() {
        let context = || format!("listeners[{i}].tls");
        let first_acme = listener.tls.as_ref().and_then(|tls| {
            let (cert, key) = (Path::new(&tls.cert.value), Path::new(&tls.key.value));
            tls.acme
                .as_ref()
                .filter(|_| acme_certs::needs_placeholder(cert, key))
        });
        match first_acme {
            Some(acme) => {
                acme_certs::placeholder_pems(acme).with_context(context)?;
            }
            None => {
                Endpoint::new(listener).with_context(context)?;
            }
        }
    }
    Ok(())
}

/// What each configured listener serves, its TLS files read.
fn endpoints(config: &Config) -> anyhow::Result<Vec<Endpoint>> {
    config
        .listeners
        .iter()
        .enumerate()
        .map(|(i, listener)| Endpoint::new(listener).with_context(|| format!("listeners[{i}].tls")))
        .collect()
}

/// Where the configuration came from, and what may change it.
#[derive(Default)]
pub struct Options {
    /// The file it was read from: SIGHUP and `POST /reload` read it again.
    pub file: Option<PathBuf>,
    /// Reload when the file's directory changes (`--watch`).
    pub watch: bool,
    /// Applies new `log` settings (level, format); without it, a change
    /// is logged only.
    pub log: Option<LogHook>,
    /// Called on each worker thread once a second: the binary lets its
    /// allocator give back pages that stayed free (crates/sluice/src/allocator.rs).
    pub worker_tick: Option<fn()>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("file", &self.file)
            .field("watch", &self.watch)
            .finish_non_exhaustive()
    }
}

/// [`start_with`] a configuration that no file backs (nothing to reload).
pub fn start(config: &Config) -> anyhow::Result<RunningProxy> {
    start_with(config.clone(), Options::default())
}

/// Compiles `config`, binds every listener (failing before serving
/// anything if one cannot be bound) and starts the workers, the admin
/// listener and the control thread (reloads, discovery).
pub fn start_with(config: Config, options: Options) -> anyhow::Result<RunningProxy> {
    let workers = config
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if workers == 0 {
        anyhow::bail!("workers must be at least 1");
    }
    for warning in crate::config::warnings(&config) {
        warn!("{warning}");
    }
    // Runtimes, each with its own listeners, pools and metrics shard.
    let runtimes = match config.runtime {
        Runtime::PerCore => workers,
        Runtime::MultiThread => 1,
    };
    let metrics = Arc::new(Metrics::new(runtimes));
    let answers = discovery::resolve_blocking(&config, &Answers::new())?;
    let plan = Arc::new(Plan::compile_with(
        &config,
        &Compile {
            shards: runtimes,
            metrics: &metrics,
            answers: &answers,
            previous: None,
            check: false,
        },
    )?);
    let plans = Arc::new(Plans::new(Arc::clone(&plan)));
    let endpoints = endpoints(&config)?;

    // Bind everything first: a port in use must fail the start, not a worker.
    let (mut bound, per_worker) = bound::Bound::bind(&config, endpoints, runtimes)?;
    let addresses = bound.addresses();
    let admin_listener = match &config.admin {
        Some(admin) => {
            let wanted: SocketAddr = admin.address.value.parse()?;
            Some(
                http1::io::bind_shared(wanted)
                    .with_context(|| format!("cannot listen on {wanted} (admin)"))?,
            )
        }
        None => None,
    };
    let admin_addr = admin_listener
        .as_ref()
        .map(StdListener::local_addr)
        .transpose()?;

    let (shutdown, _) = watch::channel(false);
    let connections = Arc::new(Semaphore::new(config.limits.max_connections));
    let deadline = config.limits.shutdown_deadline;
    let mut threads = Vec::new();
    let mut listener_changes = Vec::new();
    // Its thread starts last, when nothing can fail any more.
    let (parking, parking_poll) = ParkingLot::new().context("cannot make the parking lot")?;
    for (index, listeners) in per_worker.into_iter().enumerate() {
        let (changes, changed) = tokio::sync::mpsc::unbounded_channel();
        listener_changes.push(changes);
        let (unparked, unparked_rx) = tokio::sync::mpsc::unbounded_channel();
        let worker = Arc::new(Worker {
            pool: Pool::new(index),
            h2_pool: H2Pool::new(index),
            plans: WorkerPlan::new(Arc::clone(&plans)),
            metrics: Arc::clone(&metrics),
            index,
            parking: Arc::clone(&parking),
            unparked,
        });
        let shutdown = shutdown.subscribe();
        let connections = Arc::clone(&connections);
        // A multi-thread runtime runs its own workers; this thread only waits.
        let threads_in_runtime = (config.runtime == Runtime::MultiThread).then_some(workers);
        let tick = options.worker_tick;
        threads.push(
            std::thread::Builder::new()
                .name(format!("proxy-worker-{index}"))
                .spawn(move || {
                    run_worker(
                        tick,
                        threads_in_runtime,
                        Accepting {
                            listeners,
                            changes: changed,
                            connections,
                            unparked: unparked_rx,
                        },
                        worker,
                        shutdown,
                        deadline,
                    );
                })
                .context("cannot spawn a worker thread")?,
        );
    }
    bound.connect(listener_changes);
    let watch_file = options.watch.then(|| options.file.clone()).flatten();
    let reloader = Arc::new(reload::Reloader::new(
        options.file,
        config,
        answers,
        Arc::clone(&plans),
        Arc::clone(&metrics),
        runtimes,
        bound,
        connections,
        options.log,
    ));
    {
        let control_shutdown = shutdown.subscribe();
        // Active health checks run here too: once per process.
        let health_plans = Arc::clone(&plans);
        let health_shutdown = shutdown.subscribe();
        let admin_shutdown = shutdown.subscribe();
        let admin = admin_listener.map(|listener| {
            let state = admin::AdminState::new(Arc::clone(&plans), metrics, Arc::clone(&reloader));
            (listener, state)
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot build the control runtime")?;
        // SIGHUP is caught from here on: a reload signalled as soon as the
        // proxy says it serves must not meet the default action (exit).
        let hangups = {
            let _context = runtime.enter();
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
                .context("cannot listen for SIGHUP")?
        };
        // One thread for the admin API and what changes the configuration.
        threads.push(
            std::thread::Builder::new()
                .name("proxy-control".into())
                .spawn(move || {
                    runtime.block_on(async move {
                        let admin = async move {
                            if let Some((listener, state)) = admin {
                                admin::run(listener, state, admin_shutdown).await;
                            }
                        };
                        tokio::join!(
                            control::run(reloader, hangups, watch_file, control_shutdown),
                            admin,
                            health_checks::run(health_plans, health_shutdown),
                        );
                    });
                })
                .context("cannot spawn the control thread")?,
        );
    }
    {
        let parking = Arc::clone(&parking);
        threads.push(
            std::thread::Builder::new()
                .name("proxy-parking".into())
                .spawn(move || run_parking_lot(&parking, parking_poll))
                .context("cannot spawn the parking lot's thread")?,
        );
    }
    info!(listeners = ?addresses, admin = ?admin_addr, workers, "proxy serving");
    Ok(RunningProxy {
        listeners: addresses,
        admin: admin_addr,
        shutdown,
        parking,
        threads,
    })
}

/// What a worker accepts and serves connections with.
struct Accepting {
    listeners: bound::WorkerSockets,
    /// Listeners a reload adds, changes or removes.
    changes: UnboundedReceiver<accept::ListenerChanges>,
    /// Permits for `limits.max_connections`, shared by the workers.
    connections: Arc<Semaphore>,
    /// Parked connections whose clients sent again.
    unparked: UnboundedReceiver<Parked>,
}

/// Builds the worker's runtime (current-thread, or multi-thread with
/// `threads`) and serves on it.
/// Calls `tick` once a second until the worker's runtime is dropped.
async fn every_second(tick: fn()) {
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        tick();
    }
}

fn run_worker(
    tick: Option<fn()>,
    threads: Option<usize>,
    accepting: Accepting,
    worker: Arc<Worker>,
    shutdown: watch::Receiver<bool>,
    deadline: Duration,
) {
    let runtime = match threads {
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Some(threads) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("proxy-worker")
            .enable_all()
            .build(),
    };
    match runtime {
        Ok(runtime) => {
            if let Some(tick) = tick {
                runtime.spawn(every_second(tick));
            }
            runtime.block_on(accept::serve(accepting, worker, shutdown, deadline))
        }
        Err(err) => warn!(%err, "cannot build a worker runtime"),
    }
}
