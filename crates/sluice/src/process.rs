//! What every long-running subcommand does the same way: logging, and a
//! graceful stop on SIGTERM or SIGINT (a second signal exits at once).

use std::{sync::Mutex, time::Duration};

use anyhow::Context;
use clap::ValueEnum;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tracing::{info, warn};
use tracing_subscriber::{
    fmt,
    layer::{Layered, SubscriberExt as _},
    reload,
    util::SubscriberInitExt as _,
    EnvFilter, Layer, Registry,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// What the stderr output layer sees: the registry under the level filter.
type Filtered = Layered<reload::Layer<EnvFilter, Registry>, Registry>;
/// The stderr output in one format, boxed so that a reload can swap it.
type Output = Box<dyn Layer<Filtered> + Send + Sync>;

fn output(format: LogFormat) -> Output {
    match format {
        LogFormat::Text => fmt::layer().with_writer(std::io::stderr).boxed(),
        LogFormat::Json => fmt::layer().json().with_writer(std::io::stderr).boxed(),
    }
}

/// The process's logging, as a configuration reload changes it.
pub(crate) struct Logging {
    level: reload::Handle<EnvFilter, Registry>,
    output: reload::Handle<Output, Filtered>,
    /// `RUST_LOG` is set: it wins over the configured level.
    level_from_env: bool,
    current: Mutex<(LogFormat, Option<String>)>,
}

/// Logs to stderr; `RUST_LOG` wins over `level`, which defaults to `info`.
pub(crate) fn init_logging(format: LogFormat, level: Option<&str>) -> Logging {
    let from_env = EnvFilter::try_from_default_env().ok();
    let level_from_env = from_env.is_some();
    let filter = from_env.unwrap_or_else(|| EnvFilter::new(level.unwrap_or("info")));
    let (filter, level_handle) = reload::Layer::new(filter);
    let (output, output_handle) = reload::Layer::new(output(format));
    tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .init();
    Logging {
        level: level_handle,
        output: output_handle,
        level_from_env,
        current: Mutex::new((format, level.map(str::to_owned))),
    }
}

impl Logging {
    /// Applies a new format and level (a configuration reload); the level
    /// does not change while `RUST_LOG` is set.
    pub(crate) fn apply(&self, format: LogFormat, level: Option<&str>) {
        let Ok(mut current) = self.current.lock() else {
            return;
        };
        if current.0 != format {
            match self.output.reload(output(format)) {
                Ok(()) => info!(?format, "log format changed"),
                Err(err) => warn!(%err, "cannot change the log format"),
            }
        }
        if current.1.as_deref() != level && !self.level_from_env {
            let level = level.unwrap_or("info");
            match self.level.reload(EnvFilter::new(level)) {
                Ok(()) => info!(level, "log level changed"),
                Err(err) => warn!(%err, "cannot change the log level"),
            }
        }
        *current = (format, level.map(str::to_owned));
    }
}

impl std::fmt::Debug for Logging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Logging")
    }
}

/// Catches SIGHUP from here on, doing nothing with it until the proxy
/// installs its reload handler: a `systemctl reload` while the proxy
/// starts (reading its file, resolving host names) must not meet the
/// default action, which ends the process. A handler, once installed,
/// stays for the life of the process, so the runtime made for it may go.
pub(crate) fn ignore_hangups() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build the signal runtime")?;
    runtime.block_on(async {
        let _installed = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
        Ok(())
    })
}

/// SIGTERM and SIGINT, caught from the moment this is made: make it
/// before announcing that the process serves, so that a signal sent right
/// after the announcement drains instead of killing.
pub(crate) struct StopSignals {
    runtime: tokio::runtime::Runtime,
    streams: SignalStreams,
}

struct SignalStreams {
    term: Signal,
    int: Signal,
}

impl SignalStreams {
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

impl StopSignals {
    pub(crate) fn listen() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot build the signal runtime")?;
        let streams = runtime.block_on(async {
            anyhow::Ok(SignalStreams {
                term: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
                int: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
            })
        })?;
        Ok(Self { runtime, streams })
    }

    /// Blocks until SIGTERM or SIGINT, then runs `shutdown` (which drains
    /// until `deadline`); a second signal meanwhile exits with status 130.
    pub(crate) fn drain(
        self,
        deadline: Duration,
        shutdown: impl FnOnce() + Send + 'static,
    ) -> anyhow::Result<()> {
        let Self {
            runtime,
            mut streams,
        } = self;
        let first = runtime.block_on(streams.next());
        info!(signal = first, ?deadline, "shutting down");
        let draining = std::thread::spawn(shutdown);
        std::thread::spawn(move || {
            let second = runtime.block_on(streams.next());
            warn!(signal = second, "second signal; exiting without draining");
            std::process::exit(130);
        });
        draining
            .join()
            .map_err(|_| anyhow::anyhow!("shutdown panicked"))
    }
}

impl std::fmt::Debug for StopSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopSignals")
    }
}
